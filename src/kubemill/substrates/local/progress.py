"""Reading a local job's progress reports: the supervisor's tail and the dashboard's history.

Each replica appends reports to ``<job dir>/progress/<replica>.jsonl`` (its
``KUBEMILL_PROGRESS_FILE``; the protocol is :mod:`kubemill.progress`'s). Why a file: it
needs nothing of the program but an append (no socket, no kubemill in its image), it
survives the supervisor, and it is the job's metric history for the dashboard's plot,
kept with the job's logs until ``delete``.

:class:`ProgressTail` is the supervisor's reader: on every loop it reads what was
appended since (bounded per call, through the forwarder's own reader,
:class:`kubemill.progress.Follower`), keeps each replica's latest report and the origin of
its speed, and hands them to the core as :class:`~kubemill.core.ObservedProgress`. A
line that breaks the protocol is skipped with a warning in the supervisor's log and
one ``BadProgressReport`` event per replica; the reports around it count as usual.
:func:`history` reads a replica's whole file for a plot.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from kubemill.progress import BadReport, Follower, parse_line
from kubemill.substrates.reads import ProgressPoint

if TYPE_CHECKING:
    # For annotations only: readers of progress (the dashboard) need no store, and a
    # submission no core (any module of it loads the whole reconciler).
    from kubemill.core import ObservedProgress
    from kubemill.substrates.local.store import Store

SUFFIX = ".jsonl"
"""A progress file's name: the replica's name and this."""
HISTORY_POINTS = 2000
"""The most points :func:`history` returns per replica (evenly thinned beyond that)."""
HISTORY_BYTES = 4 << 20
"""The most of a progress file :func:`history` reads: its end (some 60,000 reports), so a
page following a long run that reports every step stays cheap."""


def _at(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def _observed(replica: str, state: dict[str, Any]) -> ObservedProgress:
    """A :func:`kubemill.progress.merge` state as the core's observation."""
    from kubemill.core import ObservedProgress

    origin = state["origin"]
    return ObservedProgress(
        pod=replica,
        time=_at(state["time"]),
        step=state["step"],
        total=state["total"],
        metrics=tuple(sorted(state["metrics"].items())),
        origin=(_at(origin[0]), origin[1]) if origin is not None else None,
    )


@dataclass
class ProgressTail:
    """The supervisor's incremental reader of one job's progress files: a
    :class:`kubemill.progress.Follower` per replica's file, as the forwarder reads one."""

    directory: Path
    on_bad: Callable[[str, str], None] = lambda replica, why: None
    """Called once per replica with its first bad line's reason (the supervisor records an
    event); every bad line is logged anyway."""
    _files: dict[str, Follower] = field(default_factory=dict)
    _warned: set[str] = field(default_factory=set)
    _seen: dict[str, tuple[dict[str, Any], ObservedProgress]] = field(default_factory=dict)
    """Each replica's last state and its observation: an unchanged state is not converted
    again on every loop."""

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
            follower = self._files.get(replica)
            if follower is None:
                path = self.directory / f"{replica}{SUFFIX}"
                on_bad = functools.partial(self._bad, replica, path)
                follower = self._files[replica] = Follower(str(path), on_bad=on_bad)
            follower.poll(size)
        return tuple(
            self._observation(replica, follower.state)
            for replica, follower in sorted(self._files.items())
            if follower.state is not None
        )

    def _observation(self, replica: str, state: dict[str, Any]) -> ObservedProgress:
        seen = self._seen.get(replica)
        if seen is None or seen[0] is not state:
            seen = self._seen[replica] = (state, _observed(replica, state))
        return seen[1]

    def _bad(self, replica: str, path: Path, why: str) -> None:
        # Imported here: the supervisor's tail warns; a submission, which reads progress
        # through job_views, needs no logging (~2 ms to import, its format patterns).
        import logging

        logging.getLogger("kubemill.local.progress").warning(
            "%s: a progress report was skipped: %s", path, why
        )
        if replica not in self._warned:
            self._warned.add(replica)
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
