"""Mars clusters made by the CLI on this machine, with real Mars: ``kubemill cluster create
mars`` and ``kubemill run examples/mars-cluster.yaml`` return once the cluster is Ready and
print its endpoint; the seed's computation runs against it in the Mars environment; ``cluster
stop`` and ``interrupt`` leave no process.

The replicas run the in-pod entrypoint (``python -m kubemill.engines.mars.pod.entrypoint``)
in the Mars environment; ``--env PYTHONPATH=...`` makes them import this tree's kubemill rather
than the checkout the environment was created from (the replicas' own PYTHONPATH is not inherited).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import kubemill
from kubemill.engines.mars.pod.entrypoint import LINK_DIR, LINK_PREFIX
from kubemill.substrates.local import environments
from support.e2e_support import EXAMPLES, Cli, processes_with_token
from support.engines import needs_mars_environment

MARS = environments.status("mars")
pytestmark = [pytest.mark.e2e, *needs_mars_environment()]
SOURCE = Path(kubemill.__file__).resolve().parents[1]
START_TIMEOUT = 400.0
ENDPOINT = re.compile(r"is ready at (http://127\.0\.0\.1:\d+)")

SEED = """
import json, os, sys
import mars
import mars.remote as mr
import mars.tensor as mt

session = mars.new_session(sys.argv[1], default=True)
a = mt.random.rand(10, 10)
result = a.dot(a.T).execute().fetch()
data = a.execute().fetch()
pids = mr.ExecutableTuple([mr.spawn(lambda: os.getpid()) for _ in range(8)])
print(json.dumps({
    "data": data.tolist(),
    "result": result.tolist(),
    "task_pids": sorted(set(pids.execute().fetch())),
}), flush=True)
"""


def wait_no_process(token: str, limit: float = 30.0) -> dict[int, str]:
    """The processes carrying ``token`` once there are none or ``limit`` s have passed."""
    give_up = time.monotonic() + limit
    while (left := processes_with_token(token)) and time.monotonic() < give_up:
        time.sleep(0.2)
    return left


def our_links(state_dir: Path) -> list[Path]:
    """The entrypoint's short TMPDIR links that point into this test's state."""
    return [
        link
        for link in Path(LINK_DIR).glob(LINK_PREFIX + "*")
        if link.is_symlink() and str(link.readlink()).startswith(str(state_dir))
    ]


def test_cluster_create_serves_the_seed_program_and_stop_leaves_nothing(cli: Cli) -> None:
    created = cli(
        "cluster",
        "create",
        "mars",
        "--workers",
        "2",
        "--worker-mem",
        "1g",
        "--supervisor-mem",
        "1g",
        "--name",
        "seed",
        "--env",
        f"PYTHONPATH={SOURCE}",
        timeout=START_TIMEOUT,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    found = ENDPOINT.search(created.stdout)
    assert found, created.stdout
    endpoint = found.group(1)
    assert "cluster stop seed" in created.stdout

    listed = cli("cluster", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("seed "))
    assert row == ["seed", "MarsCluster", "Ready", "2/2", endpoint, row[-1]]

    # `get` (the quick table) and `get seed` (the full read) show it Ready at its endpoint.
    table = cli("get")
    assert table.returncode == 0, table.stderr
    header, line = table.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "KIND", "STATE", "REPLICAS", "RESTARTS", "AGE", "ENDPOINT"]
    assert line.split()[:4] == ["seed", "MarsCluster", "Ready", "3/3"]
    assert line.split()[-1] == endpoint
    single = cli("get", "seed")
    assert single.stdout.splitlines()[0] == header

    replicas = processes_with_token(cli.token)
    assert any("kubemill.engines.mars.pod.entrypoint worker" in cmd for cmd in replicas.values())
    done = subprocess.run(
        [str(MARS.python), "-c", SEED, endpoint],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    data = np.array(report["data"])
    assert data.shape == (10, 10)
    assert np.allclose(np.array(report["result"]), data @ data.T)
    # The tasks ran in the cluster's processes (the workers' sub-pools), not the client.
    assert report["task_pids"]
    assert set(report["task_pids"]) <= set(processes_with_token(cli.token)), report

    stopped = cli("cluster", "stop", "seed", timeout=120)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not wait_no_process(cli.token, limit=0), "cluster stop left processes"
    assert cli.job_names() == []
    assert not our_links(cli.state_dir)


def test_run_returns_once_ready_and_interrupt_leaves_no_process(cli: Cli) -> None:
    manifest = EXAMPLES / "mars-cluster.yaml"
    text = manifest.read_text()
    # This tree's entrypoint in the replicas (see the module's docs), smaller workers.
    text = text.replace("workerMem: 2g", "workerMem: 1g").replace(
        "supervisorMem: 2g", "supervisorMem: 1g"
    )
    text += f"  supervisorExtraEnv: {{PYTHONPATH: {SOURCE}}}\n"
    text += f"  workerExtraEnv: {{PYTHONPATH: {SOURCE}}}\n"
    local = cli.cwd / "mars-cluster.yaml"
    local.write_text(text)

    ran = cli("run", str(local), timeout=START_TIMEOUT)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found = ENDPOINT.search(ran.stdout)
    assert found, ran.stdout
    assert "keeps serving in the background" in ran.stdout
    # `run` has returned; the cluster serves on, its processes under a detached supervisor.
    assert processes_with_token(cli.token)
    got = json.loads(cli("get", "mars-demo", "-o", "json").stdout)
    assert got["status"]["endpoint"] == found.group(1)
    assert got["status"]["readyReplicas"] == {"Supervisor": 1, "Worker": 2}

    interrupted = cli("interrupt", "mars-demo", timeout=120)
    assert interrupted.returncode == 0, interrupted.stdout + interrupted.stderr
    assert not wait_no_process(cli.token), "interrupt left processes"
    after = json.loads(cli("get", "mars-demo", "-o", "json").stdout)
    failed = [c for c in after["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "Interrupted"
    assert after["status"].get("endpoint") is None


def test_a_cluster_whose_replicas_keep_failing_is_reported_not_waited_on(cli: Cli) -> None:
    # A bad value the entrypoint refuses at every start (exit 2), restarted as a pod is.
    created = cli(
        "cluster", "create", "mars", "--name", "bad", "--env", "MARS_CPU_TOTAL=lots",
        "--timeout", str(START_TIMEOUT), timeout=START_TIMEOUT,
    )  # fmt: skip
    assert created.returncode == 1, created.stdout + created.stderr
    assert "replica bad-supervisor-0 keeps failing" in created.stdout
    assert "kubemill logs bad --replica bad-supervisor-0" in created.stdout
    logs = cli("logs", "bad", "--replica", "supervisor-0")
    assert "MARS_CPU_TOTAL: expected a number, got 'lots'" in logs.stdout + logs.stderr
    stopped = cli("cluster", "stop", "bad", timeout=120)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not wait_no_process(cli.token)
