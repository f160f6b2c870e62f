"""Reading replica log files: all at once, or following them line by line as they grow.

The files are written by the replicas' processes themselves (their stdout and stderr),
so reading never depends on a supervisor being alive. Lines are decoded as UTF-8 with
replacement, so a process printing bytes cannot break ``kubemill logs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kubemill.substrates.base import LogLine

CHUNK = 1 << 20


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r")


@dataclass
class LogTail:
    """The unread part of one replica's log file."""

    replica: str
    path: Path
    offset: int = 0
    partial: bytes = field(default=b"")

    def read_lines(self) -> list[str]:
        """The complete lines written since the last call (a partial last line waits)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunks = []
                while chunk := fh.read(CHUNK):
                    chunks.append(chunk)
                data = b"".join(chunks)
        except FileNotFoundError:
            return []
        if not data:
            return []
        self.offset += len(data)
        data = self.partial + data
        *lines, self.partial = data.split(b"\n")
        return [_decode(line) for line in lines]

    def rest(self) -> list[str]:
        """A last line without a newline, once nothing more will be written."""
        tail, self.partial = self.partial, b""
        return [_decode(tail)] if tail else []


def read_all(tails: Sequence[LogTail]) -> Iterator[LogLine]:
    """Every line of every replica, replica after replica."""
    for tail in tails:
        for text in [*tail.read_lines(), *tail.rest()]:
            yield LogLine(replica=tail.replica, text=text)


def follow(
    tails: Sequence[LogTail],
    *,
    finished: Callable[[], bool],
    interval: float = 0.05,
    check_every: float = 0.25,
) -> Iterator[LogLine]:
    """Lines of all replicas as they are written, until ``finished()`` and all is read.

    ``finished`` must only turn True once no replica process can write any more (the
    supervisor has let go of the job); then the files are drained one last time.
    """
    next_check = 0.0
    while True:
        got = False
        for tail in tails:
            for text in tail.read_lines():
                got = True
                yield LogLine(replica=tail.replica, text=text)
        if got:
            continue
        now = time.monotonic()
        if now >= next_check:
            next_check = now + check_every
            if finished():
                yield from read_all(tails)
                return
        time.sleep(interval)
