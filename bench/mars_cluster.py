"""What does a local Mars cluster through kubemill cost, next to Mars by hand and in-process?

Two figures, each a ratio, printed side by side:

1. **Start-up to ready** (1 supervisor, 2 workers of 1 CPU and 2 GiB):
   ``kubemill.deploy.local.new_cluster(...)`` until it returns, against starting the same
   ``mars-supervisor`` / ``mars-worker`` commands by hand (own TMPDIRs and process groups,
   as anyone must to keep clusters apart) and polling the supervisor's web API every 0.1 s
   until it lists both workers. Both then open a session on the cluster (``new_cluster``
   does so itself, as Mars's own does), which is counted in both. Rounds alternate which
   goes first. Goal: <= 1.2.
2. **The seed's computation**, ``a = mt.random.rand(n, n); a.dot(a.T).execute()`` at
   n = 10 and n = 2000, on that cluster against Mars's own ``mars.new_session()`` (a
   cluster inside this process; its start is not counted). One warm-up each, then the
   median of ``--runs``.
3. **Stop**, with the session still open: ``cluster.stop()`` until it returns (the cluster's
   job deleted, no process left), against Mars's own graceful stop of the hand-started
   cluster (SIGINT, Mars's Ctrl-C, to each command's process at once, until every one has
   exited). Goal (issue 21): no more than Mars's own stop + 0.5 s. Each side's timeline
   follows: every process of the cluster (a role's main process, its sub pools, forkserver,
   resource tracker, a worker's plasma store), polled every 5 ms, and when it exited after
   the stop request (medians); and how long after the last one the stop returned. Mars's
   own stop at times never ends for a worker whose supervisor went first (its locator spins,
   which the entrypoint patches): such a round counts the 60 s the bench waits, and its
   timeline says which process did not exit by itself.

``--stop-compare SRC [SRC ...]`` measures the stop alone, of each source tree's kubemill
(a process of its own per cluster, that tree first on ``PYTHONPATH``, which the cluster's
processes inherit) both as ``cluster.stop()`` and as ``kubemill cluster stop NAME`` (its
start-up counted), beside Mars's own, in interleaved rounds; it also lists anything a stop
left in /dev/shm (a plasma store's segments) or /tmp (Mars's socket directories,
kubemill's short links to them).

Run with the Mars environment's interpreter, on demand, never from the test suite::

    PYTHONPATH=src $(kubemill env python mars) bench/mars_cluster.py --runs 3
    PYTHONPATH=src $(kubemill env python mars) bench/mars_cluster.py --runs 5 \\
        --stop-compare /tmp/base/src src      # before and after, side by side
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

GOAL = 1.2
HAND_START_WAIT = 120
"""Seconds the cluster started by hand may take to serve both workers before it is started
again."""
SRC = Path(os.environ.get("MARS_BENCH_SRC") or Path(__file__).resolve().parent.parent / "src")
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

import mars  # type: ignore[import-not-found]  # noqa: E402
import mars.tensor as mt  # type: ignore[import-not-found]  # noqa: E402

from kubemill.deploy.local import new_cluster  # noqa: E402

BIN = Path(sys.executable).absolute().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def workers_ready(web: int) -> int:
    url = f"http://127.0.0.1:{web}/api/cluster/nodes?role=1&statuses=1"
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return len(json.loads(answer.read())["nodes"])
    except (OSError, ValueError):
        return 0


def children_of(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's), from /proc."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(c) for c in (task / "children").read_text().split()]
    return found


def process_tree(roots: dict[str, int]) -> dict[int, str]:
    """Every process under ``roots`` (name: pid), named ``<root name>/<what it runs>``."""
    named: dict[int, str] = {}
    todo = [(pid, name, "") for name, pid in roots.items()]
    while todo:
        pid, name, parent = todo.pop()
        if pid in named:
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # A forkserver's children are forked from it, its command line and all.
        what = "main" if not parent else "sub-pool" if parent == "forkserver" else _what(argv)
        named[pid] = f"{name}/{what}"
        todo += [(child, name, what) for child in children_of(pid)]
    return named


def _what(argv: list[bytes]) -> str:
    text = b" ".join(argv).decode(errors="replace")
    for mark, what in (
        ("plasma", "plasma"),
        ("resource_tracker", "resource-tracker"),
        ("forkserver", "forkserver"),
        ("multiprocessing", "sub-pool"),
    ):
        if mark in text:
            return what
    return Path(argv[0].decode(errors="replace")).name or "?"


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting to be reaped has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


class ExitTimes:
    """Seconds from the stop request until each process of a cluster has exited, polled
    every 5 ms by a thread (started with the stop; the tree is read just before)."""

    def __init__(self, roots: dict[str, int]) -> None:
        self.names = process_tree(roots)
        self.exited: dict[int, float] = {}
        self.begun = time.perf_counter()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            now = time.perf_counter() - self.begun
            for pid in self.names.keys() - self.exited.keys():
                if gone(pid):
                    self.exited[pid] = now
            if len(self.exited) == len(self.names):
                return
            time.sleep(0.005)

    def finish(self) -> dict[str, float]:
        """Each process's exit time by name (several of a name: the last), once all have."""
        deadline = time.monotonic() + 5
        while len(self.exited) < len(self.names) and time.monotonic() < deadline:
            time.sleep(0.01)
        self._done.set()
        self._thread.join()
        times: dict[str, float] = {}
        for pid, name in self.names.items():
            at = self.exited.get(pid, float("nan"))
            times[name] = max(times.get(name, at), at)
        return times


Stop = Callable[[], tuple[float, dict[str, float]]]


def by_hand() -> tuple[float, Stop]:
    """Seconds until the hand-started cluster serves 2 workers and a session is open."""
    start = time.perf_counter()
    temp = tempfile.mkdtemp(prefix="km-hand-", dir="/tmp")
    sup, web = free_port(), free_port()
    supervisor = ["-H", "127.0.0.1", "-p", str(sup), "-w", str(web), "-s", ""]
    worker = ["-s", f"127.0.0.1:{sup}", "--n-cpu", "1", "--mem-bytes", str(2 << 30)]
    commands = [[str(BIN / "mars-supervisor"), *supervisor]] + [
        [str(BIN / "mars-worker"), "-H", "127.0.0.1", "-p", str(free_port()), *worker]
        for _ in range(2)
    ]
    children = []
    for index, argv in enumerate(commands):
        tmp = Path(temp) / str(index)
        tmp.mkdir()
        children.append(
            subprocess.Popen(
                argv,
                env={**os.environ, "TMPDIR": str(tmp)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
    while workers_ready(web) < 2:
        if time.perf_counter() - start > HAND_START_WAIT:
            # Mars's worker never registers when its supervisor did not answer as it began
            # (its locator never asks again): this start does not count, another is made.
            print(f"bench: Mars by hand not ready in {HAND_START_WAIT} s; again", file=sys.stderr)
            for child in children:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            shutil.rmtree(temp, ignore_errors=True)
            return by_hand()
        time.sleep(0.1)
    mars.new_session(f"http://127.0.0.1:{web}", default=True)
    elapsed = time.perf_counter() - start

    def stop() -> tuple[float, dict[str, float]]:
        """Seconds Mars's own graceful stop takes (SIGINT: its Ctrl-C), and each process's
        exit time."""
        names = ["supervisor-0", "worker-0", "worker-1"]
        exits = ExitTimes({name: child.pid for name, child in zip(names, children, strict=True)})
        begun = exits.begun
        for child in children:
            child.send_signal(signal.SIGINT)  # the main process, which stops its pools
        for child in children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                print(f"bench: {child.args[0]} did not stop in 60 s; killed", file=sys.stderr)
        took = time.perf_counter() - begun
        times = exits.finish()
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        shutil.rmtree(temp, ignore_errors=True)
        return took, times

    return elapsed, stop


def through_kubemill(*, cli: bool = False) -> tuple[float, Stop]:
    """Seconds until ``new_cluster`` returns; its stop is ``cluster.stop()``, or with ``cli``
    the command ``kubemill cluster stop NAME`` (its start-up counted)."""
    start = time.perf_counter()
    cluster = new_cluster(worker_num=2, worker_cpu=1, worker_mem="2g", timeout=300)

    def stop() -> tuple[float, dict[str, float]]:
        prefix = cluster.namespace + "-"
        pids = {name.removeprefix(prefix): pid for name, pid in cluster.replica_pids().items()}
        exits = ExitTimes(pids)
        if cli:
            command = [str(BIN / "kubemill"), "cluster", "stop", cluster.namespace]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        else:
            cluster.stop()
        took = time.perf_counter() - exits.begun
        return took, exits.finish()

    return time.perf_counter() - start, stop


def seed(n: int) -> float:
    start = time.perf_counter()
    a = mt.random.rand(n, n)
    a.dot(a.T).execute()
    return time.perf_counter() - start


def timings(runs: int, n: int) -> list[float]:
    seed(n)  # warm-up
    return [seed(n) for _ in range(runs)]


def ratio_line(name: str, ours: list[float], theirs: list[float], other: str) -> str:
    a, b = statistics.median(ours), statistics.median(theirs)
    return (
        f"{name:<28} kubemill {a:8.3f} s ({min(ours):.3f}-{max(ours):.3f})"
        f"   {other} {b:8.3f} s ({min(theirs):.3f}-{max(theirs):.3f})   ratio {a / b:5.2f}"
    )


def timeline(samples: list[dict[str, float]]) -> str:
    """Each process's median exit time after the stop request, in exit order; a process that
    did not exit by itself in some rounds (killed in the end) says in how many."""
    names = {name for sample in samples for name in sample}
    exits = {
        name: [s[name] for s in samples if math.isfinite(s.get(name, math.nan))] for name in names
    }
    medians = {
        name: statistics.median(times) if times else math.inf for name, times in exits.items()
    }
    cells = []
    for name in sorted(names, key=medians.__getitem__):
        hung = len(samples) - len(exits[name])
        cells.append(f"{name} {medians[name]:.2f}" + (f" (not by itself: {hung})" if hung else ""))
    return ", ".join(cells)


def print_stops(sides: dict[str, list[tuple[float, dict[str, float]]]]) -> None:
    """The stop figure of every side, against Mars's own, with its exit timeline."""
    theirs = [took for took, _ in sides["Mars's own"]]
    base = statistics.median(theirs)
    for side, samples in sides.items():
        took = [t for t, _ in samples]
        last = [
            t - max(times.values())
            for t, times in samples
            if times and all(math.isfinite(at) for at in times.values())
        ]
        median = statistics.median(took)
        after = f"{statistics.median(last):.3f} s" if last else "-"
        print(
            f"  {side:<22} {median:6.3f} s ({min(took):.3f}-{max(took):.3f})"
            f"  x{median / base:4.2f}  {median - base:+.3f} s vs Mars's own"
            f"  (returned {after} after the last process)"
        )
        print(f"  {'':<22} exits (s): {timeline([times for _, times in samples])}")


def one_stop(*, cli: bool) -> None:
    """A child of ``--stop-compare``: start a cluster (its session open), stop it; print the
    stop's seconds, exit timeline and leftovers as a JSON line."""
    before = leftover_places()
    _, stop = through_kubemill(cli=cli)
    took, times = stop()
    left = sorted(leftover_places() - before)
    print(json.dumps({"took": took, "times": times, "left": left}))


def leftover_places() -> set[str]:
    """What a stopped cluster must not leave: shared memory segments (a plasma store's) and
    Mars's socket directories, or kubemill's short links to them."""
    places = {str(path) for path in Path("/dev/shm").iterdir()}
    places |= {str(path) for path in Path("/tmp").glob("kubemill-mars-*")}
    return places | {str(path) for path in Path("/tmp").glob("mars*")}


def stop_compare(sources: list[str], runs: int) -> None:
    """The stop of each source tree's kubemill (each in a process of its own, its tree first
    on PYTHONPATH, for the cluster's processes too) beside Mars's own, rounds interleaved."""
    ways = {"Mars's own": ("", "")}
    for source in sources:
        ways[f"{source} stop()"] = (source, "--one-stop")
        ways[f"{source} CLI"] = (source, "--one-cli-stop")
    sides: dict[str, list[tuple[float, dict[str, float]]]] = {side: [] for side in ways}
    left: set[str] = set()
    load = os.getloadavg()[0]
    for round_ in range(runs):
        order = list(sides)
        order = order[round_ % len(order) :] + order[: round_ % len(order)]
        for side in order:
            source, flag = ways[side]
            if not source:
                before = leftover_places()
                _, stop = by_hand()
                sides[side].append(stop())
                left |= {f"{side}: {place}" for place in leftover_places() - before}
                continue
            env = {**os.environ, "PYTHONPATH": source, "MARS_BENCH_SRC": source}
            done = subprocess.run(
                [sys.executable, __file__, flag],
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                sys.exit(f"bench: the stop through {side} failed:\n{done.stderr}")
            answer = json.loads(done.stdout.strip().splitlines()[-1])
            sides[side].append((answer["took"], answer["times"]))
            left |= {f"{side}: {place}" for place in answer["left"]}
    print(
        f"stop of a local Mars cluster (1 supervisor, 2 workers, session open), {runs} rounds"
        f" interleaved; load average {load:.2f} before, {os.getloadavg()[0]:.2f} after;"
        " goal: <= Mars's own + 0.5 s"
    )
    print_stops(sides)
    print(f"  left after a stop: {', '.join(sorted(left)) or 'nothing'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--stop-compare",
        nargs="+",
        metavar="SRC",
        help="only the stop figure, of each of these source trees, beside Mars's own",
    )
    parser.add_argument("--one-stop", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one-cli-stop", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if "KUBEMILL_STATE_DIR" not in os.environ:  # a child of --stop-compare has its parent's
        os.environ["KUBEMILL_STATE_DIR"] = tempfile.mkdtemp(prefix="km-bench-state-")
    if args.one_stop or args.one_cli_stop:
        one_stop(cli=args.one_cli_stop)
        return
    if args.stop_compare:
        stop_compare([str(Path(src).resolve()) for src in args.stop_compare], args.runs)
        return

    ours: list[float] = []
    hand: list[float] = []
    stops: dict[str, list[tuple[float, dict[str, float]]]] = {"kubemill": [], "Mars's own": []}
    compute: dict[int, list[float]] = {10: [], 2000: []}
    for round_ in range(args.runs):
        order = [through_kubemill, by_hand] if round_ % 2 == 0 else [by_hand, through_kubemill]
        for way in order:
            elapsed, stop = way()
            (ours if way is through_kubemill else hand).append(elapsed)
            if way is through_kubemill and round_ == 0:
                for n in compute:
                    compute[n] = timings(args.runs, n)
            stops["kubemill" if way is through_kubemill else "Mars's own"].append(stop())

    inproc: dict[int, list[float]] = {}
    mars.new_session(default=True)
    for n in compute:
        inproc[n] = timings(args.runs, n)

    print(f"local Mars cluster (1 supervisor, 2 workers), {args.runs} rounds; goal <= {GOAL}")
    print(ratio_line("start-up to ready", ours, hand, "by hand"))
    for n in compute:
        print(ratio_line(f"seed {n}x{n} (median)", compute[n], inproc[n], "in-process"))
    print("stop (session open); goal: <= Mars's own + 0.5 s")
    print_stops({"Mars's own": stops["Mars's own"], "kubemill": stops["kubemill"]})


if __name__ == "__main__":
    main()
