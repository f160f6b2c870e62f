"""What does a local Ray cluster through kubemill cost, next to ``ray start`` by hand?

**Start-up to ready** (a head with no CPUs and 2 workers of 1 CPU): kubemill's
``RayCluster`` (the manifest ``kubemill cluster create ray --workers 2`` makes, submitted
through the SDK detached, as the command does, until the core judges it Ready), against the
same cluster by hand: ``ray start --head`` until it returns, then both ``ray start
--address`` at once until they return (each in a session of its own, on 127.0.0.1, its own
temp dir, no usage stats, and the same token authentication kubemill gives every local
cluster: ``RAY_AUTH_MODE=token`` with a token file), which is when Ray says the nodes are up.
Rounds alternate which
goes first; both clusters are stopped between rounds (by hand: the process groups killed,
never ``ray stop``, which would stop every Ray on the machine). Goal: <= 1.2.

**A RayJob end to end** (``--rayjob-runs``): examples/ray/rayjob-sum.yaml submitted through
the SDK detached until the core judges it Succeeded (its cluster up, the submitter's ``ray
job submit --no-wait`` and ``ray job logs --follow``, Ray's job API read by the supervisor,
the cluster stopped), against the same by hand: the same cluster with ``ray start`` as
above, then ``ray job submit`` of the same entrypoint to its dashboard, waiting for the
job's end, then the cluster stopped. No goal yet: the ratio is what a RayJob adds.

Run on demand, never from the test suite (Ray from the ``ray`` extra)::

    python bench/ray_cluster.py --runs 3 --rayjob-runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
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

import yaml  # noqa: E402

from kubemill.api import ClusterOptions, ConditionType  # noqa: E402
from kubemill.deploy.serving import wait_serving  # noqa: E402
from kubemill.engines.ray.api.rayjob import RayJob  # noqa: E402
from kubemill.engines.ray.framework.rayjob import entrypoint_words  # noqa: E402
from kubemill.engines.ray.local import AUTH_MODE_VAR, TOKEN_PATH_VAR, TOKEN_VAR  # noqa: E402
from kubemill.kinds import load_one, service_engines  # noqa: E402
from kubemill.sdk import JobClient  # noqa: E402

RAY = Path(sys.executable).absolute().parent / "ray"
QUIET = {
    **os.environ,
    "RAY_USAGE_STATS_ENABLED": "0",
    # As with the environment activated: a Ray job's ``python`` is the one with Ray (the
    # local substrate puts the image's environment first on PATH the same way).
    "PATH": os.pathsep.join([str(RAY.parent), os.environ.get("PATH", os.defpath)]),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def with_token(temp: str) -> dict[str, str]:
    """The environment of every Ray process of a cluster by hand: token authentication as
    kubemill sets it up (a random token in a file only its owner reads), so that both sides
    of the comparison pay for it."""
    token = Path(temp) / "token"
    token.write_text(secrets.token_hex(32), encoding="utf-8")
    token.chmod(0o600)
    return {**QUIET, AUTH_MODE_VAR: "token", TOKEN_PATH_VAR: str(token), TOKEN_VAR: ""}


def by_hand(dashboard: int | None = None) -> tuple[float, Callable[[], None], dict[str, str]]:
    """Seconds until ``ray start`` has returned for the head and both workers (the head's
    dashboard on ``dashboard`` when given, else Ray's default port), what stops them, and
    the environment a client of that cluster needs."""
    temp = tempfile.mkdtemp(prefix="kmrb-", dir="/tmp")
    env = with_token(temp)
    common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats", "--num-cpus"]
    gcs = free_port()
    groups: list[int] = []

    def start(argv: list[str], name: str) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [str(RAY), "start", *argv, f"--temp-dir={temp}/{name}"],
            env={**env, "TMPDIR": temp},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        groups.append(child.pid)
        return child

    began = time.perf_counter()
    ports = [f"--port={gcs}", *([f"--dashboard-port={dashboard}"] if dashboard else [])]
    head = start(["--head", *ports, "--dashboard-host=127.0.0.1", *common, "0"], "head")
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

    return elapsed, stop, env


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


# --- a RayJob end to end ---------------------------------------------------------------------

RAYJOB = Path(__file__).resolve().parent.parent / "examples" / "ray" / "rayjob-sum.yaml"


def rayjob_through_kubemill(client: JobClient, round_: int) -> float:
    """Seconds from submitting examples/ray/rayjob-sum.yaml (its cluster, the submitter, the
    Ray job) until the core judges it Succeeded and its processes have stopped."""
    manifest = yaml.safe_load(RAYJOB.read_text(encoding="utf-8"))
    manifest["metadata"]["name"] = f"bench-job-{round_}"
    job = load_one(manifest)
    began = time.perf_counter()
    view = client.submit(job, detach=True, base_dir=str(Path.cwd()))
    done = client.wait(view.name, view.namespace, timeout=900)
    elapsed = time.perf_counter() - began
    if not done.status.is_true(ConditionType.SUCCEEDED):
        raise SystemExit(f"bench: the RayJob did not succeed: {done.status.to_wire()}")
    client.delete(view.name, view.namespace)
    return elapsed


def rayjob_by_hand() -> float:
    """Seconds for the same by hand: the same cluster started with ``ray start`` (as
    :func:`by_hand`), then ``ray job submit`` of the same entrypoint to its dashboard,
    waiting for the job's end (it follows the logs), then the cluster stopped."""
    dashboard = free_port()
    entrypoint = load_one(yaml.safe_load(RAYJOB.read_text(encoding="utf-8")))
    assert isinstance(entrypoint, RayJob)
    began = time.perf_counter()
    _, stop, env = by_hand(dashboard=dashboard)
    try:
        submitted = subprocess.run(
            [
                str(RAY),
                "job",
                "submit",
                "--address",
                f"http://127.0.0.1:{dashboard}",
                "--",
                *entrypoint_words(entrypoint.spec.entrypoint),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - began
    finally:
        stop()
    if "succeeded" not in submitted.stdout:
        raise SystemExit(f"bench: ray job submit did not succeed:\n{submitted.stdout[-2000:]}")
    return elapsed


def rayjob_rounds(client: JobClient, runs: int) -> tuple[list[float], list[float]]:
    ours: list[float] = []
    theirs: list[float] = []
    for round_ in range(runs):
        order = ("kubemill", "hand") if round_ % 2 == 0 else ("hand", "kubemill")
        for who in order:
            if who == "kubemill":
                took = rayjob_through_kubemill(client, round_)
                ours.append(took)
            else:
                took = rayjob_by_hand()
                theirs.append(took)
            print(f"rayjob round {round_ + 1} {who:<8} {took:7.2f} s", flush=True)
    return ours, theirs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rayjob-runs", type=int, default=0, help="RayJob rounds (0: none)")
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
                    took, stop, _ = by_hand()
                    theirs.append(took)
                stop()
                print(f"round {round_ + 1} {who:<8} {took:7.2f} s", flush=True)
        job_ours, job_theirs = rayjob_rounds(client, args.rayjob_runs)
    if ours:
        a, b = statistics.median(ours), statistics.median(theirs)
        print(
            f"{'start to Ready':<16} kubemill {a:7.2f} s ({min(ours):.2f}-{max(ours):.2f})  "
            f"ray start by hand {b:7.2f} s ({min(theirs):.2f}-{max(theirs):.2f})  "
            f"ratio {a / b:.2f} (goal <= {GOAL})"
        )
    if job_ours:
        a, b = statistics.median(job_ours), statistics.median(job_theirs)
        print(
            f"{'RayJob end to end':<16} kubemill {a:7.2f} s "
            f"({min(job_ours):.2f}-{max(job_ours):.2f})  "
            f"ray job submit by hand {b:7.2f} s ({min(job_theirs):.2f}-{max(job_theirs):.2f})  "
            f"ratio {a / b:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
