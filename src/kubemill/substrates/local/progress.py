"""Reading a local job's progress reports: the supervisor's tail and the dashboard's history.

Each replica appends reports to ``<job dir>/progress/<replica>.jsonl`` (its
``KUBEMILL_PROGRESS_FILE``; the protocol is :mod:`kubemill.progress`'s). Why a file: it
needs nothing of the program but an append (no socket, no kubemill in its image), it
survives the supervisor, and it is the job's metric history for the dashboard's plot,
kept with the job's logs until ``delete``.

:class:`ProgressTail` is the supervisor's reader: on every loop it reads what was
appended since (bounded per call), keeps each replica's latest report and the origin of
its speed, and hands them to the core as :class:`~kubemill.core.ObservedProgress`. A
line that breaks the protocol is skipped with a warning in the supervisor's log and
one ``BadProgressReport`` event per replica; the reports around it count as usual.
:func:`history` reads a replica's whole file for a plot.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from kubemill.core import ObservedProgress
from kubemill.progress import MAX_LINE, BadReport, parse_line
from kubemill.substrates.base import ProgressPoint

if TYPE_CHECKING:
    # For annotations only: readers of progress (the dashboard) need no store.
    from kubemill.substrates.local.store import Store

log = logging.getLogger("kubemill.local.progress")

SUFFIX = ".jsonl"
"""A progress file's name: the replica's name and this."""
READ_LIMIT = 1 << 20
"""Bytes read from one file per call: a program that reports madly cannot stall the loop."""
HISTORY_POINTS = 2000
"""The most points :func:`history` returns per replica (evenly thinned beyond that)."""
HISTORY_BYTES = 4 << 20
"""The most of a progress file :func:`history` reads: its end (some 60,000 reports), so a
page following a long run that reports every step stays cheap."""


@dataclass
class _File:
    """What has been read of one replica's progress file."""

    offset: int = 0
    partial: bytes = b""
    skipping: bool = False
    """Inside a line longer than :data:`~kubemill.progress.MAX_LINE`: dropped to its end."""
    latest: ObservedProgress | None = None
    origin: tuple[datetime, int] | None = None
    warned: bool = False


def _when(report: dict[str, Any], read_at: float) -> datetime:
    moment = report["time"] if report["time"] is not None else read_at
    return datetime.fromtimestamp(moment, UTC)


def _lines(data: bytes, state: _File) -> Iterator[bytes]:
    """Complete lines of ``data`` after what was left over; an over-long line yields one
    over-long marker so it is reported, then is skipped to its end."""
    buffer = state.partial + data
    *complete, state.partial = buffer.split(b"\n")
    for line in complete:
        if state.skipping:
            state.skipping = False
            continue
        yield line
    if len(state.partial) > MAX_LINE:
        yield state.partial
        state.partial, state.skipping = b"", True


@dataclass
class ProgressTail:
    """The supervisor's incremental reader of one job's progress files."""

    directory: Path
    on_bad: Callable[[str, str], None] = lambda replica, why: None
    """Called once per replica with its first bad line's reason (the supervisor records an
    event); every bad line is logged anyway."""
    _files: dict[str, _File] = field(default_factory=dict)

    def poll(self) -> tuple[ObservedProgress, ...]:
        """Read what was appended since the last call; each replica's latest report.

        One ``stat`` per file; only a file that changed size is opened."""
        try:
            with os.scandir(self.directory) as listing:
                sizes = {
                    entry.name.removesuffix(SUFFIX): entry.stat().st_size
                    for entry in listing
                    if entry.name.endswith(SUFFIX) and entry.is_file()
                }
        except OSError:
            sizes = {}
        for replica, size in sorted(sizes.items()):
            state = self._files.setdefault(replica, _File())
            if size != state.offset:
                self._read(replica, self.directory / f"{replica}{SUFFIX}", state, size)
        return tuple(f.latest for _, f in sorted(self._files.items()) if f.latest is not None)

    def _read(self, replica: str, path: Path, state: _File, size: int) -> None:
        if size < state.offset:
            state.offset, state.partial = 0, b""  # truncated: read it again
        try:
            with path.open("rb") as stream:
                stream.seek(state.offset)
                data = stream.read(READ_LIMIT)
        except OSError:
            return
        if not data:
            return
        state.offset += len(data)
        read_at = time.time()
        for line in _lines(data, state):
            if not line.strip():
                continue
            try:
                report = parse_line(line)
            except BadReport as exc:
                self._bad(replica, path, state, str(exc))
                continue
            self._take(replica, state, report, read_at)

    def _take(self, replica: str, state: _File, report: dict[str, Any], read_at: float) -> None:
        """A report updates what it names; what it leaves out keeps its last value (a
        program may give ``total`` once, or report its loss less often than its step)."""
        when = _when(report, read_at)
        previous = state.latest
        step = report["step"]
        # A lower step is a new run of the program (a restart): its speed starts again.
        if step is not None and (
            state.origin is None
            or (previous is not None and previous.step is not None and step < previous.step)
        ):
            state.origin = (when, step)
        metrics = dict(previous.metrics) if previous is not None else {}
        metrics.update(report["metrics"])
        carried = step is None and previous is not None
        state.latest = ObservedProgress(
            pod=replica,
            # The ETA's speed is of steps: a report without one leaves the step's time.
            time=previous.time if carried and previous is not None else when,
            step=previous.step if carried and previous is not None else step,
            total=report["total"] or (previous.total if previous is not None else None),
            metrics=tuple(sorted(metrics.items())),
            origin=state.origin,
        )

    def _bad(self, replica: str, path: Path, state: _File, why: str) -> None:
        log.warning("%s: a progress report was skipped: %s", path, why)
        if not state.warned:
            state.warned = True
            self.on_bad(replica, why)


def history(
    path: Path, *, limit: int = HISTORY_POINTS, most: int = HISTORY_BYTES
) -> list[ProgressPoint]:
    """The valid reports in one replica's progress file, in order (bad lines skipped): all
    of them, or those in its last ``most`` bytes; thinned evenly to at most ``limit``
    points (the first and last kept).

    A file unchanged since it was last read (same inode, size and modification time: a
    finished job's, an idle one's) is not parsed again: a dashboard page asks every poll."""
    try:
        seen = path.stat()
    except OSError:
        return []
    version = (seen.st_ino, seen.st_size, seen.st_mtime_ns)
    return list(_history(str(path), version, limit, most))


@functools.lru_cache(maxsize=32)
def _history(
    path: str, version: tuple[int, int, int], limit: int, most: int
) -> tuple[ProgressPoint, ...]:
    del version  # only part of the cache's key
    try:
        with Path(path).open("rb") as stream:
            points = _points(stream, most)
    except OSError:
        return ()
    if len(points) <= limit:
        return tuple(points)
    stride = (len(points) - 1) / (limit - 1)
    return tuple(points[round(i * stride)] for i in range(limit))


def _points(stream: BinaryIO, most: int) -> list[ProgressPoint]:
    points: list[ProgressPoint] = []
    size = os.fstat(stream.fileno()).st_size
    if size > most:
        stream.seek(size - most)
        stream.readline()  # the rest of a line that began before: not a whole report
    for line in stream:
        try:
            report = parse_line(line.rstrip(b"\n"))
        except BadReport:
            continue
        points.append(ProgressPoint(report["time"], report["step"], report["metrics"]))
    return points


def progress_tail(store: Store, uid: str, directory: str) -> ProgressTail | None:
    """The tail of a job's progress files (its directory made if missing), which records one
    ``BadProgressReport`` event per replica that wrote a bad report; ``None``: no directory."""
    if not directory:
        return None
    Path(directory).mkdir(mode=0o700, parents=True, exist_ok=True)

    def on_bad(replica: str, why: str) -> None:
        store.add_event(
            uid,
            type="Warning",
            reason="BadProgressReport",
            message=f"{replica}: a progress report was skipped ({why}); later ones count"
            " (this is said once per replica, the supervisor's log has every one)",
        )

    return ProgressTail(Path(directory), on_bad=on_bad)
