"""Polling until something holds, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

import pytest

T = TypeVar("T")

#: What a wait says when it gives up: a text, or a function that writes it at that moment.
Message = str | Callable[[], str]


def fail(message: Message, error: type[Exception] | None = None) -> NoReturn:
    """Fail the test with ``message``, or raise ``error`` with it where no test runs (bench)."""
    text = message() if callable(message) else message
    if error is None:
        pytest.fail(text)
    raise error(text)


def wait_for(
    condition: Callable[[], T],
    timeout: float,
    *,
    interval: float = 0.05,
    message: Message | None = None,
    error: type[Exception] | None = None,
) -> T:
    """Ask ``condition`` every ``interval`` seconds until it answers something true, and return
    that answer; after ``timeout`` seconds, :func:`fail` with ``message`` (by default, what the
    condition's docstring or repr says it waited for)."""
    deadline = time.monotonic() + timeout
    while not (answer := condition()):
        if time.monotonic() > deadline:
            fail(message or f"not within {timeout} s: {condition.__doc__ or condition}", error)
        time.sleep(interval)
    return answer
