"""``kubemill doctor``: SQLite's integrity check of the state database (:func:`check_state`),
and moving a damaged one aside for a fresh one (:func:`repair_state`); job logs stay.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from kubemill.substrates.local.store import (
    BUSY_TIMEOUT_MS,
    DB_NAME,
    SCHEMA_VERSION,
    STATE_DIR_ENV,
    BrokenState,
    Store,
    default_state_dir,
)


@dataclass(frozen=True)
class StateCheck:
    """What ``kubemill doctor`` found in a state directory."""

    path: Path
    """The database checked."""
    exists: bool
    problems: list[str]
    """SQLite's integrity check (``PRAGMA integrity_check``) findings, or why it could not
    run; empty when the database is sound."""

    @property
    def healthy(self) -> bool:
        return not self.problems


def check_state(state_dir: str | os.PathLike[str] | None = None) -> StateCheck:
    """Run SQLite's integrity check on the state database (creates nothing).

    Raises :class:`BrokenState` if the state directory is not a directory at all.
    """
    directory = default_state_dir(state_dir)
    path = directory / DB_NAME
    if directory.exists() and not directory.is_dir():
        raise BrokenState(
            f"the state directory {directory} is not a directory; move it away, or set"
            f" {STATE_DIR_ENV} to another directory"
        )
    if not path.exists():
        return StateCheck(path, exists=False, problems=[])
    if not path.is_file():
        return StateCheck(path, exists=True, problems=["it is not a file"])
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as exc:
        return StateCheck(path, exists=True, problems=[str(exc)])
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
        problems = [str(r[0]) for r in rows if r[0] != "ok"]
        if not problems:
            # A sound file that is not kubemill's (or from a newer one) is a problem too.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                problems = [f"written by a newer kubemill (schema {version})"]
    except sqlite3.Error as exc:
        problems = [str(exc)]
    finally:
        conn.close()
    return StateCheck(path, exists=True, problems=problems)


def repair_state(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """Move the state database aside and start a fresh one; where the old one went.

    The old file (with its ``-wal`` and ``-shm`` companions) keeps its contents for a
    later look; job directories and their logs are not touched. Jobs recorded only in the
    old database are forgotten: their supervisors, finding their job gone, stop it.
    """
    directory = default_state_dir(state_dir)
    path = directory / DB_NAME
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = directory / f"{DB_NAME}.broken-{stamp}"
    suffix = 1
    while aside.exists():
        suffix += 1
        aside = directory / f"{DB_NAME}.broken-{stamp}-{suffix}"
    try:
        for companion in ("", "-wal", "-shm"):
            source = directory / f"{DB_NAME}{companion}"
            if source.exists():
                source.rename(directory / f"{aside.name}{companion}")
    except OSError as exc:
        raise BrokenState(
            f"cannot move {path} aside: {exc.strerror}; make {directory} writable"
        ) from exc
    Store(directory).close()
    return aside
