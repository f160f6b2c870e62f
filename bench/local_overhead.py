"""What does running a 2-process DDP job through kubemill's local substrate cost?

Runs the same script, ``examples/pytorch_ddp_digits.py`` with the same arguments, under
three launchers, interleaved round by round (the order rotates each round so that no
launcher always runs first on a warm or cold cache):

- ``kubemill``: ``kubemill run`` of a PyTorchJob (Master + 1 Worker), foreground, with a
  fresh state directory per run;
- ``torchrun``: ``torchrun --nproc_per_node=2`` (static rendezvous on 127.0.0.1);
- ``bare``: two processes started directly with MASTER_ADDR, MASTER_PORT, WORLD_SIZE and
  RANK set by hand (the floor: nothing can launch two processes for less).

Three figures per run; the first two measured from the moment the launcher's process is
started (``t0``, taken just before ``subprocess.Popen``):

- wall time: until the launcher has exited (for ``bare``, until both processes have);
- start latency ("submit to all replicas running"): until the *last* rank's first line of
  user code runs. The script records ``time.time()`` as its very first statement, before
  importing torch, and prints it as ``user code started at unix=...``; the same marker is
  read for every launcher, so the figure covers the launcher's own start-up and process
  creation but none of the training script's imports;
- end latency ("last replica's exit to the job reported finished"): from the last rank's
  last line of user code (``user code ended at unix=...``, printed just before it exits)
  until the launcher has exited: noticing the exits, the verdict, and reporting it.

Prints the median (and min-max) of each over ``--runs`` rounds side by side, the ratios to
``torchrun`` and to ``bare`` (with ``--baseline SRC``, another src tree's ``kubemill run`` too,
as ``before``), and the goals (kubemill adds < 0.3 s to start-up, wall-time
ratio <= 1.05, end latency <= bare processes' + 0.01 s). Bare processes' end latency is the
floor of kubemill's: the ranks' own exit (torch's and the interpreter's teardown) until a
parent has reaped them. ``kubemill run``'s end is split by what its supervisor records
(:data:`KUBEMILL_END`): ``ranks exit`` (the last line -> the supervisor recorded the last
replica's exit, woken by its pidfd: the same teardown as bare's, plus the notice),
``verdict`` (-> the core's Succeeded event) and ``exit`` (-> ``run`` has drawn its final
table and exited); beside bare's end, what is left above it is kubemill's own. Part of that
no command-line launcher that checks the manifest with pydantic can avoid: its process's own
exit, the kernel freeing its memory before the parent hears of it (~0.12 ms a MB on this
machine). Each round also times that exit for a process holding the job's schema alone
(:data:`JOB_SCHEMA`: yaml, rich, and the PyTorchJob's models validating the example; nothing
else of kubemill's) and the goal is also printed above bare's end plus that exit. Run on
demand, never from the test suite::

    python bench/local_overhead.py --runs 15 [--baseline /tmp/base/src]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kubemill.substrates.local.store import Store

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "pytorch_ddp_digits.py"
MARKER = re.compile(r"\[rank (\d+)/(\d+)\] user code started at unix=([0-9.]+)")
DONE = re.compile(r"\[rank (\d+)/\d+\] done: final test_accuracy=([0-9.]+)")
ENDED = re.compile(r"\[rank (\d+)/\d+\] user code ended at unix=([0-9.]+)")
WORLD_SIZE = 2
KUBEMILL_END = ("ranks exit", "verdict", "exit")
"""The stretches of ``kubemill run``'s end latency, in order; they add up to it."""
END_GOAL_OVER_BARE = 0.01
"""The end-latency goal: bare processes' end latency plus this (seconds)."""
JOB_SCHEMA = f"""
import yaml, rich.live, rich.table
from kubemill.engines.pytorch.api import PyTorchJob
PyTorchJob.model_validate(yaml.safe_load(open({str(ROOT / "examples" / "pytorch-ddp.yaml")!r})))
import os, time
print(time.time(), flush=True)
os._exit(0)
"""
"""A process holding the job's schema, which prints the moment it exits: its exit, timed
(:func:`schema_exit`), is the part of a launcher's end latency no CLI validating the
manifest with pydantic avoids (os._exit: no interpreter teardown, the kernel's part only)."""


@dataclass
class Sample:
    """One run of one launcher."""

    wall: float
    start_latency: float
    end_latency: float
    """From the last rank's last line of user code until the launcher had exited."""
    end_phases: dict[str, float] = field(default_factory=dict)
    """``kubemill run``'s end latency by :data:`KUBEMILL_END` (empty for the others)."""


@dataclass
class Launcher:
    """A way to start the two ranks; ``start`` returns the processes to wait for."""

    name: str
    start: Callable[[list[str], Path], list[subprocess.Popen[str]]]
    end_phases: Callable[[Path, float, float], dict[str, float]] | None = None
    """Splits the end latency: (the run's directory, the last rank's last line, the
    launcher's exit) -> seconds by stretch."""
    samples: list[Sample] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubemill_command() -> list[str]:
    """The ``kubemill`` console script of this interpreter's environment."""
    beside = Path(sys.executable).with_name("kubemill")
    found = str(beside) if beside.exists() else shutil.which("kubemill")
    if found is None:
        sys.exit("error: the kubemill command is not installed in this environment")
    return [found]


def torchrun_command() -> list[str]:
    beside = Path(sys.executable).with_name("torchrun")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "torch.distributed.run"]


def start_kubemill(
    script_args: list[str], workdir: Path, *, src: Path | None = None
) -> list[subprocess.Popen[str]]:
    """``kubemill run`` of the job; with ``src``, the package of that ``src`` tree's."""
    container = {
        "name": "pytorch",
        "image": "kubemill/bench:latest",
        "command": ["python", str(SCRIPT)],
        "args": script_args,
    }
    manifest = {
        "apiVersion": "kubemill.dev/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bench-ddp"},
        "spec": {
            "runPolicy": {"activeDeadlineSeconds": 600},
            "pytorchReplicaSpecs": {
                role: {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
                for role in ("Master", "Worker")
            },
        },
    }
    path = workdir / "bench-ddp.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(workdir / "state")}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return [_popen([*kubemill_command(), "run", str(path)], env=env, cwd=workdir)]


def kubemill_end_phases(workdir: Path, last_line: float, exited: float) -> dict[str, float]:
    """``kubemill run``'s end latency by :data:`KUBEMILL_END`, from what its supervisor
    recorded in the run's state directory."""
    store = Store(workdir / "state")
    try:
        (job,) = store.jobs(None)
        finished = [r.finished for r in store.replicas(job.uid)]
        verdicts = [e.time for e in store.events(job.uid) if e.reason.endswith("Succeeded")]
    finally:
        store.close()
    if None in finished or not verdicts:
        sys.exit(f"error: the job's records lack an exit or the verdict: {finished} {verdicts}")
    last_exit = max(f for f in finished if f is not None)
    moments = [last_line, last_exit, verdicts[-1], exited]
    return {name: b - a for name, a, b in zip(KUBEMILL_END, moments[:-1], moments[1:], strict=True)}


def start_torchrun(script_args: list[str], workdir: Path) -> list[subprocess.Popen[str]]:
    argv = [
        *torchrun_command(),
        f"--nproc_per_node={WORLD_SIZE}",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(SCRIPT),
        *script_args,
    ]
    return [_popen(argv, env=dict(os.environ), cwd=workdir)]


def start_bare(script_args: list[str], workdir: Path) -> list[subprocess.Popen[str]]:
    port = free_port()
    processes = []
    for rank in range(WORLD_SIZE):
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(WORLD_SIZE),
            "RANK": str(rank),
            "PYTHONUNBUFFERED": "1",
        }
        processes.append(_popen([sys.executable, str(SCRIPT), *script_args], env=env, cwd=workdir))
    return processes


def _popen(argv: list[str], *, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    # Output goes to a file in the run's directory (read once the run is over), so a
    # chatty process can never block on a full pipe while we wait for another one.
    with (cwd / f"output-{len(list(cwd.glob('output-*')))}.log").open("w") as out:
        return subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, so it can be stopped whole
        )


def wait_exactly(process: subprocess.Popen[str], *, deadline: float) -> None:
    """Wait for ``process`` to exit, noticing its exit the moment it happens.

    Not ``Popen.wait(timeout)``: with a timeout it polls, sleeping up to 50 ms between
    looks, which would add 0-50 ms to every end latency measured here (more than the
    goal). Its pidfd turns readable when it exits; the wait that reaps it then returns
    at once."""
    pidfd = os.pidfd_open(process.pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(0.0, deadline - time.time()) * 1000):
            raise subprocess.TimeoutExpired(process.args, deadline - time.time())
    finally:
        os.close(pidfd)
    process.wait()


def run_once(launcher: Launcher, script_args: list[str], *, timeout: float) -> Sample:
    with tempfile.TemporaryDirectory(prefix=f"kubemill-bench-{launcher.name}-") as tmp:
        t0 = time.time()
        processes = launcher.start(script_args, Path(tmp))
        try:
            for process in processes:
                wait_exactly(process, deadline=t0 + timeout)
            wall = time.time() - t0
        finally:
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        output = "".join(p.read_text() for p in sorted(Path(tmp).glob("output-*.log")))
        ends = [float(m[2]) for m in ENDED.finditer(output)]
        end_phases = {}
        succeeded = all(p.returncode == 0 for p in processes)
        if launcher.end_phases is not None and succeeded and len(ends) == WORLD_SIZE:
            # Read before the run's directory (and the state in it) goes.
            end_phases = launcher.end_phases(Path(tmp), max(ends), t0 + wall)
    failed = [p.returncode for p in processes if p.returncode != 0]
    starts = {int(m[1]): float(m[3]) for m in MARKER.finditer(output)}
    done = {int(m[1]) for m in DONE.finditer(output)}
    if failed or len(starts) != WORLD_SIZE or len(done) != WORLD_SIZE:
        sys.exit(
            f"error: {launcher.name} run failed (exit codes {[p.returncode for p in processes]}, "
            f"start markers for ranks {sorted(starts)}, finished ranks {sorted(done)}):\n"
            + output[-4000:]
        )
    if len(ends) != WORLD_SIZE:
        sys.exit(f"error: {launcher.name}: the ranks did not report their end:\n{output[-4000:]}")
    return Sample(
        wall=wall,
        start_latency=max(starts.values()) - t0,
        end_latency=t0 + wall - max(ends),
        end_phases=end_phases,
    )


def schema_exit() -> float:
    """Seconds from :data:`JOB_SCHEMA`'s last moment to its exit, seen through its pidfd."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with subprocess.Popen(
        [sys.executable, "-c", JOB_SCHEMA], stdout=subprocess.PIPE, text=True, env=env
    ) as process:
        assert process.stdout is not None
        last_moment = float(process.stdout.readline())
        wait_exactly(process, deadline=time.time() + 60)
        exited = time.time()
    if process.returncode != 0:
        sys.exit(f"error: the job's schema alone failed ({process.returncode})")
    return exited - last_moment


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} ({min(values):.3f}-{max(values):.3f})"


def report(launchers: list[Launcher], runs: int, schema_exits: list[float]) -> None:
    by_name = {launcher.name: launcher for launcher in launchers}
    med = {
        name: (
            statistics.median(s.wall for s in launcher.samples),
            statistics.median(s.start_latency for s in launcher.samples),
        )
        for name, launcher in by_name.items()
    }
    print()
    print(f"2-process DDP (gloo) on digits, median (min-max) of {runs} interleaved runs, seconds")
    header = (
        f"{'launcher':<10} {'wall time':>22} {'start latency':>22} "
        f"{'wall / torchrun':>16} {'wall / bare':>12}"
    )
    print(header)
    print("-" * len(header))
    for name, launcher in by_name.items():
        wall, _ = med[name]
        print(
            f"{name:<10} {summary([s.wall for s in launcher.samples]):>22} "
            f"{summary([s.start_latency for s in launcher.samples]):>22} "
            f"{wall / med['torchrun'][0]:>16.3f} {wall / med['bare'][0]:>12.3f}"
        )
    print()
    print("end latency (last rank's last line of user code -> launcher exited), median (min-max)")
    for name, launcher in by_name.items():
        print(f"  {name:<10} {summary([s.end_latency for s in launcher.samples])}")
        if launcher.end_phases is not None:
            for stretch in KUBEMILL_END:
                values = [s.end_phases[stretch] for s in launcher.samples]
                print(f"    {stretch:<10} {summary(values)}")
    k_wall, k_start = med["kubemill"]
    t_wall, t_start = med["torchrun"]
    b_wall, b_start = med["bare"]
    k_end = statistics.median(s.end_latency for s in by_name["kubemill"].samples)
    b_end = statistics.median(s.end_latency for s in by_name["bare"].samples)
    k_samples = by_name["kubemill"].samples
    k_ranks_exit = statistics.median(s.end_phases["ranks exit"] for s in k_samples)
    print(
        f"  kubemill's own above bare's end: {k_end - b_end:+.3f} s in all; after the ranks'"
        f" exit (verdict + exit) {k_end - k_ranks_exit:+.3f}; the ranks' exit beside bare's"
        f" end {k_ranks_exit - b_end:+.3f}"
    )
    if "before" in by_name:
        before_end = statistics.median(s.end_latency for s in by_name["before"].samples)
        print(
            f"  before -> now (--baseline, same rounds): end latency {before_end:.3f} ->"
            f" {k_end:.3f} s, over bare {before_end - b_end:+.3f} -> {k_end - b_end:+.3f} s"
        )
    floor_exit = statistics.median(schema_exits)
    print(
        f"  the exit of a process holding the job's schema alone: {summary(schema_exits)}"
        f"; kubemill's own above bare's end and that exit: {k_end - b_end - floor_exit:+.3f} s"
    )
    print()
    print(
        f"against the floor (bare processes): start-up {k_start - b_start:+.3f} s, "
        f"wall time {k_wall - b_wall:+.3f} s (ratio {k_wall / b_wall:.3f})"
    )
    print()
    goals = [
        (
            "start-up kubemill adds vs torchrun",
            f"{k_start - t_start:+.3f} s",
            "< 0.3 s",
            k_start - t_start < 0.3,
        ),
        (
            "wall time kubemill / torchrun",
            f"{k_wall / t_wall:.3f}",
            "<= 1.05",
            k_wall / t_wall <= 1.05,
        ),
        (
            "end latency kubemill - bare",
            f"{k_end - b_end:+.4f} s",
            f"<= {END_GOAL_OVER_BARE} s",
            k_end - b_end <= END_GOAL_OVER_BARE,
        ),
        (
            "the same, above the schema's exit",
            f"{k_end - b_end - floor_exit:+.4f} s",
            f"<= {END_GOAL_OVER_BARE} s",
            k_end - b_end - floor_exit <= END_GOAL_OVER_BARE,
        ),
    ]
    header = f"{'goal':<36} {'result':>9}  {'goal':<9} verdict"
    print(header)
    print("-" * len(header))
    for what, result, goal, met in goals:
        print(f"{what:<36} {result:>9}  {goal:<9} {'met' if met else 'missed'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds; each runs every launcher")
    parser.add_argument("--epochs", type=int, default=6, help="passed to the DDP script")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["kubemill", "before", "torchrun", "bare"],
        help="run only these launchers (ratios need torchrun and bare)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        help="also run `kubemill run` with another src tree's package, as `before` (an"
        " earlier commit's: git archive <commit> src | tar -x -C /tmp/base)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    if args.baseline is not None and not (args.baseline / "kubemill").is_dir():
        parser.error(f"--baseline {args.baseline}: no kubemill package there")
    script_args = ["--epochs", str(args.epochs), "--timeout", "120"]
    launchers = [
        Launcher("kubemill", start_kubemill, kubemill_end_phases),
        Launcher("torchrun", start_torchrun),
        Launcher("bare", start_bare),
    ]
    if args.baseline is not None:
        before = functools.partial(start_kubemill, src=args.baseline.resolve())
        launchers.insert(1, Launcher("before", before))
    if args.only:
        launchers = [launcher for launcher in launchers if launcher.name in args.only]
    schema_exits: list[float] = []
    for round_index in range(args.runs):
        schema_exits.append(schema_exit())
        shift = round_index % len(launchers)
        for launcher in launchers[shift:] + launchers[:shift]:
            sample = run_once(launcher, script_args, timeout=args.timeout)
            launcher.samples.append(sample)
            print(
                f"round {round_index + 1}/{args.runs} {launcher.name:<9} "
                f"wall={sample.wall:.3f}s start_latency={sample.start_latency:.3f}s",
                flush=True,
            )
    if {"kubemill", "torchrun", "bare"} <= {launcher.name for launcher in launchers}:
        report(launchers, args.runs, schema_exits)
    else:
        for launcher in launchers:
            print(
                f"{launcher.name:<10} wall {summary([s.wall for s in launcher.samples])} "
                f"start latency {summary([s.start_latency for s in launcher.samples])} "
                f"end latency {summary([s.end_latency for s in launcher.samples])}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
