"""What does running an MPI job through kubemill's local substrate cost, next to mpirun by hand?

Runs ``examples/mpi_allreduce.py`` (4 ranks, an mpi4py allreduce) two ways, interleaved
round by round (the order alternates so neither always runs on a warm cache):

- ``kubemill``: ``kubemill run examples/mpi-allreduce.yaml`` in the foreground, with a
  fresh state directory per run: two worker hosts, then the launcher's ``mpirun -np 4``
  whose remote shell (kubexec) has the supervisor exec ``orted`` into each worker;
- ``mpirun``: the same ``mpirun -np 4 python mpi_allreduce.py`` invoked by hand on this
  machine (``--oversubscribe``: 4 ranks on 2 cores), with the environment kubemill gives
  MPI replicas here (``LOCAL_ENV``: loopback only, allowed to run as root).

The figure is wall time from just before the process is started until it has exited
(both must succeed). Prints the median (and min-max) over ``--runs`` rounds side by side
and the ratio kubemill / mpirun, with the goal (<= 1.10). Run on demand, never from the
test suite::

    python bench/mpi_overhead.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubemill.engines.mpi.local import LOCAL_ENV

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MANIFEST = EXAMPLES / "mpi-allreduce.yaml"
KUBEMILL = Path(sys.executable).with_name("kubemill")
GOAL = 1.10


def timed(argv: list[str], *, env: dict[str, str], cwd: Path) -> float:
    """Seconds from start to exit of ``argv``; exits with its output if it failed."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or "allreduce: 10 (expected 10)" not in done.stdout:
        sys.exit(f"{argv[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed


def run_kubemill(work: Path) -> float:
    state = Path(tempfile.mkdtemp(prefix="state-", dir=work))
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(state)}
    env.pop("KUBEMILL_SUBSTRATE", None)
    return timed([str(KUBEMILL), "run", str(MANIFEST)], env=env, cwd=work)


def run_by_hand(work: Path) -> float:
    env = {**os.environ, **LOCAL_ENV, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    # 4 ranks on a machine with fewer cores: kubemill's hostfile gives 2 slots per worker,
    # by hand mpirun must be told it may place more ranks than cores.
    argv = ["mpirun", "-np", "4", "--oversubscribe", "python", "mpi_allreduce.py"]
    return timed(argv, env=env, cwd=EXAMPLES)


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.3f} s ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5, at least 5)")
    args = parser.parse_args()
    if shutil.which("mpirun") is None:
        sys.exit("mpirun is not installed: scripts/setup.sh mpi")
    runs = max(args.runs, 5)
    times: dict[str, list[float]] = {"kubemill": [], "mpirun": []}
    with tempfile.TemporaryDirectory(prefix="mpi-bench-") as tmp:
        work = Path(tmp)
        for round_ in range(runs):
            order = ["kubemill", "mpirun"] if round_ % 2 == 0 else ["mpirun", "kubemill"]
            for who in order:
                runner = run_kubemill if who == "kubemill" else run_by_hand
                times[who].append(runner(work))
    kubemill, by_hand = (statistics.median(times[w]) for w in ("kubemill", "mpirun"))
    print(f"MPI allreduce, 4 ranks, {runs} rounds, wall time (median, min-max):")
    print(f"  kubemill run (2 worker hosts, exec agent)  {summary(times['kubemill'])}")
    print(f"  mpirun by hand                              {summary(times['mpirun'])}")
    ratio = kubemill / by_hand
    verdict = "met" if ratio <= GOAL else "missed"
    print(f"  ratio kubemill / mpirun: {ratio:.2f} (goal <= {GOAL:.2f}: {verdict})")
    print(f"  kubemill adds {kubemill - by_hand:+.3f} s per job")


if __name__ == "__main__":
    main()
