"""What the bench scripts measure: the wall time of a call, and a process's CPU time and
resident memory (from ``/proc``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def timed(work: Callable[[], object]) -> float:
    """Seconds ``work()`` took (wall clock)."""
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far (/proc/PID/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (VmRSS); a process that has none (exited, a
    zombie) stops the benchmark, whose figure would mean nothing."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for {pid}: the process is gone")
