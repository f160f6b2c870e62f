"""What other threads ask of a supervisor's loop (:class:`Requests`): a signal handler or
the SDK asks to stop or delete the job, the loop takes the requests in on its next pass.

Safe from a signal handler: asking writes nothing but flags, under a reentrant lock (the
handler may run while the loop holds it), and a byte on a pipe that wakes the loop.
"""

from __future__ import annotations

import contextlib
import os
import threading


class Requests:
    """The requests of other threads, taken in by the loop."""

    def __init__(self) -> None:
        self._requested: str | None = None
        self._stop_asked: str | None = None
        """Why this process was asked to stop the job, until the loop takes it in."""
        self._force = False
        # Reentrant: a signal handler (interrupt) may run while the loop holds it.
        self._lock = threading.RLock()
        self.wake_fd, self._wake_w = os.pipe()
        """Readable whenever something was asked since the last :meth:`drain`."""
        os.set_blocking(self.wake_fd, False)
        os.set_blocking(self._wake_w, False)

    def stop(self, *, force: bool, why: str) -> None:
        """Ask for the job to be stopped for good (the first reason given is kept)."""
        with self._lock:
            if self._stop_asked is None:
                self._stop_asked = why
        self.ask(None, force=force)

    def ask(self, what: str | None, *, force: bool) -> None:
        """Ask for ``what`` (``"delete"``), and for no grace period if ``force``."""
        with self._lock:
            if what is not None:
                self._requested = what
            self._force = self._force or force
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def take(self) -> tuple[str | None, str | None]:
        """What was asked (it stays asked) and why a stop was asked (taken once)."""
        with self._lock:
            requested, why = self._requested, self._stop_asked
            self._stop_asked = None
        return requested, why

    def force(self) -> None:
        """Skip the grace period from now on (asked through the store)."""
        with self._lock:
            self._force = True

    @property
    def forced(self) -> bool:
        with self._lock:
            return self._force

    def drain(self) -> None:
        """Read the wake-up bytes written so far."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.read(self.wake_fd, 4096)

    def close(self) -> None:
        for fd in (self.wake_fd, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
