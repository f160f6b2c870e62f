"""What does a local Ray cluster through kubemill cost, next to ``ray start`` by hand?

**Start-up to ready** (a head with no CPUs and 2 workers of 1 CPU): kubemill's
``RayCluster`` (the manifest ``kubemill cluster create ray --workers 2`` makes, submitted
through the SDK detached, as the command does, until the core judges it Ready), against the
same cluster by hand: ``ray start --head`` until it returns, then both ``ray start
--address`` at once until they return (each in a session of its own, on 127.0.0.1, its own
temp dir, no usage stats), which is when Ray says the nodes are up. Rounds alternate which
goes first; both clusters are stopped between rounds (by hand: the process groups killed,
never ``ray stop``, which would stop every Ray on the machine). Goal: <= 1.2.

Run on demand, never from the test suite (Ray from the ``ray`` extra)::

    python bench/ray_cluster.py --runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

GOAL = 1.2
SRC = Path(__file__).resolve().parent.parent / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from kubemill.api import ClusterOptions  # noqa: E402
from kubemill.deploy.serving import wait_serving  # noqa: E402
from kubemill.kinds import load_one, service_engines  # noqa: E402
from kubemill.sdk import JobClient  # noqa: E402

RAY = Path(sys.executable).absolute().parent / "ray"
QUIET = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def by_hand() -> tuple[float, Callable[[], None]]:
    """Seconds until ``ray start`` has returned for the head and both workers."""
    temp = tempfile.mkdtemp(prefix="kmrb-", dir="/tmp")
    common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats", "--num-cpus"]
    gcs = free_port()
    groups: list[int] = []

    def start(argv: list[str], name: str) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [str(RAY), "start", *argv, f"--temp-dir={temp}/{name}"],
            env={**QUIET, "TMPDIR": temp},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        groups.append(child.pid)
        return child

    began = time.perf_counter()
    head = start(["--head", f"--port={gcs}", "--dashboard-host=127.0.0.1", *common, "0"], "head")
    if head.wait() != 0:
        raise SystemExit("bench: ray start --head failed")
    workers = [start([f"--address=127.0.0.1:{gcs}", *common, "1"], f"w{i}") for i in range(2)]
    if any(worker.wait() != 0 for worker in workers):
        raise SystemExit("bench: a worker's ray start failed")
    elapsed = time.perf_counter() - began

    def stop() -> None:
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        time.sleep(1)
        shutil.rmtree(temp, ignore_errors=True)

    return elapsed, stop


def through_kubemill(client: JobClient, round_: int) -> tuple[float, Callable[[], None]]:
    """Seconds from submitting ``kubemill cluster create ray --workers 2``'s manifest until
    the core judges it Ready."""
    service = service_engines()["ray"].cluster
    assert service is not None
    job = load_one(service.manifest(f"bench-{round_}", ClusterOptions(workers=2)))
    began = time.perf_counter()
    view = client.submit(job, detach=True, base_dir=str(Path.cwd()))
    wait_serving(client, view.name, view.namespace, timeout=600)
    elapsed = time.perf_counter() - began

    def stop() -> None:
        client.delete(view.name, view.namespace)

    return elapsed, stop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    ours: list[float] = []
    theirs: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kmrb-state-") as state:
        client = JobClient(state_dir=state)
        for round_ in range(args.runs):
            order = ("kubemill", "hand") if round_ % 2 == 0 else ("hand", "kubemill")
            for who in order:
                if who == "kubemill":
                    took, stop = through_kubemill(client, round_)
                    ours.append(took)
                else:
                    took, stop = by_hand()
                    theirs.append(took)
                stop()
                print(f"round {round_ + 1} {who:<8} {took:7.2f} s", flush=True)
    a, b = statistics.median(ours), statistics.median(theirs)
    ratio = a / b
    print(
        f"{'start to Ready':<16} kubemill {a:7.2f} s ({min(ours):.2f}-{max(ours):.2f})  "
        f"ray start by hand {b:7.2f} s ({min(theirs):.2f}-{max(theirs):.2f})  "
        f"ratio {ratio:.2f} (goal <= {GOAL})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
