"""Where does a local MPIJob's time go, next to ``mpirun`` by hand? Phase by phase.

``bench/mpi_overhead.py`` says how much a local MPIJob costs over ``mpirun``; this says
where. It runs the same 4-rank allreduce (``examples/mpi_allreduce.py``) both ways, rounds
interleaved, with each rank wrapped so it prints ``rank R started at unix=T`` as its very
first statement and ``rank R ended at unix=T`` once the example's code has returned
(before MPI_Finalize, which runs at the interpreter's exit). For ``kubemill run``
(foreground, a new state directory whose database exists, as in ``bench/mpi_overhead.py``)
the moments between come from what the supervisor records: the job's creation, each
replica's ``started`` and ``finished``, the ``Exec`` events (the exec service received
kubexec's request and started ``orted``) and the verdict event. Phases:

- ``cli+submit``: the process started -> the job is recorded (interpreter, imports,
  manifest, planning, the first SQLite writes);
- ``to workers``: recorded -> the worker hosts' processes started;
- ``gate``: the workers started -> the launcher started (the core's start gate);
- ``mpirun+kubexec``: the launcher started -> the last ``orted`` exec'd (mpirun's own
  start, then kubexec's interpreter and its request to the exec service);
- ``to ranks``: that exec -> the last rank's first line (``orted``, the ranks' interpreters);
- ``user code``: the last rank's first line -> the last rank's last line;
- ``end``: the last rank's last line -> the process exited, split into ``launcher exit``
  (mpirun's own teardown, noticed by the supervisor), ``verdict`` (the core's judgement),
  ``workers stop`` (the hosts stopped) and ``exit`` (the supervisor lets go, ``run``
  prints the table and exits).

By hand the same marks give ``to ranks`` (the process started -> the last rank's first
line), ``user code`` and ``end``, for ``mpirun`` on one host and for ``mpirun`` over two
hosts through the cheapest remote shell, ``/bin/sh`` (``bench/mpi_overhead.py``'s floor:
what exec mode costs MPI itself, with no kubemill). Beside those the table sums
kubemill's ``mpirun+kubexec`` and ``to ranks`` into ``launcher -> last rank``, the same
stretch as the two hosts' ``to ranks``: their difference is what kubexec and the exec
service add to mpirun's own start. A second table sets each stretch of ``kubemill run``
beside its floor (:data:`FLOORS`) and prints what is left above it, kubemill's own cost:
the CLI's start and submission beside an interpreter that imports the libraries the CLI
cannot do without and validates one model (:data:`CLI_LIBRARIES`, timed in the same
rounds), the workers' start and the gate beside nothing (by hand no host
waits), and the rest beside mpirun over two hosts through ``/bin/sh``; with the ratios of
kubemill and of that floor to ``mpirun`` by hand, and the job's schema alone beside the
CLI's start and submission (:data:`JOB_SCHEMA`: those libraries with kubemill's MPIJob
models validating the example, nothing else of kubemill's). Medians over ``--runs`` rounds (after a
warm-up round), side by side, with the machine's load average; with ``--baseline SRC``
another ``src`` tree's ``kubemill run`` too (an earlier commit's: ``git archive <commit>
src | tar -x -C /tmp/base``), for a before and after in one run.

``--cprofile FILE`` also runs one job in this process (``kubemill run``'s own code, with its
output discarded) with cProfile on the supervisor's thread and the exec service's
threads, saves the stats to FILE and prints the functions with the most own time and
the most cumulative time of the supervisor. Run on demand, never from the test suite::

    python bench/mpi_profile.py --runs 9 [--baseline /tmp/base/src] [--cprofile /tmp/mpi.prof]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from kubemill.frameworks.mpi_launch import EXEC_AGENT_PROGRAM
from kubemill.substrates.files import packaged_program
from kubemill.substrates.local.exec_service import ExecService
from kubemill.substrates.local.spawn import start_tied
from kubemill.substrates.local.store import Store
from mpi_overhead import SH_AGENT, mpi_env, used_state_dir

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MANIFEST = EXAMPLES / "mpi-allreduce.yaml"
KUBEMILL = Path(sys.executable).with_name("kubemill")
RANKS = 4
WRAPPER = """\
import os, runpy, sys, time
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "?")
print(f"rank {rank} started at unix={time.time()}", flush=True)
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
print(f"rank {rank} ended at unix={time.time()}", flush=True)
"""
"""Each rank's program: the example, between two marks (its own start, its code's end)."""
MARK = re.compile(r"rank (\d+) (started|ended) at unix=([0-9.]+)")
KUBEMILL_PHASES = (
    "cli+submit",
    "to workers",
    "gate",
    "mpirun+kubexec",
    "to ranks",
    "user code",
    "launcher exit",
    "verdict",
    "workers stop",
    "exit",
)
"""The phases of ``kubemill run`` in order: they add up to its wall time."""
END_PHASES = ("launcher exit", "verdict", "workers stop", "exit")


def rank_marks(output: str) -> tuple[float, float]:
    """The last rank's first line and the last rank's last line (unix times)."""
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    for rank, what, moment in MARK.findall(output):
        (started if what == "started" else ended)[rank] = float(moment)
    if len(started) != RANKS or len(ended) != RANKS:
        sys.exit(f"expected a start and an end mark of {RANKS} ranks, got:\n{output}")
    return max(started.values()), max(ended.values())


def run_marked(argv: list[str], *, env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Run ``argv`` to its end: (unix time started, unix time exited, stdout)."""
    start = time.time()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    end = time.time()
    if done.returncode != 0 or "allreduce: 10 (expected 10)" not in done.stdout:
        sys.exit(f"{argv[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return start, end, done.stdout


def marked_manifest(work: Path, wrapper: Path) -> Path:
    """The example's manifest, its launcher running the wrapped example."""
    manifest = yaml.safe_load(MANIFEST.read_text())
    launcher = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    container = launcher["containers"][0]
    container["command"] = ["mpirun", "-np", str(RANKS), "python", str(wrapper), "mpi_allreduce.py"]
    container["workingDir"] = str(EXAMPLES)
    for spec in manifest["spec"]["mpiReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["workingDir"] = str(EXAMPLES)
    path = work / "mpi-allreduce-marked.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return path


def kubemill_phases(work: Path, manifest: Path, src: Path) -> dict[str, float]:
    """One ``kubemill run`` with the package from ``src``, cut into
    :data:`KUBEMILL_PHASES` (seconds each)."""
    state = used_state_dir(work, src)
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(state), "PYTHONPATH": str(src)}
    env.pop("KUBEMILL_SUBSTRATE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: from bytecode
    start, end, output = run_marked([str(KUBEMILL), "run", str(manifest)], env=env, cwd=work)
    first_line, last_line = rank_marks(output)
    store = Store(state)
    (job,) = store.jobs(None)
    replicas = {r.replica_type: r for r in store.replicas(job.uid)}
    workers = [r for r in store.replicas(job.uid) if r.replica_type == "Worker"]
    launcher = replicas["Launcher"]
    events = store.events(job.uid)
    execs = [e.time for e in events if e.reason == "Exec"]
    verdict = [e.time for e in events if e.reason.endswith(("Succeeded", "Failed"))]
    store.close()
    moments = [
        start,
        job.created,
        max(w.started or 0.0 for w in workers),
        launcher.started or 0.0,
        max(execs),
        first_line,
        last_line,
        launcher.finished or 0.0,
        verdict[-1],
        max(w.finished or 0.0 for w in workers),
        end,
    ]
    steps = zip(KUBEMILL_PHASES, moments[:-1], moments[1:], strict=True)
    return {name: after - before for name, before, after in steps}


def by_hand_phases(wrapper: Path) -> dict[str, float]:
    """One ``mpirun`` by hand: to ranks, user code, end (seconds each)."""
    argv = ["mpirun", "-np", str(RANKS), "--oversubscribe", "python", str(wrapper)]
    return _hand_phases(argv, wrapper)


def two_hosts_phases(work: Path, wrapper: Path) -> dict[str, float]:
    """One ``mpirun`` by hand over two hosts through ``/bin/sh`` as its remote shell, with
    the settings kubemill's launcher gets in exec mode (``bench/mpi_overhead.py``'s floor):
    to ranks, user code, end (seconds each)."""
    agent, hostfile = work / "sh-agent", work / "hostfile"
    if not agent.exists():
        agent.write_text(SH_AGENT.format(tmp=work / "hosts"))
        agent.chmod(0o755)
        hostfile.write_text("worker-0 slots=2\nworker-1 slots=2\n")
    argv = ["mpirun", "-np", str(RANKS), "--hostfile", str(hostfile)]
    argv += ["--mca", "plm_rsh_agent", str(agent), "--mca", "plm_rsh_no_tree_spawn", "true"]
    argv += ["--mca", "orte_keep_fqdn_hostnames", "true", "python", str(wrapper)]
    return _hand_phases(argv, wrapper)


def exec_service_phases(work: Path, wrapper: Path) -> dict[str, float]:
    """One ``mpirun`` by hand over two hosts through kubemill's exec agent (``kubexec``,
    the file a job's ConfigMap carries) and the local substrate's exec service, served
    from this process with no job, supervisor or CLI around them: to ranks, user code, end.
    Next to the ``/bin/sh`` floor, what the exec path itself costs."""
    agent, hostfile = work / "kubexec", work / "hostfile-exec"
    if not agent.exists():
        agent.write_text(packaged_program(EXEC_AGENT_PROGRAM))  # as a job's files hold it
        agent.chmod(0o755)
        hostfile.write_text("worker-0 slots=2\nworker-1 slots=2\n")
    pods = {}
    for host in ("worker-0", "worker-1"):
        tmp = work / "exec-hosts" / host
        tmp.mkdir(parents=True, exist_ok=True)
        env = {**mpi_env(), "TMPDIR": str(tmp), "OMPI_MCA_btl_vader_backing_directory": str(tmp)}
        spec = types.SimpleNamespace(env=env, cwd=str(EXAMPLES))
        # What the service reads of a replica's pod: running, not being deleted.
        pods[host] = types.SimpleNamespace(spec=spec, popen=True, deleting=False, cores=None)
    socket_path = work / "exec" / "exec.sock"
    service = ExecService(str(socket_path), job="bench", pods=lambda: pods, replicas=lambda: pods)
    service.start()
    try:
        argv = ["mpirun", "-np", str(RANKS), "--hostfile", str(hostfile)]
        argv += ["--mca", "plm_rsh_agent", str(agent), "--mca", "plm_rsh_no_tree_spawn", "true"]
        argv += ["--mca", "orte_keep_fqdn_hostnames", "true", "python", str(wrapper)]
        return _hand_phases(argv, wrapper, {"KUBEMILL_EXEC_SOCKET": str(socket_path)})
    finally:
        service.close()


def _hand_phases(
    argv: list[str], wrapper: Path, extra: dict[str, str] | None = None
) -> dict[str, float]:
    env = {**mpi_env(), **(extra or {})}
    start, end, output = run_marked([*argv, "mpi_allreduce.py"], env=env, cwd=EXAMPLES)
    first_line, last_line = rank_marks(output)
    return {
        "to ranks": first_line - start,
        "user code": last_line - first_line,
        "end": end - last_line,
    }


STARTS: dict[str, str] = {
    "tied": "as the local substrate starts one (start_tied: vfork, setpriv, sh)",
    "fork": "with a preexec_fn (fork: how it started one before)",
    "vfork": "bare (vfork, nothing tied)",
}
"""The ways :func:`interpreter_phases` starts ``/bin/true``, and what each is."""


CLI_LIBRARIES = """
import pydantic, yaml, rich.live
class Job(pydantic.BaseModel):
    name: str
Job.model_validate(yaml.safe_load("name: x"))
"""
"""What ``kubemill run`` in the foreground cannot start without, in a program of its own:
yaml reads the manifest, pydantic validates it (the first model made costs pydantic's
schema machinery, whatever the model), rich draws the live table."""


SCHEMA_ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
"""This tree's models, whatever the environment's PYTHONPATH."""
JOB_SCHEMA = f"""
import yaml, rich.live
from kubemill.engines.mpi.api import MPIJob
MPIJob.model_validate(yaml.safe_load(open({str(MANIFEST)!r})))
"""
"""Not a floor of the libraries: the job's schema alone (kubemill's models of an MPIJob made,
the example validated field by field), with yaml and rich and nothing else of kubemill's.
A CLI that checks this manifest with pydantic cannot start faster."""


def interpreter_phases() -> dict[str, float]:
    """One ``python -c pass`` (``start``: the floor of any command-line program in Python),
    one ``python -c CLI_LIBRARIES`` (``libraries``: the floor of ``kubemill run``'s start),
    one ``python -c JOB_SCHEMA`` (``schema``: that and the job's own models),
    and from this process ``/bin/true`` started each way of :data:`STARTS`: ``<way>`` until
    ``Popen`` returns (the starting thread is blocked that long) and ``<way> done`` until
    the process has exited (the new process's own way to its program), in seconds."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
    phases = {"start": time.perf_counter() - start}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI_LIBRARIES], check=True, timeout=60)
    phases["libraries"] = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", JOB_SCHEMA], check=True, timeout=60, env=SCHEMA_ENV)
    phases["schema"] = time.perf_counter() - start
    for name in STARTS:
        start = time.perf_counter()
        if name == "tied":
            process = start_tied(
                ["/bin/true"], env=None, cwd=None, stdin=None, stdout=None, stderr=None
            )
        else:
            preexec = (lambda: None) if name == "fork" else None
            process = subprocess.Popen(
                ["/bin/true"], close_fds=True, start_new_session=True, preexec_fn=preexec
            )
        phases[name] = time.perf_counter() - start
        process.wait()
        phases[f"{name} done"] = time.perf_counter() - start
    return phases


def median(samples: list[dict[str, float]], phase: str) -> float:
    return statistics.median(s[phase] for s in samples)


HAND = ("2h, kubexec", "2 hosts, sh", "mpirun")
"""The by-hand columns: two hosts through kubexec and the exec service alone, two hosts
through /bin/sh (exec mode's floor), one host."""
LAUNCH = ("mpirun+kubexec", "to ranks")
"""kubemill's phases from the launcher's start to the last rank's first line."""
INTERPRETER = "python"
"""The by-hand runs of an interpreter (not a column of the phase table)."""
FLOORS: tuple[tuple[str, tuple[str, ...], tuple[str, str] | None, str], ...] = (
    ("cli+submit", ("cli+submit",), (INTERPRETER, "libraries"), "its libraries (CLI_LIBRARIES)"),
    ("to workers + gate", ("to workers", "gate"), None, "none: by hand no host waits"),
    ("launcher -> last rank", LAUNCH, ("2 hosts, sh", "to ranks"), "mpirun, 2 hosts via sh"),
    ("user code", ("user code",), ("2 hosts, sh", "user code"), "the same"),
    ("end (last line -> exit)", END_PHASES, ("2 hosts, sh", "end"), "the same"),
)
"""Each stretch of ``kubemill run`` (its phases), its floor (a by-hand column's phase, or
none) and what that floor is. A local MPIJob runs in exec mode: its launcher reaches two
worker hosts through a remote shell, so mpirun over two hosts through the cheapest one,
``/bin/sh``, is the floor of everything from the launcher's start on; before it, a CLI
in Python cannot start faster than the interpreter with the libraries it validates the
manifest and draws the table with (:data:`CLI_LIBRARIES`), and nothing by hand waits for
hosts to start."""


def report(
    trees: dict[str, list[dict[str, float]]], by_hand: dict[str, list[dict[str, float]]]
) -> None:
    """The phases' medians, one column per kubemill tree, then the by-hand columns."""
    rounds = len(by_hand["mpirun"])
    print(f"phase (median of {rounds} rounds, s)".ljust(38), end="")
    print("".join(f"{name:>12}" for name in [*trees, *HAND]))

    def row(title: str, phases: tuple[str, ...], hand: str | None, indent: str = "  ") -> None:
        cells = "".join(
            f"{statistics.median(sum(s[p] for p in phases) for s in samples):12.3f}"
            for samples in trees.values()
        )
        if hand is not None:
            cells += "".join(f"{median(by_hand[name], hand):12.3f}" for name in HAND)
        print(f"{indent}{title:<{36 - len(indent)}}{cells}")

    for phase in KUBEMILL_PHASES[: KUBEMILL_PHASES.index("mpirun+kubexec")]:
        row(phase, (phase,), None)
    row("launcher -> last rank", LAUNCH, "to ranks")
    for phase in LAUNCH:
        row(phase, (phase,), None, indent="    ")
    row("user code", ("user code",), "user code")
    row("end (last line -> exit)", END_PHASES, "end")
    for phase in END_PHASES:
        row(phase, (phase,), None, indent="    ")
    start_phases = KUBEMILL_PHASES[: KUBEMILL_PHASES.index("user code")]
    row("start-up (to the last rank):", start_phases, "to ranks")
    cells = "".join(
        f"{statistics.median(sum(s.values()) for s in samples):12.3f}"
        for samples in [*trees.values(), *(by_hand[name] for name in HAND)]
    )
    print(f"  {'wall time:':<34}{cells}")


def report_floors(
    trees: dict[str, list[dict[str, float]]], by_hand: dict[str, list[dict[str, float]]]
) -> None:
    """Each stretch of each tree's ``kubemill run`` beside its floor (:data:`FLOORS`), and
    what is left above it: kubemill's own cost; then what a process's start costs here."""
    print(f"\nkubemill beside its floor (s){'':<8}", end="")
    print("".join(f"{name:>12}" for name in trees), end="")
    print(f"{'floor':>10}{'left':>10}  the floor")
    first = next(iter(trees))
    for title, phases, floor_of, what in FLOORS:
        values = {
            name: statistics.median(sum(s[p] for p in phases) for s in samples)
            for name, samples in trees.items()
        }
        floor = 0.0 if floor_of is None else median(by_hand[floor_of[0]], floor_of[1])
        cells = "".join(f"{value:12.3f}" for value in values.values())
        print(f"  {title:<34}{cells}{floor:10.3f}{values[first] - floor:10.3f}  {what}")
    # The totals: medians of each round's sum, as the phase table's wall time.
    walls = {name: statistics.median(sum(s.values()) for s in trees[name]) for name in trees}
    two_hosts = [sum(s.values()) for s in by_hand["2 hosts, sh"]]
    starts = [s["libraries"] for s in by_hand[INTERPRETER]]
    floor = statistics.median(a + b for a, b in zip(two_hosts, starts, strict=True))
    left = walls[first] - floor
    cells = "".join(f"{walls[name]:12.3f}" for name in trees)
    print(f"  {'wall time':<34}{cells}{floor:10.3f}{left:10.3f}")
    one_host = statistics.median(sum(s.values()) for s in by_hand["mpirun"])
    print(
        f"  / mpirun by hand ({one_host:.3f} s): {first} {walls[first] / one_host:.2f}x,"
        f" floor {floor / one_host:.2f}x (mpirun over 2 hosts via sh alone"
        f" {statistics.median(two_hosts) / one_host:.2f}x); kubemill's own {left:+.3f} s"
    )
    schema = median(by_hand[INTERPRETER], "schema")
    cli = statistics.median(s["cli+submit"] for s in trees[first])
    print(
        f"  the job's schema alone (JOB_SCHEMA: the libraries and kubemill's MPIJob models"
        f" validating the example) {schema:.3f} s; {first}'s cli+submit above it"
        f" {cli - schema:+.3f} s (the local submission: store, plan, images)"
    )
    print("  /bin/true started from this process, ms: Popen returns / the process is done")
    for name, what in STARTS.items():
        returned, done = (median(by_hand[INTERPRETER], p) * 1000 for p in (name, f"{name} done"))
        print(f"    {what:<68}{returned:7.2f} /{done:6.2f}")
    print("  (a job starts 3 processes before its launcher's mpirun runs, then 2 orteds at once)")


# --- cProfile of one job run in this process --------------------------------------------


@contextlib.contextmanager
def profiled_threads(profiles: list[cProfile.Profile]) -> Iterator[None]:
    """cProfile on the supervisor's thread and the exec service's threads, each profile
    added to ``profiles`` at its thread's end (cProfile sees only the thread that enables
    it, so each of those threads enables one of its own)."""
    from kubemill.substrates.local.supervisor.loop import Supervisor

    lock = threading.Lock()

    def wrap(owner: Any, name: str) -> Callable[[], None]:
        original = getattr(owner, name)

        def profiled(*args: Any, **kwargs: Any) -> Any:
            mine = cProfile.Profile()
            mine.enable()
            try:
                return original(*args, **kwargs)
            finally:
                mine.disable()
                with lock:
                    profiles.append(mine)

        setattr(owner, name, profiled)
        return lambda: setattr(owner, name, original)

    undo = [wrap(Supervisor, "run"), wrap(ExecService, "_serve_quietly")]
    try:
        yield
    finally:
        for step in undo:
            step()


def cprofile_one(work: Path, manifest: Path, out: Path) -> None:
    """Run one job in this process with its supervisor profiled; print and save the stats."""
    from kubemill.cli.app import run_app

    state = Path(tempfile.mkdtemp(prefix="state-", dir=work))
    os.environ["KUBEMILL_STATE_DIR"] = str(state)
    os.environ.pop("KUBEMILL_SUBSTRATE", None)
    profiles: list[cProfile.Profile] = []
    sink = io.StringIO()
    with profiled_threads(profiles), contextlib.redirect_stdout(sink):
        started = time.perf_counter()
        with contextlib.suppress(SystemExit):
            run_app(["run", str(manifest)])
        took = time.perf_counter() - started
    if "allreduce: 10 (expected 10)" not in sink.getvalue():
        sys.exit(f"the profiled run failed:\n{sink.getvalue()}")
    stats = pstats.Stats(profiles[0])
    for more in profiles[1:]:
        stats.add(more)
    stats.dump_stats(str(out))
    print(f"\ncProfile of one in-process run ({took:.3f} s), supervisor and exec threads:")
    for key, title in (("tottime", "own time"), ("cumulative", "cumulative")):
        text = io.StringIO()
        pstats.Stats(str(out), stream=text).sort_stats(key).print_stats(15)
        body = text.getvalue()
        print(f"-- by {title}:")
        print(body[body.find("   ncalls") :].rstrip())
    print(f"(saved to {out}: python -m pstats {out})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--baseline", type=Path, help="another src tree to profile beside")
    parser.add_argument("--cprofile", type=Path, help="profile one in-process run into FILE")
    args = parser.parse_args()
    if shutil.which("mpirun") is None:
        sys.exit("mpirun is not installed: scripts/setup.sh mpi")
    trees = {"kubemill": ROOT / "src"}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    columns = [*trees, *HAND, INTERPRETER]
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in columns}
    with tempfile.TemporaryDirectory(prefix="mpi-profile-") as tmp:
        work = Path(tmp)
        wrapper = work / "marked.py"
        wrapper.write_text(WRAPPER)
        manifest = marked_manifest(work, wrapper)

        def run(name: str) -> dict[str, float]:
            if name == "mpirun":
                return by_hand_phases(wrapper)
            if name == "2 hosts, sh":
                return two_hosts_phases(work, wrapper)
            if name == "2h, kubexec":
                return exec_service_phases(work, wrapper)
            if name == INTERPRETER:
                return interpreter_phases()
            return kubemill_phases(work, manifest, trees[name])

        names = list(samples)
        for name in names:
            run(name)  # warm-up, not counted
        for round_ in range(max(args.runs, 1)):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(run(name))
        by_hand = {name: samples[name] for name in [*HAND, INTERPRETER]}
        report({name: samples[name] for name in trees}, by_hand)
        report_floors({name: samples[name] for name in trees}, by_hand)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.cprofile is not None:
            cprofile_one(work, manifest, args.cprofile)


if __name__ == "__main__":
    main()
