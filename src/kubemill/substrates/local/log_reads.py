"""Reading replica logs back (see :mod:`.logs` for how they are written, rotated and
stamped): a stream's chunks and live file by offset, a replica's two streams merged by
time, ``kubectl logs``' tail/since/limit, a failed run's termination message, following.

Apart from :mod:`.logs` so that a submission, which only writes a job's log policy, makes
none of these records (a frozen dataclass costs ~0.4 ms to make).
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kubemill.substrates.local.logs import (
    CHUNK,
    MAX_LINE,
    marks_path,
    stream_paths,
)
from kubemill.substrates.reads import LogLine, LogQuery

_CHUNK_SUFFIX = re.compile(r"^\.(\d{16})$")


# --- one stream on disk ----------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    start: int
    path: Path
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


def list_chunks(path: Path) -> list[Chunk]:
    """The rotated chunks of a live file, oldest first."""
    found = []
    prefix = path.name
    try:
        entries = list(os.scandir(path.parent))
    except FileNotFoundError:
        return []
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        match = _CHUNK_SUFFIX.match(entry.name[len(prefix) :])
        if match is None:
            continue
        with contextlib.suppress(FileNotFoundError):
            found.append(Chunk(int(match[1]), Path(entry.path), entry.stat().st_size))
    return sorted(found, key=lambda c: c.start)


def _pread(path: Path, offset: int, size: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


class Stream:
    """One stream (stdout or stderr) of a replica: its chunks and live file, by offset."""

    def __init__(self, path: Path, rank: int) -> None:
        self.path = path
        self.rank = rank
        """0 for stdout, 1 for stderr: stdout goes first when times tie."""
        self._marks: list[tuple[int, float]] = []
        self._marks_size = -1
        self._live_from: int | None = None
        """Where the live file's data starts (the newest chunk's end), as last listed."""
        self.siblings: list[Stream] = []
        """The replica's other streams (their marks bound this one's unmarked lines)."""

    def first(self) -> int:
        """The oldest offset still kept."""
        chunks = list_chunks(self.path)
        return chunks[0].start if chunks else 0

    def end(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _listing(self) -> list[Chunk]:
        chunks = list_chunks(self.path)
        self._live_from = chunks[-1].end if chunks else 0
        return chunks

    def read(self, offset: int, size: int = CHUNK) -> tuple[int, bytes]:
        """Bytes from ``offset`` (or from the oldest kept offset, if that is later).

        The live file is read without listing the chunks (a follower polls it often):
        bytes punched out while we read come back as NULs, so only a read holding a NUL
        looks at the chunks again, and takes the bytes from there if they moved.
        """
        for _ in range(3):
            chunks: list[Chunk] | None = None
            if self._live_from is None:
                chunks = self._listing()
            assert self._live_from is not None
            if offset >= self._live_from:
                data = _pread(self.path, offset, size)
                if data is None:
                    return offset, b""
                if b"\0" not in data:
                    return offset, data
                chunks = self._listing()
                if offset >= self._live_from:
                    return offset, data  # NULs the replica wrote itself
            if chunks is None:
                chunks = self._listing()
            for chunk in chunks:
                if chunk.end <= offset:
                    continue
                # Before this chunk: rotated away or dropped already, as on a kubelet.
                offset = max(offset, chunk.start)
                data = _pread(chunk.path, offset - chunk.start, min(size, chunk.end - offset))
                if data is not None:
                    return offset, data
                break  # deleted while we looked: look again
            else:
                if offset < self._live_from:
                    offset = self._live_from  # dropped bytes just before the live part
        return offset, b""

    def marks(self) -> list[tuple[int, float]]:
        """(offset, time) marks, reloaded when the marks file changed."""
        path = marks_path(self.path)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return self._marks
        if size != self._marks_size:
            self._marks_size = size
            marks = []
            with contextlib.suppress(OSError), path.open("rb") as fh:
                for raw in fh:
                    parts = raw.split()
                    if len(parts) == 2:
                        with contextlib.suppress(ValueError):
                            marks.append((int(parts[0]), float(parts[1])))
            self._marks = marks
        return self._marks

    def time_of(self, end: int) -> float:
        """When the line ending at ``end`` was first seen complete."""
        return self.timer()(end)

    def timer(self) -> Callable[[int], float]:
        """:meth:`time_of` for the lines of one read: the marks, and the time of lines past
        the last mark, are looked up once for all of them, not once a line (a stat or two
        a line held a follower of a 1 MB/s log to a fraction of it)."""
        marks = self.marks()
        unmarked: list[float] = []

        def time_of(end: int) -> float:
            i = bisect.bisect_left(marks, (end, -1.0))
            if i < len(marks):
                return marks[i][1]
            if not unmarked:
                unmarked.append(self._unmarked_time())
            return unmarked[0]

        return time_of

    def _unmarked_time(self) -> float:
        """The time of a line not marked yet: its file's modification time, but no earlier
        than the replica's last mark (on either stream), so that a line written after what
        was seen then is not put before it."""
        try:
            written = self.path.stat().st_mtime
        except FileNotFoundError:
            written = time.time()
        floors = [s.marks()[-1][1] for s in (self, *self.siblings) if s.marks()]
        return max([written, *floors])

    def offset_since(self, moment: float) -> int:
        """An offset at or before the first line written at ``moment`` or later."""
        marks = self.marks()
        times = [t for _, t in marks]
        i = bisect.bisect_left(times, moment)
        if i == 0:
            return self.first()
        return self.line_start(marks[i - 1][0])

    def line_start(self, offset: int) -> int:
        """The start of the line holding ``offset`` (read backwards a chunk at a time)."""
        first = self.first()
        pos = offset
        while pos > first:
            start = max(first, pos - CHUNK)
            got_from, data = self.read(start, pos - start)
            if got_from != start:
                return got_from
            cut = data.rfind(b"\n")
            if cut >= 0:
                return start + cut + 1
            pos = start
        return first

    def offset_of_tail(self, lines: int, end: int) -> int:
        """The offset of the ``lines``-th complete-or-partial line before ``end``."""
        first = self.first()
        if lines <= 0:
            return end
        pos = end
        seen = 0
        # A last line without its newline counts as a line, as `tail` counts it.
        last = self.read(end - 1, 1)[1] if end > first else b""
        if last == b"\n":
            seen = -1
        while pos > first:
            start = max(first, pos - CHUNK)
            got_from, data = self.read(start, pos - start)
            if got_from != start:
                return got_from
            cut = len(data)
            while True:
                cut = data.rfind(b"\n", 0, cut)
                if cut < 0:
                    break
                seen += 1
                if seen == lines:
                    return start + cut + 1
            pos = start
        return first


# --- lines -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    time: float
    rank: int
    text: bytes
    rotated_away: int = 0
    """Bytes of the stream just before this line rotated away before they were read."""


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r")


@dataclass
class StreamTail:
    """The unread part of one stream, read forward a chunk at a time."""

    stream: Stream
    offset: int = 0
    partial: bytes = field(default=b"")
    rotated_away: int = 0
    """Bytes skipped since the last line given out: rotated away before they were read."""

    def lines(self, until: int | None = None) -> Iterator[_Line]:
        """Complete lines written since the last call (a partial last line waits).

        ``until`` stops at that offset (the end seen when reading began), so a replica
        writing fast cannot keep one read going for ever.
        """
        end = self.stream.end() if until is None else until
        while self.offset < end:
            got_from, data = self.stream.read(self.offset, min(CHUNK, end - self.offset))
            if not data:
                break
            if got_from != self.offset:
                self.partial = b""  # the rest of that line was rotated away
                self.rotated_away += got_from - self.offset  # told with the next line
            self.offset = got_from + len(data)
            time_of = self.stream.timer()
            data = self.partial + data
            start = 0
            base = self.offset - len(data)
            while True:
                cut = data.find(b"\n", start)
                if cut < 0:
                    break
                lost, self.rotated_away = self.rotated_away, 0
                yield _Line(time_of(base + cut + 1), self.stream.rank, data[start:cut], lost)
                start = cut + 1
            self.partial = data[start:]
            if len(self.partial) >= MAX_LINE:
                # A line that never ends is given out in pieces, as CRI logs split lines.
                end_of = base + len(data)
                yield _Line(time_of(end_of), self.stream.rank, self.partial)
                self.partial = b""

    def rest(self) -> Iterator[_Line]:
        """A last line without a newline, once nothing more will be written."""
        tail, self.partial = self.partial, b""
        if tail:
            yield _Line(self.stream.time_of(self.offset), self.stream.rank, tail)


class ReplicaLog:
    """A replica's two streams, merged into one sequence of lines by time."""

    def __init__(self, replica: str, log_path: str | os.PathLike[str], query: LogQuery) -> None:
        self.replica = replica
        out, err = stream_paths(log_path)
        self.query = query
        streams = [Stream(out, 0), Stream(err, 1)]
        for stream in streams:
            stream.siblings = [other for other in streams if other is not stream]
        self.tails = [StreamTail(stream) for stream in streams]
        self.since = query.since_timestamp()
        self.left = query.limit_bytes
        for tail in self.tails:
            start = tail.stream.first()
            if self.since is not None:
                start = max(start, tail.stream.offset_since(self.since))
            if query.tail is not None:
                start = max(start, tail.stream.offset_of_tail(query.tail, tail.stream.end()))
            tail.offset = start

    @property
    def exhausted(self) -> bool:
        return self.left is not None and self.left <= 0

    def _merged(self, *, final: bool) -> Iterator[_Line]:
        def one(tail: StreamTail) -> Iterator[_Line]:
            yield from tail.lines(tail.stream.end())
            if final:
                yield from tail.rest()

        return heapq.merge(*(one(t) for t in self.tails), key=lambda line: (line.time, line.rank))

    def _emit(self, lines: Iterable[_Line]) -> Iterator[LogLine]:
        lost = 0
        for line in lines:
            if self.exhausted:
                return
            lost += line.rotated_away
            if self.since is not None and line.time < self.since:
                continue
            text = line.text
            if self.left is not None:
                # Like limitBytes: the byte budget counts each line's newline too.
                text = text[: self.left]
                self.left -= len(line.text) + 1
            moment = datetime.fromtimestamp(line.time, UTC)
            yield LogLine(self.replica, _decode(text), moment, rotated_away=lost)
            lost = 0

    def backlog(self, *, final: bool) -> Iterator[LogLine]:
        """Everything written so far (``tail``: only the last lines of it)."""
        lines: Iterable[_Line] = self._merged(final=final)
        if self.query.tail is not None:
            lines = deque(lines, maxlen=self.query.tail)
        yield from self._emit(lines)

    def new_lines(self, *, final: bool = False) -> Iterator[LogLine]:
        """Lines written since the last read."""
        yield from self._emit(self._merged(final=final))


def read_all(logs: Sequence[ReplicaLog]) -> Iterator[LogLine]:
    """Every asked-for line of every replica, replica after replica."""
    for log in logs:
        yield from log.backlog(final=True)


TERMINATION_LINES = 80
TERMINATION_BYTES = 2048
"""How much of a failed run's log becomes its termination message: the last 80 lines or
2048 bytes, whichever is less (the kubelet's ``FallbackToLogsOnError``)."""


def termination_tail(replica: str, log_path: str | os.PathLike[str]) -> str:
    """The end of a replica's log (both streams, merged) as its termination message.

    A line cut by the byte limit is dropped rather than shown in part. A log that cannot
    be read gives no message: the exit is reported all the same.
    """
    query = LogQuery(tail=TERMINATION_LINES)
    try:
        lines = [line.text for line in ReplicaLog(replica, log_path, query).backlog(final=True)]
    except OSError:
        return ""
    text = "\n".join(lines).strip()
    raw = text.encode()
    if len(raw) <= TERMINATION_BYTES:
        return text
    cut = raw[-TERMINATION_BYTES:].decode(errors="replace")
    return cut.partition("\n")[2] if "\n" in cut else cut


def follow(
    logs: Sequence[ReplicaLog],
    *,
    finished: Callable[[], bool],
    interval: float = 0.05,
    check_every: float = 0.25,
    pause: Callable[[float], object] = time.sleep,
) -> Iterator[LogLine]:
    """Lines of all replicas as they are written, until ``finished()`` and all is read.

    ``finished`` must only turn True once no replica process can write any more (the
    supervisor has let go of the job); then the files are drained one last time.
    ``pause(interval)`` waits between two looks: a sleep, or a wait that the job's end
    cuts short (the supervisor's own flag), so that its last lines come at once.
    """
    for log in logs:
        yield from log.backlog(final=False)
    next_check = 0.0
    while True:
        got = False
        for log in logs:
            for line in log.new_lines():
                got = True
                yield line
        if got:
            continue
        now = time.monotonic()
        if now >= next_check:
            next_check = now + check_every
            if finished():
                for log in logs:
                    yield from log.new_lines(final=True)
                return
        pause(interval)
