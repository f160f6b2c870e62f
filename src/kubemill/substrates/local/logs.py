"""Replica log files: how they are written, kept bounded, and read back in bounded memory.

**Writing.** A replica's stdout and stderr go straight from the kernel into two files of
its own (``<replica>.log`` and ``<replica>.stderr.log``, ``O_APPEND``, mode 0600 in a 0700
directory). No kubemill process sits in the data path, so nothing a replica wrote is lost
when its supervisor is SIGKILLed, and a replica printing fast costs the supervisor
nothing. Two files, not one: a stdout line without its final newline and the next stderr
line would otherwise merge into one line.

**Rotation** (the kubelet's ``containerLogMaxSize`` / ``containerLogMaxFiles``, read from
the local config file, defaults 10Mi and 5, fixed per job at submit). The child's file
descriptor cannot be swapped for a new file (rename + reopen needs the writer's
cooperation), and copy + truncate loses whatever the replica writes between the copy and
the truncate. So the supervisor's :class:`~.log_keeper.LogKeeper` rotates without any race: every
:data:`TICK` (ten times as often while a file grows past its size within a tick) it copies
the live part of a file that grew past ``max_size`` into chunk files of ``max_size`` each,
named after their first byte's offset (``<file>.<offset>``) and cut where lines end, and
only then *punches a hole* over exactly the bytes it copied (``fallocate(PUNCH_HOLE)``),
which frees their disk blocks while the replica keeps appending past them. Offsets in the
live file therefore never move: a byte's offset is its position in everything the stream
ever wrote, which is what chunk names, readers and marks use. Older chunks are deleted so
a replica keeps ``max_files - 1`` of them (both streams together; a stream's newest chunk
always stays, as it says where its live data starts) besides its two live files: about
``(max_files + 1) * max_size`` per replica on disk, plus what it writes within one tick.
Output a replica writes faster than that, beyond what is kept, is dropped, as the
kubelet drops it. The trade-offs: ``ls -l`` shows the live file's logical size (``du``
shows the real one); a reader that falls behind by more than what is kept skips ahead,
as a reader of rotated kubelet logs does; and a file system without hole punching (ext4,
xfs, btrfs and tmpfs have it) gets no rotation, which the keeper says once in the
supervisor's log.

**Timestamps** (``--timestamps``, ``--since``). The kernel records no time per line, so
each tick the keeper looks at a replica's stderr, then its stdout, and appends a *mark*
(offset, the time after both looks) to ``<file>.marks`` for each file that grew. A
line's time is that of the first mark at or after its end (the first moment it was seen
complete): at most a tick late, never early. A line after the last mark (written after
the keeper's last look, e.g. once the supervisor was gone) gets its file's modification
time, but no earlier than the replica's last mark. stdout and stderr are merged by these
times, stdout first on a tie; so a stdout line followed by a stderr line always keeps
that order (the stderr line seen means the stdout one is seen in the same look), while a
stderr line followed within one tick by a stdout line may be shown after it. Marks are
thinned (every other one dropped) when a file holds more than :data:`MAX_MARKS`.

**Reading** (:mod:`.log_reads`, a module apart: a submission writes a job's log policy and
makes none of its records) never holds more than a chunk (:data:`CHUNK`) plus the lines
asked to be kept (``tail``): ``tail`` walks back from the end, ``since`` starts from the
marks, and ``limit_bytes`` stops early. Lines are decoded as UTF-8 with replacement, so a
process printing bytes cannot break ``kubemill logs``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local.images import config_whole_number, read_config

CHUNK = 1 << 20
"""Bytes read at a time; a reader's memory does not grow with the file."""
MAX_LINE = CHUNK
"""A line longer than this is given out in pieces (memory stays bounded)."""
TICK = 0.2
"""Seconds between the keeper's looks at each log file (marks and rotation)."""
MAX_MARKS = 4096
"""Marks kept per file before every other one is dropped."""
FILE_MODE = 0o600
DIR_MODE = 0o700
POLICY_FILE = ".policy.json"
"""The job's rotation policy, fixed at submit, next to its logs (read by any supervisor)."""

DEFAULT_MAX_SIZE = 10 * 2**20
DEFAULT_MAX_FILES = 5
MIN_MAX_SIZE = 4096

# --- paths and policy ------------------------------------------------------------------------


def stream_paths(log_path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """A replica's stdout and stderr files, from the log path recorded for it."""
    out = Path(log_path)
    stem = out.name[: -len(".log")] if out.name.endswith(".log") else out.name
    return out, out.with_name(f"{stem}.stderr.log")


def chunk_path(path: Path, start: int) -> Path:
    return path.with_name(f"{path.name}.{start:016d}")


def marks_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.marks")


@dataclass(frozen=True)
class LogPolicy:
    """How much log one replica keeps (the kubelet's names and defaults)."""

    max_size: int = DEFAULT_MAX_SIZE
    """``containerLogMaxSize``: a live file is rotated once it holds more than this."""
    max_files: int = DEFAULT_MAX_FILES
    """``containerLogMaxFiles``: files kept per replica, the live one counted."""

    @classmethod
    def from_config(cls, data: Mapping[str, Any], where: str) -> LogPolicy:
        """The policy from a config mapping; a bad value is an error naming its key."""
        size_text = data.get("containerLogMaxSize", DEFAULT_MAX_SIZE)
        size: Decimal | int | None = DEFAULT_MAX_SIZE
        if "containerLogMaxSize" in data:
            # Imported only for a size the config sets: any module of the core loads the
            # whole reconciler, which a submission (it reads this policy) never runs.
            from kubemill.core.quantity import parse_quantity

            size = None if isinstance(size_text, bool) else parse_quantity(size_text)
        if size is None or size != int(size) or size < MIN_MAX_SIZE:
            raise SubstrateError(
                f"{where}: containerLogMaxSize: expected a size of at least {MIN_MAX_SIZE}"
                f" bytes such as 10Mi, got {size_text!r}"
            )
        files = config_whole_number(
            data.get("containerLogMaxFiles", DEFAULT_MAX_FILES), 2, f"{where}: containerLogMaxFiles"
        )
        return cls(max_size=int(size), max_files=files)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> LogPolicy:
        """The policy of the local config file (defaults when there is no file)."""
        return cls.from_config(*read_config(path))

    def save(self, log_dir: str | os.PathLike[str]) -> None:
        """Record the policy with the job's logs, where its supervisor will read it."""
        directory = make_log_dir(log_dir)
        target = directory / POLICY_FILE
        staged = directory / f"{POLICY_FILE}.tmp"
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"maxSize": self.max_size, "maxFiles": self.max_files}, fh)
        staged.replace(target)

    @classmethod
    def of_dir(cls, log_dir: str | os.PathLike[str]) -> LogPolicy:
        """The policy recorded for a job's logs (defaults if none was)."""
        try:
            data = json.loads((Path(log_dir) / POLICY_FILE).read_text(encoding="utf-8"))
            return cls(max_size=int(data["maxSize"]), max_files=int(data["maxFiles"]))
        except (OSError, ValueError, KeyError, TypeError):
            return cls()


def make_log_dir(log_dir: str | os.PathLike[str]) -> Path:
    """Create a job's log directory, private to its owner."""
    directory = Path(log_dir)
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        directory.chmod(DIR_MODE)
    return directory


def open_for_replica(log_path: str | os.PathLike[str]) -> tuple[int, int]:
    """File descriptors for a replica's stdout and stderr (append-only, 0600)."""
    out, err = stream_paths(log_path)
    make_log_dir(out.parent)
    fds = []
    try:
        for path in (out, err):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
            fds.append(fd)
            # A file made before logs were private keeps its old mode otherwise.
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds[0], fds[1]
