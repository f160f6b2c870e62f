"""The supervisor's log keeper (:data:`KEEPER`): every tick it marks the replicas' log files
with the time (the lines' timestamps) and rotates those grown past their policy's size, by
copying into chunks and punching a hole over the copied bytes. :mod:`.logs` describes the
files, the marks and the rotation, and reads them back.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import itertools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kubemill.substrates.local.log_reads import list_chunks
from kubemill.substrates.local.logs import (
    CHUNK,
    FILE_MODE,
    MAX_MARKS,
    TICK,
    LogPolicy,
    chunk_path,
    marks_path,
    stream_paths,
)

_log = logging.getLogger(__name__)

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
_fallocate: Callable[..., int] | None = None


def punch_hole(fd: int, offset: int, length: int) -> None:
    """Free the disk blocks of ``[offset, offset + length)``; reads there give zeros."""
    global _fallocate
    if _fallocate is None:
        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.fallocate64
        func.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        _fallocate = func
    if _fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


class _Process(Protocol):
    @property
    def returncode(self) -> int | None: ...


@dataclass
class _StreamState:
    path: Path
    live_from: int = 0
    last_size: int = -1
    marks: int = 0


@dataclass
class _Watched:
    log_path: str
    policy: LogPolicy
    streams: list[_StreamState]
    process: _Process | None = None
    forgotten: bool = False
    """Its directory is being removed: no look writes there any more (:meth:`LogKeeper.forget`)."""


class LogKeeper:
    """Marks and rotates the log files of the replicas this process started."""

    def __init__(self, tick: float = TICK) -> None:
        self.tick = tick
        self._lock = threading.Lock()
        self._watched: dict[str, _Watched] = {}
        self._thread: threading.Thread | None = None
        self._keeping = threading.Lock()
        """One look at a time: the keeper's thread, and :meth:`flush` at exit."""
        self._no_punch_warned = False

    def watch(self, log_path: str, process: _Process) -> None:
        """Keep ``log_path``'s files while ``process`` runs (its ``returncode`` is None)."""
        with self._lock:
            entry = self._watched.get(log_path)
            if entry is None:
                streams = []
                for path in stream_paths(log_path):
                    chunks = list_chunks(path)
                    streams.append(_StreamState(path, chunks[-1].end if chunks else 0))
                policy = LogPolicy.of_dir(Path(log_path).parent)
                entry = _Watched(log_path, policy, streams)
                self._watched[log_path] = entry
            entry.process = process
            if self._thread is None or not self._thread.is_alive():
                if self._thread is None:
                    # A supervisor that ends right after its replicas leaves no log
                    # over its size: one last look before the interpreter goes.
                    atexit.register(self.flush)
                self._thread = threading.Thread(target=self._run, name="kubemill-logs", daemon=True)
                self._thread.start()

    def forget(self, directory: str) -> None:
        """Stop keeping the log files below ``directory``, which is about to be removed: once
        this returns, no look of the keeper writes there (a look of a replica that just ended
        would otherwise mark its file into a directory being removed, and leave it behind)."""
        root = Path(directory)
        with self._lock:
            for log_path in [p for p in self._watched if root in Path(p).parents]:
                self._watched.pop(log_path).forgotten = True
        with self._keeping:  # a look already under way ends first
            pass

    def flush(self) -> None:
        """Look at every watched file once now."""
        with self._lock:
            entries = list(self._watched.values())
        for entry in entries:
            with contextlib.suppress(OSError):
                self.keep(entry)

    def _run(self) -> None:
        busy = False
        while True:
            # A file that grew past its size within one tick is looked at again sooner.
            time.sleep(self.tick / 10 if busy else self.tick)
            busy = False
            with self._lock:
                entries = list(self._watched.values())
            for entry in entries:
                done = entry.process is None or entry.process.returncode is not None
                try:
                    busy = self.keep(entry) or busy
                except OSError as exc:  # a full disk must not stop the supervisor
                    _log.warning("cannot keep the logs of %s: %s", entry.log_path, exc)
                if done:
                    with self._lock:
                        if self._watched.get(entry.log_path) is entry and (
                            entry.process is None or entry.process.returncode is not None
                        ):
                            del self._watched[entry.log_path]

    def keep(self, entry: _Watched) -> bool:
        """One look: mark the files that grew, rotate those too big, prune old chunks.

        Returns whether a file was rotated (it may grow fast)."""
        with self._keeping:
            return False if entry.forgotten else self._keep(entry)

    def _keep(self, entry: _Watched) -> bool:
        # stderr is looked at before stdout and both are marked with one time taken after:
        # a stdout line followed by a stderr line is then never given a later time than
        # it (a line seen on stderr was written after what stdout had by then).
        sizes: dict[int, int] = {}
        for i in reversed(range(len(entry.streams))):
            with contextlib.suppress(FileNotFoundError):
                sizes[i] = entry.streams[i].path.stat().st_size
        now = time.time()
        rotated = False
        for i, state in enumerate(entry.streams):
            if i not in sizes:
                continue
            size = sizes[i]
            if size != state.last_size:
                state.last_size = size
                self._mark(state, size, now)
            if size - state.live_from > entry.policy.max_size:
                rotated = self._rotate(state, size, entry.policy) or rotated
        if rotated:
            self._prune(entry)
        return rotated

    def _mark(self, state: _StreamState, size: int, now: float) -> None:
        path = marks_path(state.path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
        try:
            os.write(fd, f"{size} {now:.6f}\n".encode())
        finally:
            os.close(fd)
        state.marks += 1
        if state.marks > MAX_MARKS:
            self._thin(state)

    def _thin(self, state: _StreamState) -> None:
        path = marks_path(state.path)
        lines = path.read_bytes().splitlines(keepends=True)
        first = list_chunks(state.path)
        keep_from = first[0].start if first else 0
        kept = [ln for ln in lines if int(ln.split()[0]) >= keep_from] or lines[-1:]
        # Every other mark, always keeping the newest: times get coarser, never wrong.
        kept = kept[::-1][::2][::-1] if len(kept) > MAX_MARKS // 2 else kept
        staged = path.with_name(path.name + ".tmp")
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.writelines(kept)
        staged.replace(path)
        state.marks = len(kept)

    def _rotate(self, state: _StreamState, size: int, policy: LogPolicy) -> bool:
        """Copy ``[live_from, size)`` into chunks, then punch it out of the live file.

        Chunks hold ``max_size`` bytes each. Of a live part longer than the chunks kept,
        only the newest ``max_files - 1`` chunks' worth is copied: older bytes would be
        pruned at once (what a replica writes faster than a tick beyond what is kept is
        dropped, as the kubelet drops it).
        """
        src = os.open(state.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            # Cut where lines end (a line longer than CHUNK is cut anyway), so no chunk a
            # reader starts from begins with a piece of a line; the line being written
            # stays in the live file.
            size = _line_end_before(src, state.live_from, size)
            if size <= state.live_from:
                return False
            keep = (policy.max_files - 1) * policy.max_size
            copy_from = max(state.live_from, size - keep)
            # Cut from the end, so the newest chunks are whole and a short one is the oldest.
            # Bytes before ``copy_from`` (and the rest of the line it falls in) are dropped.
            first = (
                copy_from
                if copy_from == state.live_from
                else _line_start_after(src, copy_from, size)
            )
            inner = {
                _line_start_after(src, cut, size)
                for cut in range(size - policy.max_size, copy_from, -policy.max_size)
            }
            bounds = sorted({first, size} | {b for b in inner if first < b < size})
            for start, end in itertools.pairwise(bounds):
                self._copy_chunk(src, state.path, start, end)
            try:
                punch_hole(src, state.live_from, size - state.live_from)
            except OSError as exc:
                for start in bounds[:-1]:
                    chunk_path(state.path, start).unlink(missing_ok=True)
                if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                if not self._no_punch_warned:
                    self._no_punch_warned = True
                    _log.warning(
                        "the file system of %s cannot punch holes (fallocate), so replica"
                        " logs are not rotated there",
                        state.path.parent,
                    )
                state.live_from = size  # do not try again for these bytes
                return False
        finally:
            os.close(src)
        state.live_from = size
        return True

    @staticmethod
    def _copy_chunk(src: int, path: Path, start: int, end: int) -> None:
        target = chunk_path(path, start)
        staged = target.with_name(target.name + ".tmp")
        dst = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            pos = start
            while pos < end:
                data = os.pread(src, min(CHUNK, end - pos), pos)
                if not data:
                    break
                os.write(dst, data)
                pos += len(data)
        finally:
            os.close(dst)
        # The chunk exists before the hole does: a reader finds the bytes in one place or
        # the other at every moment.
        staged.replace(target)

    def _prune(self, entry: _Watched) -> None:
        # A stream's newest chunk stays: its end is where the live file's data starts
        # (before it, the live file is a hole), so a reader needs it to find that place.
        newest = {chunks[-1].path for s in entry.streams if (chunks := list_chunks(s.path))}
        older = [c for s in entry.streams for c in list_chunks(s.path) if c.path not in newest]
        older.sort(key=lambda c: (_mtime(c.path), c.start), reverse=True)
        budget = max(0, entry.policy.max_files - 1 - len(newest))
        for old in older[budget:]:
            old.path.unlink(missing_ok=True)


def _line_end_before(fd: int, low: int, high: int) -> int:
    """Just after the last newline in ``[low, high)`` (looking back one CHUNK), else ``high``."""
    start = max(low, high - CHUNK)
    data = os.pread(fd, high - start, start)
    cut = data.rfind(b"\n")
    return start + cut + 1 if cut >= 0 else high


def _line_start_after(fd: int, offset: int, high: int) -> int:
    """Just after the first newline at or after ``offset`` (within one CHUNK), else ``offset``."""
    data = os.pread(fd, min(CHUNK, high - offset), offset)
    cut = data.find(b"\n")
    return offset + cut + 1 if cut >= 0 else offset


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


KEEPER = LogKeeper()
"""The keeper of every replica this process starts (one thread, started on first use)."""


def remove_job_directory(job_dir: str) -> None:
    """Remove a deleted job's directory, its logs forgotten by this process's keeper first."""
    KEEPER.forget(job_dir)
    shutil.rmtree(job_dir, ignore_errors=True)
