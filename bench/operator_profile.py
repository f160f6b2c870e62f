"""Where the operator spends its CPU and what holds its memory, under the throughput bench.

Not run by hand: ``bench/operator_throughput.py --profile cpu|memory|malloc|py-spy DIR`` runs the
operator through it and writes the results to DIR (see there). Four ways, each in the
operator's own process, so that its figures are the operator's:

- ``cpu``: this script runs the operator (``python bench/operator_profile.py cpu DIR --
  OPERATOR-ARGS``) under cProfile in every thread (the event loop and the API client's
  pool), and on ``SIGUSR1`` (sent by the bench once every pod exists) writes the merged
  profile to ``DIR/cpu.pstats`` and the functions by own and by cumulative time to
  ``DIR/cpu.txt``, headed by the time the garbage collector took (which cProfile does not
  see), by generation. Each thread's profile counts that thread's CPU time
  (``time.thread_time``), not the wall clock: an API thread's wait for its answer, most of
  its wall time, costs nothing and shows as nothing. cProfile doubles the operator's CPU;
  its shares are what to read.
- ``memory``: the same with tracemalloc (from after the operator's imports); on ``SIGUSR1``
  (sent once the operator is idle and again once every pod exists) writes the biggest
  holders by file and by line to ``DIR/memory-1.txt``, then ``DIR/memory-2.txt`` with what
  grew since, by line and by the allocating call stack.
- ``malloc``: no tracing; on ``SIGUSR1`` (sent once the operator is idle and again once
  every pod exists) writes ``DIR/malloc-1.txt``, then ``DIR/malloc-2.txt``: what glibc's
  malloc holds (``mallinfo2``: in use and free, over all its arenas), what CPython's
  small-object allocator holds (arenas, blocks in use, free blocks in its pools), the
  objects the garbage collector sees by type (and at the end how that grew), and at the end
  the resident memory before and after ``malloc_trim(0)`` gave malloc's free pages back:
  memory freed but kept, which no object explains.
- ``py-spy``: the bench attaches ``py-spy record --gil`` (a sampler outside the process, if
  installed) to the operator for the burst only and writes ``DIR/py-spy.txt`` (folded
  stacks); ``python bench/operator_profile.py summary DIR/py-spy.txt`` prints the
  functions by own and by inclusive share of the samples.

Each writes ``DIR/MODE.done`` when its files are complete (the bench removes it first).
"""

from __future__ import annotations

import cProfile
import ctypes
import gc
import io
import os
import pstats
import re
import signal
import sys
import tempfile
import threading
import time
import tracemalloc
import types
from collections import Counter
from pathlib import Path
from typing import Any

TOP = 60
DEPTH = 8
"""Frames kept of each allocation (the grown memory is also shown by its callers)."""


def _profile_every_thread(out: Path) -> None:
    """cProfile in the main thread and in every thread started from now on; SIGUSR1 writes
    their merged statistics."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()
    original_run = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        profile.enable()
        try:
            original_run(self)
        finally:
            profile.disable()

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    collections = _time_collections()
    main = cProfile.Profile(time.thread_time)
    profiles.append(main)

    def dump(*_: Any) -> None:
        main.disable()
        stats: pstats.Stats | None = None
        with lock:
            for profile in profiles:
                # Another thread's profiler stays enabled: read what it has so far.
                profile.snapshot_stats()
                if stats is None:
                    stats = pstats.Stats(profile)
                else:
                    stats.add(profile)
        assert stats is not None
        stats.dump_stats(out / "cpu.pstats")
        text = io.StringIO()
        text.write(collections() + "\n\n")
        stats.stream = text  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(TOP)
        stats.sort_stats("cumulative").print_stats(TOP)
        (out / "cpu.txt").write_text(text.getvalue())
        (out / "cpu.done").touch()

    signal.signal(signal.SIGUSR1, dump)
    main.enable()


def _time_collections() -> Any:
    """Time the garbage collector's passes from now on (CPU time of the thread that runs
    them: a busy machine's other processes do not count); the returned function says how
    long they took, by generation."""
    seconds = [0.0, 0.0, 0.0]
    counts = [0, 0, 0]
    started = [0.0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        else:
            seconds[info["generation"]] += time.thread_time() - started[0]
            counts[info["generation"]] += 1

    gc.callbacks.append(callback)
    return lambda: (
        "garbage collector: "
        + ", ".join(f"generation {g}: {counts[g]} passes, {seconds[g]:.3f} s" for g in range(3))
    )


def _trace_memory(out: Path) -> None:
    """tracemalloc from now on; each SIGUSR1 writes the biggest holders of memory to
    ``memory-N.txt`` and, from the second on, what grew since the first (idle) one."""
    tracemalloc.start(DEPTH)
    snapshots: list[tracemalloc.Snapshot] = []

    def dump(*_: Any) -> None:
        snapshot = tracemalloc.take_snapshot()
        snapshots.append(snapshot)
        current, peak = tracemalloc.get_traced_memory()
        lines = [f"traced now {current / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB", ""]
        for key in ("filename", "lineno"):
            lines.append(f"-- by {key}")
            for stat in snapshot.statistics(key)[:TOP]:
                frame = stat.traceback[0]
                where = frame.filename if key == "filename" else f"{frame.filename}:{frame.lineno}"
                lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:8d} blocks  {where}")
            lines.append("")
        if len(snapshots) > 1:
            lines.append("-- grown since the first snapshot, by line")
            for diff in snapshot.compare_to(snapshots[0], "lineno")[:TOP]:
                frame = diff.traceback[0]
                lines.append(
                    f"{diff.size_diff / 2**20:+8.2f} MiB {diff.count_diff:+8d} blocks"
                    f"  {frame.filename}:{frame.lineno}"
                )
            lines.append("")
            lines.append("-- grown since the first snapshot, by who allocated it (innermost last)")
            for diff in snapshot.compare_to(snapshots[0], "traceback")[:15]:
                lines.append(f"{diff.size_diff / 2**20:+8.2f} MiB {diff.count_diff:+8d} blocks")
                lines += [f"      {frame.filename}:{frame.lineno}" for frame in diff.traceback]
        (out / f"memory-{len(snapshots)}.txt").write_text("\n".join(lines))
        (out / "memory.done").touch()

    signal.signal(signal.SIGUSR1, dump)


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33 and later): byte counts over every arena."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _pymalloc_stats() -> list[str]:
    """The totals of CPython's small-object allocator (``sys._debugmallocstats``, which
    writes to the C stderr: read back through a file)."""
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        try:
            os.dup2(captured.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode()
    wanted = ("# arenas allocated current", "# bytes in ", "# bytes lost", "Total")
    return [" ".join(line.split()) for line in text.splitlines() if line.startswith(wanted)]


def _deep_size(root: object, seen: set[int]) -> int:
    """Bytes of ``root`` and of what it reaches (no classes, modules or functions: code),
    skipping what ``seen`` holds and adding what it counted to it."""
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def _held_by_parts() -> list[str]:
    """The deep size of the operator's long-lived parts, found among the collector's objects
    by their class: the reconciler's per-job memory and loaded jobs, the caches (kopf's
    indexes, which hold what the handlers return), the history keeper's events."""
    from kubemill.substrates.kubernetes.operator.history import HistoryKeeper
    from kubemill.substrates.kubernetes.operator.reconciler import Reconciler

    found = [o for o in gc.get_objects() if isinstance(o, Reconciler | HistoryKeeper)]
    parts: list[tuple[str, object]] = []
    for obj in found:
        if isinstance(obj, Reconciler):
            caches = obj._caches
            parts += [
                ("reconciler: per-job memory", obj._memory),
                ("reconciler: loaded jobs and plans", obj._loaded),
                ("cache: jobs (kopf's index)", caches.jobs),
                ("cache: pods (kopf's index)", caches.pods),
                ("cache: services (kopf's index)", caches.services),
                ("cache: files and access", caches.files_and_access),
            ]
        else:
            parts += [("history: events and replicas", (obj._events, obj._replicas))]
    seen: set[int] = set()
    return [f"{_deep_size(root, seen) / 2**20:8.2f} MiB  {name}" for name, root in parts]


def _report_malloc(out: Path) -> None:
    """On each SIGUSR1 (the bench sends one at idle, one at the end): what malloc and
    CPython's allocator hold, the objects the collector sees by type (and, from the second,
    how their counts grew), and from the second on, the resident memory after trimming."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    counts: list[Counter[str]] = []

    def dump(*_: Any) -> None:
        gc.collect()
        by_type = Counter(type(o).__qualname__ for o in gc.get_objects())
        counts.append(by_type)
        info = libc.mallinfo2()
        mib = 2**20
        lines = [
            f"threads {threading.active_count()} (Python's)",
            f"malloc in use {info.uordblks / mib:.1f} MiB, free {info.fordblks / mib:.1f} MiB"
            f" (in arenas {info.arena / mib:.1f} MiB, mapped alone {info.hblkhd / mib:.1f} MiB)",
        ]
        lines += ["", "-- CPython's small-object allocator", *_pymalloc_stats()]
        if len(counts) > 1:
            before = _resident_mib()
            libc.malloc_trim(0)
            lines += ["", f"resident {before:.1f} MiB, after malloc_trim(0) {_resident_mib():.1f}"]
            lines += ["", "-- objects the collector sees, grown since the first dump"]
            grown = by_type.copy()
            grown.subtract(counts[0])
            lines += [f"{n:+9d}  {name}" for name, n in grown.most_common(TOP) if n > 0]
        if len(counts) > 1:
            lines += ["", "-- what the operator's parts hold (deep, each object counted once)"]
            lines += _held_by_parts()
        lines += ["", f"-- objects the collector sees: {sum(by_type.values())}"]
        lines += [f"{n:9d}  {name}" for name, n in by_type.most_common(TOP)]
        (out / f"malloc-{len(counts)}.txt").write_text("\n".join(lines) + "\n")
        (out / "malloc.done").touch()

    signal.signal(signal.SIGUSR1, dump)


def summary(folded: Path, top: int = TOP) -> str:
    """Own and inclusive shares of the functions in py-spy's folded stacks (``--format
    raw``: one ``frame;frame;... COUNT`` per line)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        samples = int(count)
        total += samples
        # Shorter names: site-packages and the interpreter's library paths add nothing.
        frames = [re.sub(r"\(/\S*/(site-packages|python3\.\d+)/", "(", f) for f in stack.split(";")]
        own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    out = [f"{total} samples"]
    for title, counter in (("own", own), ("inclusive", inclusive)):
        out.append(f"-- by {title} share")
        out += [f"{100 * n / total:5.1f}%  {f}" for f, n in counter.most_common(top)]
    return "\n".join(out)


def main() -> None:
    mode, *rest = sys.argv[1:]
    if mode == "summary":
        print(summary(Path(rest[0])))
        return
    out = Path(rest[0])
    operator_args = rest[rest.index("--") + 1 :]
    # After the imports (most of the idle RSS, kopf's and the engines': see
    # ``python -X importtime``), which tracing DEPTH frames would slow past the bench's wait.
    from kubemill.substrates.kubernetes.operator.__main__ import app

    if mode == "memory":
        _trace_memory(out)
    elif mode == "cpu":
        _profile_every_thread(out)
    elif mode == "malloc":
        _report_malloc(out)
    else:
        raise SystemExit(f"unknown mode {mode!r}: cpu, memory, malloc or summary")
    app(args=operator_args, prog_name="operator")


if __name__ == "__main__":
    main()
