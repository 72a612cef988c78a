"""Worker processes for ``oanp verify``: a bundle's logs checked on every core it may use.

:class:`Workers` maps a task over items in worker processes, the results in the items' order,
with a few items handed out ahead of each worker and no more: the items are read as the
workers take them (a bundle's lines, as the reader comes to them), never all held at once.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from types import TracebackType
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def usable_cores() -> int:
    """How many cores this process may run on: its affinity, where the system says it."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Workers:
    """``jobs`` worker processes, started at the first task and stopped on leaving."""

    def __init__(self, jobs: int) -> None:
        self._executor = ProcessPoolExecutor(max_workers=jobs)
        # One item for each worker to take up as it finishes another, beside the one it works
        # on: no worker waits for the reader, and the reader holds little.
        self._ahead = 2 * jobs

    def __enter__(self) -> Workers:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def map(self, task: Callable[[Item], Result], items: Iterable[Item]) -> Iterator[Result]:
        """``task`` of each item, in the items' order, each item read when a worker may soon
        take it; a task's exception is raised where its result would come."""
        pending: deque[Future[Result]] = deque()
        try:
            for item in items:
                pending.append(self._executor.submit(task, item))
                if len(pending) >= self._ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            # Given up on (the caller reads the bundle itself): the work not begun is dropped.
            for future in pending:
                future.cancel()
