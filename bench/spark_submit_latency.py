"""Spark's cluster-mode submission: kubemill (no JVM) next to the JVM ``spark-submit``.

    .venv/bin/python bench/spark_submit_latency.py [--runs 5] [--apps 200] [--cli-apps 200]

Serves the kmock cluster of the operator tests (tests/operator/kmock_cluster.py: server-side
apply creates missing objects, as a real API server does) on 127.0.0.1 in this process, and
submits SPEC.md S1's command line (``--master k8s://http://127.0.0.1:PORT --deploy-mode
cluster --name spark-pi --class org.apache.spark.examples.SparkPi --conf
spark.executor.instances=5 --conf spark.kubernetes.container.image=IMG
local:///path/to/examples.jar``) to it three ways, interleaved round by round:

- ``jvm``: pyspark's own ``spark-submit`` (with ``waitAppCompletion=false``, so it returns
  once the objects exist), a subprocess;
- ``kubemill cli``: ``kubemill spark-submit`` with the same arguments, a subprocess;
- ``kubemill sdk``: the same submission in this process (parse, build, send through one
  connection kept open: what a program or service calling kubemill pays).

**Latency** is from just before the submission starts until the fixture receives the
driver pod's ``POST`` (clocks are comparable: ``perf_counter`` is the system's monotonic
clock, and the fixture records arrivals in this process); the wall time to the end, and
for subprocesses their peak RSS and CPU time, are printed too. Median (min-max) over
``--runs`` rounds, and the ratio JVM / kubemill (goal >= 20).

**Throughput**: ``--apps`` submissions in this process one after another, then
``--cli-apps`` through the CLI (two at a time, the machine's cores), as applications a minute
(goal >= 1,000; the spark-operator publishes about 130).

The fixture shares the machine's 2 cores with everything else, so figures are what this
machine gives, not a bound. Nothing is asserted: run on demand, never in CI.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "operator"))

from kmock_cluster import Call, ClusterThread  # noqa: E402

from kubemill.api.spark_submit import cluster_mode_of, parse_submit_arguments  # noqa: E402
from kubemill.substrates.kubernetes.client import spark_submit as client  # noqa: E402
from kubemill.substrates.kubernetes.client.connection import Http, connect_to  # noqa: E402

BIN = Path(sys.executable).parent
SPARK_SUBMIT = BIN / "spark-submit"
KUBEMILL = BIN / "kubemill"
GOAL_RATIO = 20.0
GOAL_PER_MINUTE = 1000.0
S1 = [
    "--deploy-mode",
    "cluster",
    "--name",
    "spark-pi",
    "--class",
    "org.apache.spark.examples.SparkPi",
    "--conf",
    "spark.executor.instances=5",
    "--conf",
    "spark.kubernetes.container.image=IMG",
    "--conf",
    "spark.kubernetes.submission.waitAppCompletion=false",
    "local:///path/to/examples.jar",
]


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


def env_without_kubeconfig(home: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(home), "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    return env


def run_process(argv: list[str], env: dict[str, str], calls: TimedCalls) -> Run:
    """A submission in a subprocess: time to its pod POST, wall, peak RSS, CPU."""
    posted = len(calls.pod_posts)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out, err = proc.communicate()
    if os.waitstatus_to_exitcode(status) != 0 or len(calls.pod_posts) != posted + 1:
        sys.exit(f"{argv[0]} failed:\n{out.decode()}\n{err.decode()[-3000:]}")
    return Run(
        to_pod=calls.pod_posts[posted] - start,
        wall=wall,
        rss_mib=usage.ru_maxrss / 1024,
        cpu=usage.ru_utime + usage.ru_stime,
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
    args = parser.parse_args()
    have_jvm = SPARK_SUBMIT.exists() and shutil.which("java") is not None
    if not have_jvm:
        print("no JVM spark-submit here (pyspark and a JRE): kubemill alone is measured")
    runs = max(args.runs, 5)
    results: dict[str, list[Run]] = {"jvm": [], "kubemill cli": [], "kubemill sdk": []}
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp, ClusterThread() as cluster:
        calls = TimedCalls()
        cluster.cluster.calls = calls
        env = env_without_kubeconfig(Path(tmp))
        os.environ.pop("KUBECONFIG", None)
        os.environ["HOME"] = tmp
        http = Http(connect_to(cluster.url, kubeconfig=None, context=None))
        run_sdk(http, cluster.url, calls)  # warm: imports and the connection, as a service has
        for round_ in range(runs):
            order = ["jvm", "kubemill cli", "kubemill sdk"]
            if round_ % 2:
                order.reverse()
            for who in order:
                if who == "jvm" and have_jvm:
                    argv = [str(SPARK_SUBMIT), *argv_at(cluster.url)]
                    results[who].append(run_process(argv, env, calls))
                elif who == "kubemill cli":
                    argv = [str(KUBEMILL), "spark-submit", *argv_at(cluster.url)]
                    results[who].append(run_process(argv, env, calls))
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
            for who in ("kubemill cli", "kubemill sdk"):
                ratio = jvm / statistics.median(r.to_pod for r in results[who])
                verdict = "met" if ratio >= GOAL_RATIO else "missed"
                print(f"  ratio jvm / {who}: {ratio:7.1f}x (goal >= {GOAL_RATIO:.0f}x: {verdict})")

        start = time.perf_counter()
        for _ in range(args.apps):
            client.submit_mode(http, cluster_mode_of(parse_submit_arguments(argv_at(cluster.url))))
        sdk_rate = per_minute(args.apps, time.perf_counter() - start)

        argv = [str(KUBEMILL), "spark-submit", *argv_at(cluster.url)]

        def one(_: int) -> Any:
            return subprocess.run(argv, env=env, capture_output=True, check=True)

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(one, range(args.cli_apps)))
        cli_rate = per_minute(args.cli_apps, time.perf_counter() - start)
        pods = len(cluster.list("/api/v1/namespaces/default/pods"))

    print(f"Throughput ({pods} driver pods in the fixture at the end):")
    for who, count, rate in (
        ("kubemill sdk", args.apps, sdk_rate),
        ("kubemill cli", args.cli_apps, cli_rate),
    ):
        verdict = "met" if rate >= GOAL_PER_MINUTE else "missed"
        print(
            f"  {who:13} {count} applications: {rate:8.0f} a minute "
            f"(goal >= {GOAL_PER_MINUTE:.0f}: {verdict})"
        )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"  this process (fixture + sdk): peak RSS {usage.ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
