"""Waiting in a test for what another thread or process does: the one ``eventually``.

A test that acts and then waits for the effect polls with :func:`eventually`; its timeout is
a guard against a hang, never a claim about speed, so it is generous and no test asserts on
how long the wait took.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT = 30.0
"""Seconds before :func:`eventually` gives up by default: a hang guard, not a bound."""


def eventually(
    check: Callable[[], T],
    what: object = "",
    *,
    timeout: float = WAIT,
    interval: float = 0.05,
) -> T:
    """Call ``check`` every ``interval`` seconds until it returns something truthy, and
    return that.

    An ``AssertionError`` from ``check`` counts as "not yet", so a check may be written as
    assertions; the last one is in the failure. After ``timeout`` seconds the test fails
    with ``what`` (what it was waiting for).
    """
    deadline = time.monotonic() + timeout
    last: AssertionError | None = None
    while True:
        try:
            result = check()
        except AssertionError as exc:
            last = exc
        else:
            if result:
                return result
        if time.monotonic() >= deadline:
            because = f": {last}" if last is not None else ""
            raise AssertionError(f"timed out waiting for {what or check}{because}")
        time.sleep(interval)
