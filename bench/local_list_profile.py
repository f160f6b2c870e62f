"""Where does ``JobClient.list()`` of the local substrate spend its time?

Seeds a state directory with ``--history`` finished jobs (as :mod:`local_scale` does: one
real run, recorded again under new names), then:

- times ``JobClient("local", ...).list()`` in one process: the first listing of a fresh
  client, the following ones of the same client (what a long-lived reader, the
  dashboard, pays on each poll when nothing changed), and the same client's listing after
  another process wrote one job's status (what it pays when a job changed);
- times ``kubemill get`` as a command (the console script, start-up included),
  which lists from one SQL query when no job needs healing (``Store.summaries``), for
  reference;
- with ``--profile``, runs cProfile over ``--profile-runs`` listings of one client and
  prints the functions by cumulative and by own time, for listings with nothing changed
  and for listings after one job's status changed.

With ``--compare SRC [SRC ...]`` it measures each source tree (a ``src`` folder, e.g. the
main worktree's and this one's) in a subprocess over the *same* seeded state, and prints
their figures side by side, the first as the reference. Run on demand, never from the test
suite::

    python bench/local_list_profile.py --history 1000 --profile
    python bench/local_list_profile.py --compare /work/main/src src
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import json
import os
import pstats
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import timed

BENCH = Path(__file__).resolve().parent


def measure(state: Path, runs: int) -> dict[str, list[float]]:
    """Seconds per listing: a fresh client's first, the same client's next ``runs``, and
    ``kubemill get`` as a command (interpreter start included), all of this source tree."""
    from kubemill.sdk import JobClient

    firsts = []
    for _ in range(runs):
        client = JobClient("local", state_dir=state)
        firsts.append(timed(client.list))
    client = JobClient("local", state_dir=state)
    client.list()
    again = [timed(client.list) for _ in range(runs)]
    changed = []
    for run in range(runs):
        change_one(state, run)
        changed.append(timed(client.list))
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(state)}
    from local_scale import kubemill_command

    # The console script, run with this PYTHONPATH: this source tree's CLI.
    command = [*kubemill_command(), "get"]
    get = functools.partial(subprocess.run, command, env=env, check=True, capture_output=True)
    get()  # one not counted: the page cache
    gets = [timed(get) for _ in range(runs)]
    return {"first": firsts, "again": again, "changed": changed, "get": gets}


def change_one(state: Path, run: int) -> None:
    """Another process's write of one job's status (a new condition message each run)."""
    status = {"conditions": [{"type": "Created", "status": "True", "message": f"run {run}"}]}
    with contextlib.closing(sqlite3.connect(state / "kubemill.db")) as conn, conn:
        conn.execute("UPDATE jobs SET status = ? WHERE name = 'history-1'", (json.dumps(status),))


def profile(state: Path, runs: int, top: int) -> None:
    from kubemill.sdk import JobClient

    client = JobClient("local", state_dir=state)
    listed = len(client.list())
    for what, before in (("nothing changed", None), ("one job changed", change_one)):
        profiler = cProfile.Profile()
        for run in range(runs):
            if before is not None:
                before(state, run)
            profiler.enable()
            client.list()
            profiler.disable()
        print(
            f"\ncProfile of {runs} listings of {listed} jobs by one client (after one"
            f" unprofiled), {what} before each"
        )
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.strip_dirs().sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def summary(samples: list[float]) -> str:
    low, high = min(samples) * 1000, max(samples) * 1000
    return f"{statistics.median(samples) * 1000:7.1f} ({low:.1f}-{high:.1f})"


def compare(state: Path, sources: list[str], runs: int, history: int) -> None:
    """Each source tree measured in its own interpreter over the same state, side by side."""
    results = []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # Every tree's bytecode cached alike, outside the trees, by the uncounted first runs:
    # a tree without it would pay the compilation in each `kubemill get`.
    env["PYTHONPYCACHEPREFIX"] = str(state.parent / "pycache")
    for source in sources:
        path = os.pathsep.join([str(Path(source).resolve()), str(BENCH)])
        argv = [sys.executable, str(Path(__file__).resolve()), "--measure", str(state)]
        out = subprocess.run(
            [*argv, "--runs", str(runs)],
            env={**env, "PYTHONPATH": path},
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results.append((source, json.loads(out.splitlines()[-1])))
    print(f"\n{history} finished jobs; median (min-max) ms of {runs}, ratio to the first source")
    columns = (
        ("first", "list(), fresh client"),
        ("again", "list(), same client"),
        ("changed", "list(), one job changed"),
        ("get", "kubemill get"),
    )
    print(f"{'source':<32}" + "".join(f" {title:<30}" for _, title in columns))
    for source, figures in results:
        cells = []
        for key, _ in columns:
            ratio = statistics.median(figures[key]) / statistics.median(results[0][1][key])
            cells.append(f" {summary(figures[key]) + f' x{ratio:.2f}':<30}")
        print(f"{source:<32}" + "".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=1000, help="finished jobs in history")
    parser.add_argument("--runs", type=int, default=5, help="listings timed per figure")
    parser.add_argument("--profile", action="store_true", help="cProfile the listings")
    parser.add_argument("--profile-runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=30, help="functions shown per ordering")
    parser.add_argument("--compare", nargs="+", metavar="SRC", help="source trees side by side")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        # A child of --compare: the figures as one JSON line, nothing else on stdout.
        print(json.dumps(measure(args.measure, args.runs)))
        return
    sys.path.insert(0, str(BENCH))
    from local_scale import fill_history

    os.environ.setdefault("KUBEMILL_CONFIG", "/nonexistent/kubemill-bench-config.yaml")
    work = Path(tempfile.mkdtemp(prefix="kubemill-list-profile-"))
    try:
        state = work / "state"
        fill_history(state, args.history)
        print(f"seeded {args.history} finished jobs", file=sys.stderr)
        if args.compare:
            compare(state, args.compare, args.runs, args.history)
        else:
            figures = measure(state, args.runs)
            print(f"\n{args.history} finished jobs; median (min-max) ms of {args.runs}")
            print(f"  JobClient.list(), fresh client  {summary(figures['first'])}")
            print(f"  JobClient.list(), same client   {summary(figures['again'])}")
            print(f"  list(), one job changed         {summary(figures['changed'])}")
            print(f"  kubemill get (a command)        {summary(figures['get'])}")
        if args.profile:
            profile(state, args.profile_runs, args.top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
