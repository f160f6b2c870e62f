"""What a failing state database means to the user (:func:`state_error`): one line naming
the file, what went wrong and what to do, as a :class:`BrokenState` (never a raw ``sqlite3``
error)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kubemill.substrates.errors import SubstrateError
from kubemill.substrates.local.state_schema import BUSY_TIMEOUT_MS, STATE_DIR_ENV


class BrokenState(SubstrateError):
    """The state database cannot be used: damaged, unreadable or not writable."""


_DAMAGED = ("not a database", "malformed", "disk image", "corrupt", "unsupported file format")
_NOT_WRITABLE = ("unable to open", "readonly", "read-only", "permission")


def state_error(exc: sqlite3.Error, path: Path) -> BrokenState:
    """The one-line error for a failure of the database at ``path``: what and what to do."""
    text = str(exc)
    lowered = text.lower()
    if any(word in lowered for word in _DAMAGED):
        return BrokenState(
            f"the state database {path} is damaged ({text}); run `kubemill doctor --repair`"
            " to move it aside and start a fresh one (job logs are kept)"
        )
    if any(word in lowered for word in _NOT_WRITABLE):
        return BrokenState(
            f"cannot open the state database {path} for writing ({text}); make"
            f" {path.parent} writable, or set {STATE_DIR_ENV} to a writable directory"
        )
    if "disk i/o" in lowered:
        return BrokenState(
            f"could not read or write the state database {path} ({text}); check the disk"
            f" holding {path.parent} and its free space, then run `kubemill doctor`"
        )
    if "locked" in lowered or "busy" in lowered:
        return BrokenState(
            f"the state database {path} stayed locked by another kubemill process for"
            f" {BUSY_TIMEOUT_MS // 1000} s ({text}); try again"
        )
    return BrokenState(f"the state database {path} failed: {text}; check it with `kubemill doctor`")


__all__ = ["BrokenState", "state_error"]
