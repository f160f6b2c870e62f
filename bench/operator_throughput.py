"""Operator throughput: N jobs x R replicas created at once against the kmock test cluster.

    .venv/bin/python bench/operator_throughput.py [--jobs 500] [--replicas 4] [--workers 16]

Starts the kmock cluster of the operator tests (tests/support/kmock_cluster.py) on
127.0.0.1 in this process and the real operator (``python -m
kubemill.substrates.kubernetes.operator``) in a subprocess, creates N TFJobs of 1 chief and
R-1 workers as fast as a small client pool can, and prints:

- jobs/s from the first job created until every pod exists;
- API writes per job against the minimum needed by then (R pods + R services + 1 status
  write for ``Created``), with Events counted apart (one per decision);
- the operator's resident memory at the end.

The cluster emulator shares the 2 cores with the operator, so figures are a lower bound of
what the operator does against a real API server. Nothing is asserted: this is a
measurement, run on demand (never in CI).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from kubemill.kinds import crds  # noqa: E402
from support.kmock_cluster import ClusterThread, write_kubeconfig  # noqa: E402


def tfjob(name: str, replicas: int) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "tensorflow", "image": "example:latest", "command": ["python"]}
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    specs: dict[str, Any] = {"Chief": replica(1)}
    if replicas > 1:
        specs["Worker"] = replica(replicas - 1)
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": specs},
    }


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_healthy(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the operator exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the operator did not become healthy")


def count_pods(cluster: ClusterThread) -> int:
    async def count() -> int:
        return sum(
            1
            for (resource, _, _), obj in list(cluster.cluster.objects.items())
            if resource.plural == "pods" and not obj.deleted
        )

    result: int = cluster.call(count)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--workers", type=int, default=16, help="operator reconcile workers")
    parser.add_argument("--clients", type=int, default=8, help="parallel job submitters")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    namespace = "bench"
    expected_pods = args.jobs * args.replicas

    with ClusterThread() as cluster, tempfile.TemporaryDirectory() as tmp:
        for crd in crds():
            cluster.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        cluster.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", cluster.url)
        health = free_port()
        log = (Path(tmp) / "operator.log").open("wb")
        argv = [
            sys.executable, "-m", "kubemill.substrates.kubernetes.operator",
            "--all-namespaces", "--metrics-port", "0", "--health-port", str(health),
            "--bind-address", "127.0.0.1", "--workers", str(args.workers),
        ]  # fmt: skip
        env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        env.pop("KUBERNETES_SERVICE_HOST", None)
        operator = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(health, operator)
            rss_idle = rss_mib(operator.pid)
            cpu_idle = cpu_seconds(operator.pid)
            first_call = len(cluster.calls())
            path = f"/apis/kubemill.dev/v1/namespaces/{namespace}/tfjobs"
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
                list(
                    pool.map(
                        lambda i: cluster.create(path, tfjob(f"job-{i:04d}", args.replicas)),
                        range(args.jobs),
                    )
                )
            submitted = time.monotonic() - started
            while (pods := count_pods(cluster)) < expected_pods:
                if time.monotonic() - started > args.timeout:
                    raise SystemExit(f"timed out: {pods}/{expected_pods} pods")
                time.sleep(0.05)
            elapsed = time.monotonic() - started
            cpu_busy = cpu_seconds(operator.pid) - cpu_idle
            # Let the Created status writes and events still queued land before counting.
            time.sleep(3.0)
            rss_end = rss_mib(operator.pid)
        finally:
            operator.send_signal(signal.SIGTERM)
            try:
                operator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                operator.kill()
                operator.wait()
            log.close()

        calls = [c for c in cluster.calls()[first_call:] if not c.from_tests]
        writes = Counter(c.resource for c in calls if c.is_write)
        errors = Counter(f"{c.verb} {c.resource} {c.status}" for c in calls if c.status >= 400)
        object_writes = sum(n for resource, n in writes.items() if resource != "events")
        minimum = args.jobs * (2 * args.replicas + 1)

    print(f"jobs x replicas        {args.jobs} x {args.replicas} ({expected_pods} pods)")
    print(f"operator workers       {args.workers}")
    print(f"jobs submitted in      {submitted:.1f} s")
    print(f"all pods exist after   {elapsed:.1f} s")
    print(f"throughput             {args.jobs / elapsed:.1f} jobs/s")
    print(
        f"operator CPU           {cpu_busy:.1f} s until all pods exist "
        f"({args.jobs / cpu_busy:.0f} jobs per operator CPU-second)"
    )
    print(f"writes by resource     {dict(sorted(writes.items()))}")
    print(
        f"object writes per job  {object_writes / args.jobs:.2f} "
        f"(minimum {minimum / args.jobs:.0f}: ratio {object_writes / minimum:.3f})"
    )
    print(f"events per job         {writes['events'] / args.jobs:.2f}")
    print(f"error answers          {dict(errors) or 'none'}")
    print(f"operator RSS           {rss_idle:.0f} MiB idle, {rss_end:.0f} MiB at the end")


if __name__ == "__main__":
    main()
