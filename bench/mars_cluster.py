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
   exited). Goal (issue 21): no more than Mars's own stop + 0.5 s.

Run with the Mars environment's interpreter, on demand, never from the test suite::

    $(kubemill env python mars) bench/mars_cluster.py --runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

GOAL = 1.2
SRC = Path(__file__).resolve().parent.parent / "src"
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


def by_hand() -> tuple[float, Callable[[], float]]:
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
        time.sleep(0.1)
    mars.new_session(f"http://127.0.0.1:{web}", default=True)
    elapsed = time.perf_counter() - start

    def stop() -> float:
        """Seconds Mars's own graceful stop takes (SIGINT: its Ctrl-C)."""
        begun = time.perf_counter()
        for child in children:
            child.send_signal(signal.SIGINT)  # the main process, which stops its pools
        for child in children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                print(f"bench: {child.args[0]} did not stop in 60 s; killed", file=sys.stderr)
        took = time.perf_counter() - begun
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        shutil.rmtree(temp, ignore_errors=True)
        return took

    return elapsed, stop


def through_kubemill() -> tuple[float, Callable[[], float]]:
    start = time.perf_counter()
    cluster = new_cluster(worker_num=2, worker_cpu=1, worker_mem="2g", timeout=300)

    def stop() -> float:
        begun = time.perf_counter()
        cluster.stop()
        return time.perf_counter() - begun

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("KUBEMILL_STATE_DIR", tempfile.mkdtemp(prefix="km-bench-state-"))

    ours: list[float] = []
    hand: list[float] = []
    stops: dict[str, list[float]] = {"ours": [], "hand": []}
    compute: dict[int, list[float]] = {10: [], 2000: []}
    for round_ in range(args.runs):
        order = [through_kubemill, by_hand] if round_ % 2 == 0 else [by_hand, through_kubemill]
        for way in order:
            elapsed, stop = way()
            (ours if way is through_kubemill else hand).append(elapsed)
            if way is through_kubemill and round_ == 0:
                for n in compute:
                    compute[n] = timings(args.runs, n)
            stops["ours" if way is through_kubemill else "hand"].append(stop())

    inproc: dict[int, list[float]] = {}
    mars.new_session(default=True)
    for n in compute:
        inproc[n] = timings(args.runs, n)

    print(f"local Mars cluster (1 supervisor, 2 workers), {args.runs} rounds; goal <= {GOAL}")
    print(ratio_line("start-up to ready", ours, hand, "by hand"))
    for n in compute:
        print(ratio_line(f"seed {n}x{n} (median)", compute[n], inproc[n], "in-process"))
    print(ratio_line("stop (session open)", stops["ours"], stops["hand"], "Mars's own"))
    extra = statistics.median(stops["ours"]) - statistics.median(stops["hand"])
    print(f"{'':<28} stop beyond Mars's own: {extra:+.3f} s (goal <= +0.5 s)")


if __name__ == "__main__":
    main()
