"""Asking a dependency a question without ever waiting on it longer than a deadline.

A :class:`Probe` runs its check in a thread of its own and runs it once at a time: callers that
arrive while a check is under way wait on that same run. A dependency that hangs therefore
holds one thread per probe, however many requests ask, and each caller gets its answer, or "no
answer yet", by its deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as Timeout
from dataclasses import dataclass
from typing import Generic, TypeVar

from django.db import connection

T = TypeVar("T")

#: One thread per probe is the most a hung dependency can hold; this leaves room for them all.
_threads = ThreadPoolExecutor(max_workers=16, thread_name_prefix="oanp-probe")


class NoAnswer(Exception):
    """The check did not finish by the deadline (it may still be running)."""


@dataclass
class _Run(Generic[T]):
    future: Future[T]
    started: float


class Probe(Generic[T]):
    def __init__(self, check: Callable[[], T]) -> None:
        self._check = check
        self._lock = threading.Lock()
        self._run: _Run[T] | None = None

    def _call(self) -> T:
        try:
            return self._check()
        finally:
            # The thread's own database connection, if the check opened one: back to the pool,
            # and a fresh one next time should the database have dropped it.
            connection.close()

    def start(self) -> Future[T]:
        """The run under way, or a new one."""
        with self._lock:
            if self._run is None or self._run.future.done():
                self._run = _Run(_threads.submit(self._call), time.monotonic())
            return self._run.future

    def running_for(self) -> float:
        run = self._run
        return 0.0 if run is None or run.future.done() else time.monotonic() - run.started

    def ask(self, within: float) -> T:
        """The check's answer, or :class:`NoAnswer` after ``within`` seconds; the check's own
        exception when it failed."""
        try:
            return self.start().result(timeout=within)
        except Timeout:
            raise NoAnswer(self.late(within)) from None

    def late(self, within: float) -> str:
        return f"no answer within {within:g} s (this check has run for {self.running_for():.1f} s)"
