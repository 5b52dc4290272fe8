"""Waiting, with a time bound, for something another thread or process does.

Every wait polls until a deadline instead of sleeping a fixed time and hoping it was enough.
``wait_until`` says whether the condition came true (for a caller that asserts the details
itself afterwards), ``wait_for`` fails the test when it did not, and ``collect`` gathers what
a poll call returns until there is enough or the time is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["collect", "wait_for", "wait_until"]

T = TypeVar("T")


def wait_until(cond: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``cond`` every ``interval`` s; True once it is truthy, False after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def wait_for(cond: Callable[[], object], timeout: float = 60.0, what: str = "",
             interval: float = 0.05) -> None:
    """``wait_until`` that fails the test (AssertionError) when ``cond`` never came true."""
    if not wait_until(cond, timeout, interval):
        raise AssertionError(f"timed out after {timeout}s waiting for {what or cond}")


def collect(poll: Callable[[], Iterable[T]], n: int, timeout: float) -> list[T]:
    """Call ``poll`` until it has returned ``n`` items in all or ``timeout`` s have passed;
    returns everything it returned (possibly fewer or more than ``n``)."""
    out: list[T] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(poll())
    return out
