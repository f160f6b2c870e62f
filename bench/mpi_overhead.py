"""What does running an MPI job through kubemill's local substrate cost, next to mpirun by hand?

Runs ``examples/mpi_allreduce.py`` (4 ranks, an mpi4py allreduce) several ways, interleaved
round by round (the order rotates so that none always runs first on a warm or cold cache):

- ``kubemill``: ``kubemill run examples/mpi-allreduce.yaml`` in the foreground, with a
  new state directory per run (its database created beforehand, as a user's state
  directory is after their first job), this tree's ``src`` first on ``PYTHONPATH``: two worker
  hosts, then the launcher's ``mpirun -np 4`` whose remote shell (kubexec) has the
  supervisor exec ``orted`` into each worker;
- ``kubemill (baseline)``, with ``--baseline SRC``: the same with another ``src`` tree (an
  earlier commit's, e.g. ``git archive <commit> src | tar -x -C /tmp/base``), for a before
  and after in one run;
- ``mpirun``: the same ``mpirun -np 4 python mpi_allreduce.py`` invoked by hand on this
  machine (``--oversubscribe``: 4 ranks on 2 cores), with the environment kubemill gives
  MPI replicas here (``LOCAL_ENV``: loopback only, allowed to run as root);
- ``mpirun, 2 hosts``: mpirun by hand over two host names with the cheapest remote shell,
  ``/bin/sh`` (each host an ``orted`` on this machine, its own temporary directory as
  kubemill gives each worker): what exec mode costs MPI itself, with no kubemill at all --
  the floor for a launcher that reaches its workers through a remote shell.

Two figures per run (all must succeed): the wall time from just before the process is
started until it has exited, and the CPU time of every process it started (this process
is a subreaper, so a daemonised ``orted`` is counted too; on a shared machine the steadier
figure, since other work stretches the wall time and not this); for ``kubemill run`` that
CPU time is also split into its own process's (the CLI, the supervisor and the exec
service: all its threads, read from its zombie before it is reaped) and the rest (the
job's processes: mpirun, kubexec, orted, the ranks, the worker hosts). One warm-up round
first (not counted: it compiles the baseline's bytecode). Prints the median (and min-max)
of each over ``--runs`` rounds side by side and the ratios to ``mpirun`` by hand, with the
goal (kubemill / mpirun <= 1.10, wall time). Run on demand, never from the test suite::

    python bench/mpi_overhead.py --runs 9 [--baseline /tmp/base/src]

Where the time goes, phase by phase: ``bench/mpi_profile.py``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubemill.engines.mpi.local import LOCAL_ENV
from kubemill.substrates.local.procinfo import become_subreaper

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MANIFEST = EXAMPLES / "mpi-allreduce.yaml"
KUBEMILL = Path(sys.executable).with_name("kubemill")
GOAL = 1.10
RANKS = ["-np", "4"]
SH_AGENT = """\
#!/bin/sh
# mpirun's remote shell for two "hosts" on this machine: AGENT <host> <words>.
host=$1; shift
mkdir -p "{tmp}/$host"
export TMPDIR="{tmp}/$host" OMPI_MCA_btl_vader_backing_directory="{tmp}/$host"
exec /bin/sh -c "$*"
"""
"""The cheapest remote shell: run the words here, each host with a temporary directory of
its own, as kubemill gives each worker (sharing one, OpenMPI's session directories and
shared-memory files of two hosts collide: vader crashes, a launch hangs now and then)."""


@dataclass(frozen=True)
class Sample:
    """One run: wall time, the CPU time of every process it started, and of the process
    started itself alone (its own threads, not the processes below it)."""

    wall: float
    cpu: float
    own: float


def timed(argv: list[str], *, env: dict[str, str], cwd: Path) -> Sample:
    """Wall seconds from start to exit of ``argv``, and the CPU seconds of it and of every
    process below it (orphans too: this process is a subreaper, and reaps them all before
    it returns), and of it alone (read from its zombie, before it is reaped); exits with
    the output if the run failed."""
    before = _children_cpu()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        watchdog = threading.Timer(300, process.kill)
        watchdog.start()
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
        elapsed = time.perf_counter() - start
        watchdog.cancel()
        own = _own_cpu(process.pid)
        code = process.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0 or "allreduce: 10 (expected 10)" not in stdout:
        sys.exit(f"{argv[0]} failed ({code}):\n{stdout}\n{stderr}")
    _reap_orphans()
    return Sample(elapsed, _children_cpu() - before, own)


def _own_cpu(pid: int) -> float:
    """The CPU seconds of process ``pid`` itself, all its threads, none of its children
    (``utime`` and ``stime`` of ``/proc/<pid>/stat``, which a zombie still has)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reap_orphans(timeout: float = 30.0) -> None:
    """Wait for the run's orphans (a daemonised orted re-parents here) until none is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)
    sys.exit("processes of the last run outlived it by 30 s")


def used_state_dir(work: Path, src: Path) -> Path:
    """A new state directory whose database the package from ``src`` has already created,
    as a user's is after their first job: creating it (its schema, with fsyncs) is paid
    once per machine, not per job, and is not counted (20-40 ms here)."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=work))
    create = f"from kubemill.substrates.local.store import Store; Store({str(state)!r}).close()"
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, "-c", create], env=env, check=True, timeout=60)
    return state


def kubemill_of(src: Path) -> Callable[[Path], Sample]:
    """``kubemill run`` of the example with the package from ``src``."""

    def run(work: Path) -> Sample:
        state = used_state_dir(work, src)
        env = {**os.environ, "KUBEMILL_STATE_DIR": str(state), "PYTHONPATH": str(src)}
        env.pop("KUBEMILL_SUBSTRATE", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: from bytecode
        return timed([str(KUBEMILL), "run", str(MANIFEST)], env=env, cwd=work)

    return run


def mpi_env() -> dict[str, str]:
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return {**os.environ, **LOCAL_ENV, "PATH": path}


def run_by_hand(work: Path) -> Sample:
    # 4 ranks on a machine with fewer cores: kubemill's hostfile gives 2 slots per worker,
    # by hand mpirun must be told it may place more ranks than cores.
    argv = ["mpirun", *RANKS, "--oversubscribe", "python", "mpi_allreduce.py"]
    return timed(argv, env=mpi_env(), cwd=EXAMPLES)


def run_two_hosts(work: Path) -> Sample:
    agent, hostfile = work / "sh-agent", work / "hostfile"
    if not agent.exists():
        agent.write_text(SH_AGENT.format(tmp=work / "hosts"))
        agent.chmod(0o755)
        hostfile.write_text("worker-0 slots=2\nworker-1 slots=2\n")
    # The settings kubemill's launcher gets in exec mode (engines/mpi/framework.py).
    argv = ["mpirun", *RANKS, "--hostfile", str(hostfile), "--mca", "plm_rsh_agent", str(agent)]
    argv += ["--mca", "plm_rsh_no_tree_spawn", "true", "--mca", "orte_keep_fqdn_hostnames", "true"]
    return timed([*argv, "python", "mpi_allreduce.py"], env=mpi_env(), cwd=EXAMPLES)


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.3f} s ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5, at least 5)")
    parser.add_argument("--baseline", type=Path, help="another src tree to measure beside")
    args = parser.parse_args()
    if shutil.which("mpirun") is None:
        sys.exit("mpirun is not installed: scripts/setup.sh mpi")
    runners: dict[str, Callable[[Path], Sample]] = {"kubemill": kubemill_of(ROOT / "src")}
    if args.baseline is not None:
        runners["kubemill (baseline)"] = kubemill_of(args.baseline.resolve())
    runners["mpirun"] = run_by_hand
    runners["mpirun, 2 hosts"] = run_two_hosts
    runs = max(args.runs, 5)
    samples: dict[str, list[Sample]] = {who: [] for who in runners}
    names = list(runners)
    become_subreaper()  # the orteds a run daemonises are its own, CPU time included
    with tempfile.TemporaryDirectory(prefix="mpi-bench-") as tmp:
        work = Path(tmp)
        for who in names:
            runners[who](work)  # warm-up, not counted
        for round_ in range(runs):
            shift = round_ % len(names)
            for who in names[shift:] + names[:shift]:
                samples[who].append(runners[who](work))
    labels = {
        "kubemill": "kubemill run (2 worker hosts, exec agent)",
        "kubemill (baseline)": f"kubemill run, baseline ({args.baseline})",
        "mpirun": "mpirun by hand",
        "mpirun, 2 hosts": "mpirun by hand, 2 hosts via /bin/sh (floor)",
    }
    medians: dict[str, dict[str, float]] = {}
    print(f"MPI allreduce, 4 ranks, {runs} rounds (median, min-max; / mpirun by hand):")
    for figure in ("wall", "cpu"):
        title = "wall time" if figure == "wall" else "CPU time of all its processes"
        print(f"{title}:")
        values = {who: [getattr(s, figure) for s in samples[who]] for who in names}
        medians[figure] = {who: statistics.median(v) for who, v in values.items()}
        by_hand = medians[figure]["mpirun"]
        for who in names:
            ratio = medians[figure][who] / by_hand
            print(f"  {labels[who]:<45} {summary(values[who])}  {ratio:5.2f}x")
    print("CPU time of kubemill's own process (CLI, supervisor, exec service) / of the rest:")
    for who in (who for who in names if who.startswith("kubemill")):
        own = [s.own for s in samples[who]]
        rest = [s.cpu - s.own for s in samples[who]]
        print(f"  {labels[who]:<45} {summary(own)} / {summary(rest)}")
    wall = medians["wall"]
    ratio = wall["kubemill"] / wall["mpirun"]
    verdict = "met" if ratio <= GOAL else "missed"
    print(f"ratio kubemill / mpirun (wall): {ratio:.2f} (goal <= {GOAL:.2f}: {verdict})")
    print(f"kubemill adds {wall['kubemill'] - wall['mpirun']:+.3f} s per job", end="")
    print(f" ({wall['kubemill'] - wall['mpirun, 2 hosts']:+.3f} s over the 2-host floor)")
    if args.baseline is not None:
        for figure in ("wall", "cpu"):
            now, before = medians[figure]["kubemill"], medians[figure]["kubemill (baseline)"]
            print(f"kubemill / baseline ({figure}): {now / before:.2f} ({now - before:+.3f} s)")


if __name__ == "__main__":
    main()
