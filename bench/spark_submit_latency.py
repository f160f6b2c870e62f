"""Spark's cluster-mode submission: kubemill (no JVM) next to the JVM ``spark-submit``.

    .venv/bin/python bench/spark_submit_latency.py [--runs 5] [--apps 200] [--cli-apps 200]
        [--full-apps 40]

Serves the kmock cluster of the operator tests (tests/support/kmock_cluster.py: server-side
apply creates missing objects, as a real API server does) on 127.0.0.1 in this process, and
submits the seed's spark-submit command line (``--master k8s://http://127.0.0.1:PORT --deploy-mode
cluster --name spark-pi --class org.apache.spark.examples.SparkPi --conf
spark.executor.instances=5 --conf spark.kubernetes.container.image=IMG
local:///path/to/examples.jar``) to it four ways, interleaved round by round:

- ``jvm``: pyspark's own ``spark-submit`` (with ``waitAppCompletion=false``, so it returns
  once the objects exist), a subprocess;
- ``kubemill cli``: ``kubemill spark-submit`` with the same arguments, a subprocess (the
  console script reaches the command's code, :mod:`kubemill.cli.spark_cluster`, through
  :mod:`kubemill.cli.spark_fast` before typer loads: no typer, rich, pydantic or
  ``kubernetes``);
- ``kubemill full``: the same code through the full typer command (what runs when other
  global options are given), a subprocess;
- ``kubemill sdk``: the same submission in this process (parse, build, send through one
  connection kept open: what a program or service calling kubemill pays).

**Latency** is from just before the submission starts until the fixture receives the
driver pod's ``POST`` (clocks are comparable: ``perf_counter`` is the system's monotonic
clock, and the fixture records arrivals in this process); the wall time to the end, and
for subprocesses their peak RSS and CPU time, are printed too. Median (min-max) over
``--runs`` rounds, and the ratio JVM / kubemill (goal >= 20).

**Throughput**: ``--apps`` submissions in this process one after another, then
``--cli-apps`` through the CLI and ``--full-apps`` through the full command, each two at a
time (the machine's 2 cores), as applications a minute (goal >= 1,000; the spark-operator
publishes about 130). A CLI submission is a whole process (interpreter start, imports, four
requests), so its rate is bounded by CPU: the CPU seconds per application (the
subprocesses', and this process's: the fixture serving them) are printed with it, and
60 / (CPU per application) is what one core sustains.

Subprocesses get their modules' bytecode cached (``PYTHONDONTWRITEBYTECODE`` is dropped from
their environment), as an installed package has it: otherwise each process would compile
kubemill's modules again.

The fixture shares the machine's 2 cores with everything else, so figures are what this
machine gives, not a bound. Nothing is asserted: run on demand, never in CI.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from kubemill.engines.spark.api.argv import parse_submit_arguments  # noqa: E402
from kubemill.engines.spark.api.submit import cluster_mode_of  # noqa: E402
from kubemill.substrates.kubernetes.client import spark_submit as client  # noqa: E402
from kubemill.substrates.kubernetes.client.connection import Http, connect_to  # noqa: E402
from support.kmock_cluster import Call, ClusterThread  # noqa: E402

BIN = Path(sys.executable).parent
SPARK_SUBMIT = BIN / "spark-submit"
KUBEMILL = BIN / "kubemill"
GOAL_RATIO = 20.0
GOAL_PER_MINUTE = 1000.0
SEED_S1 = Path(__file__).resolve().parents[1] / "examples" / "seed" / "spark-submit-s1.txt"
_SEED_S1 = shlex.split(SEED_S1.read_text(encoding="utf-8"), comments=True)[1:][2:]
S1 = [*_SEED_S1[:-1], "--conf", "spark.kubernetes.submission.waitAppCompletion=false", _SEED_S1[-1]]
"""The seed's spark-submit command line after ``--master``, not waiting for the application (as
the note's measurement of the JVM path did)."""


class TimedCalls(list[Call]):
    """The fixture's request log, with the arrival time of each driver-pod POST."""

    def __init__(self) -> None:
        super().__init__()
        self.pod_posts: list[float] = []

    def append(self, call: Call) -> None:
        if call.method == "POST" and call.plural == "pods":
            self.pod_posts.append(time.perf_counter())
        super().append(call)


@dataclass
class Run:
    to_pod: float
    wall: float
    rss_mib: float = float("nan")
    cpu: float = float("nan")


def argv_at(url: str) -> list[str]:
    return ["--master", f"k8s://{url}", *S1]


FULL_COMMAND = (
    "import sys; from kubemill.cli.app import run_app; "
    "sys.argv[0] = 'kubemill'; run_app(exit_at_once=True)"
)
"""The typer command itself, without the console script's fast paths."""


def env_without_kubeconfig(home: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(home), "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cli_argv(who: str, url: str) -> list[str]:
    """The subprocess that submits S1 to ``url``: the console script, or the full command."""
    if who == "kubemill full":
        return [sys.executable, "-c", FULL_COMMAND, "spark-submit", *argv_at(url)]
    return [str(KUBEMILL), "spark-submit", *argv_at(url)]


@dataclass
class Rate:
    """Applications a minute, and the CPU each took."""

    count: int
    per_minute: float
    cpu_children: float
    """CPU seconds per application of the submitting subprocesses (0 in process)."""
    cpu_self: float
    """CPU seconds per application of this process (the fixture; the submissions too in
    process)."""


def cpu_now() -> tuple[float, float]:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    return children.ru_utime + children.ru_stime, own.ru_utime + own.ru_stime


def measured(count: int, work: Callable[[], None]) -> Rate:
    """Run ``work()`` and measure its rate and CPU for ``count`` applications."""
    children, own = cpu_now()
    start = time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    children_after, own_after = cpu_now()
    return Rate(
        count,
        per_minute(count, elapsed),
        (children_after - children) / count,
        (own_after - own) / count,
    )


def two_at_a_time(argv: list[str], env: dict[str, str], count: int) -> None:
    def one(_: int) -> Any:
        return subprocess.run(argv, env=env, capture_output=True, check=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(one, range(count)))


LAUNCHER = """
import json, os, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    start = time.perf_counter()
    proc = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
print(json.dumps({
    "start": start, "wall": wall, "code": os.waitstatus_to_exitcode(status),
    "rss": usage.ru_maxrss, "cpu": usage.ru_utime + usage.ru_stime,
}))
"""
"""Starts a submission and reports its start, wall, exit code, peak RSS and CPU. A process
forked from this one would report this process's peak RSS as its own (Linux keeps a
process's peak across fork and exec), so a small launcher forks it instead; its start is
on the same monotonic clock as the fixture's arrivals."""


def run_process(argv: list[str], env: dict[str, str], calls: TimedCalls, log: Path) -> Run:
    """A submission in a subprocess: time to its pod POST, wall, peak RSS, CPU."""
    posted = len(calls.pod_posts)
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(log), *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"the launcher failed:\n{done.stderr}")
    found = json.loads(done.stdout)
    if found["code"] != 0 or len(calls.pod_posts) != posted + 1:
        sys.exit(f"{argv[0]} failed:\n{log.read_text(errors='replace')[-3000:]}")
    return Run(
        to_pod=calls.pod_posts[posted] - found["start"],
        wall=found["wall"],
        rss_mib=found["rss"] / 1024,
        cpu=found["cpu"],
    )


def run_sdk(http: Http, url: str, calls: TimedCalls) -> Run:
    """The same submission in this process, through a connection kept open."""
    posted = len(calls.pod_posts)
    start = time.perf_counter()
    mode = cluster_mode_of(parse_submit_arguments(argv_at(url)))
    client.submit_mode(http, mode)
    wall = time.perf_counter() - start
    return Run(to_pod=calls.pod_posts[posted] - start, wall=wall)


def summary(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    med = statistics.median(values) * scale
    return f"{med:8.3f} {unit} ({min(values) * scale:.3f}-{max(values) * scale:.3f})"


def per_minute(count: int, seconds: float) -> float:
    return count / seconds * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="latency rounds (at least 5)")
    parser.add_argument("--apps", type=int, default=200, help="in-process submissions")
    parser.add_argument("--cli-apps", type=int, default=200, help="CLI submissions")
    parser.add_argument(
        "--full-apps", type=int, default=40, help="submissions through the full command"
    )
    args = parser.parse_args()
    have_jvm = SPARK_SUBMIT.exists() and shutil.which("java") is not None
    if not have_jvm:
        print("no JVM spark-submit here (pyspark and a JRE): kubemill alone is measured")
    runs = max(args.runs, 5)
    results: dict[str, list[Run]] = {
        "jvm": [],
        "kubemill cli": [],
        "kubemill full": [],
        "kubemill sdk": [],
    }
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp, ClusterThread() as cluster:
        calls = TimedCalls()
        cluster.cluster.calls = calls
        env = env_without_kubeconfig(Path(tmp))
        log = Path(tmp) / "submission.log"
        os.environ.pop("KUBECONFIG", None)
        os.environ["HOME"] = tmp
        http = Http(connect_to(cluster.url, kubeconfig=None, context=None))
        run_sdk(http, cluster.url, calls)  # warm: imports and the connection, as a service has
        for who in ("kubemill cli", "kubemill full"):  # bytecode cached, as when installed
            run_process(cli_argv(who, cluster.url), env, calls, log)
        for round_ in range(runs):
            order = ["jvm", "kubemill cli", "kubemill full", "kubemill sdk"]
            if round_ % 2:
                order.reverse()
            for who in order:
                if who == "jvm" and have_jvm:
                    argv = [str(SPARK_SUBMIT), *argv_at(cluster.url)]
                    results[who].append(run_process(argv, env, calls, log))
                elif who in ("kubemill cli", "kubemill full"):
                    results[who].append(run_process(cli_argv(who, cluster.url), env, calls, log))
                elif who == "kubemill sdk":
                    results[who].append(run_sdk(http, cluster.url, calls))

        print(f"Submit to driver pod created (the pod POST), {runs} rounds, median (min-max):")
        for who, found in results.items():
            if not found:
                continue
            line = f"  {who:13} to pod {summary([r.to_pod for r in found])}"
            line += f"   wall {summary([r.wall for r in found])}"
            if who != "kubemill sdk":
                line += f"   RSS {statistics.median(r.rss_mib for r in found):5.0f} MiB"
                line += f"   CPU {statistics.median(r.cpu for r in found):5.2f} s"
            print(line)
        if results["jvm"]:
            jvm = statistics.median(r.to_pod for r in results["jvm"])
            for who in ("kubemill cli", "kubemill full", "kubemill sdk"):
                ratio = jvm / statistics.median(r.to_pod for r in results[who])
                verdict = "met" if ratio >= GOAL_RATIO else "missed"
                print(f"  ratio jvm / {who}: {ratio:7.1f}x (goal >= {GOAL_RATIO:.0f}x: {verdict})")

        def in_process() -> None:
            for _ in range(args.apps):
                mode = cluster_mode_of(parse_submit_arguments(argv_at(cluster.url)))
                client.submit_mode(http, mode)

        rates = {"kubemill sdk": measured(args.apps, in_process)}
        for who, count in (("kubemill cli", args.cli_apps), ("kubemill full", args.full_apps)):
            if count > 0:
                argv = cli_argv(who, cluster.url)
                rates[who] = measured(count, functools.partial(two_at_a_time, argv, env, count))
        pods = len(cluster.list("/api/v1/namespaces/default/pods"))

    print(f"Throughput ({pods} driver pods in the fixture at the end; CLI: 2 at a time):")
    for who, rate in rates.items():
        verdict = "met" if rate.per_minute >= GOAL_PER_MINUTE else "missed"
        cpu = rate.cpu_children + rate.cpu_self
        print(
            f"  {who:13} {rate.count:4} applications: {rate.per_minute:7.0f} a minute "
            f"(goal >= {GOAL_PER_MINUTE:.0f}: {verdict})   CPU per application "
            f"{rate.cpu_children * 1000:5.0f} ms submitting + {rate.cpu_self * 1000:4.0f} ms "
            f"here = {60 / cpu:6.0f} a minute per core"
        )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"  this process (fixture + sdk): peak RSS {usage.ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
