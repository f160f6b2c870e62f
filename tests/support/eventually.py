"""One way for tests to wait for something the system does asynchronously."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT = 30.0
"""Default upper bound on a wait: a hang guard, not a performance claim."""


def eventually(
    check: Callable[[], T], *, timeout: float = WAIT, interval: float = 0.05, what: str = ""
) -> T:
    """Call ``check`` until it returns something truthy, and return that; an AssertionError
    it raises counts as "not yet". Past ``timeout`` seconds, fail saying what was awaited
    and the last assertion seen."""
    deadline = time.monotonic() + timeout
    last: AssertionError | None = None
    while True:
        try:
            result = check()
            if result:
                return result
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what or check}: {last}"
            )
        time.sleep(interval)
