"""``kubemill --substrate kubernetes cluster create/list/stop`` against an emulated cluster.

The cluster is the Kubernetes client tests' kmock cluster over real HTTP; the test plays
the operator (writes the MarsCluster's Ready condition and endpoint, as the core decides
them) and checks what the CLI sends and shows. tests/e2e/test_mars_cluster_cli.py runs the
same commands locally with real Mars.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import lines, pytorch_job, write_manifest
from typer.testing import CliRunner

from kubemill.cli.app import app
from support.kube_client_support import ClientClusterThread, Operator, kmock_cluster

PATH = "/apis/kubemill.dev/v1/namespaces/default/marsclusters/m1"
ENDPOINT = "http://10.2.0.5:31234"


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    with ClientClusterThread() as thread:
        thread.install_crds()
        yield thread


def _cli(tmp_path: Path, cluster: ClientClusterThread) -> list[str]:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    return ["--substrate", "kubernetes", "--kubeconfig", str(kubeconfig)]


def _play_operator(cluster: ClientClusterThread, errors: list[BaseException]) -> None:
    """Once the MarsCluster exists: Created, then Ready with its endpoint."""
    try:
        deadline = time.monotonic() + 30
        while cluster.get_or_none(PATH) is None:
            assert time.monotonic() < deadline, "the CLI never created the MarsCluster"
            time.sleep(0.02)
        operator = Operator(cluster)
        operator.set_conditions(
            "marsclusters", "default", "m1", ("Created", "MarsClusterCreated", "created")
        )
        time.sleep(0.6)  # the CLI sees it not ready yet, and waits
        operator.set_conditions(
            "marsclusters",
            "default",
            "m1",
            ("Created", "MarsClusterCreated", "created"),
            ("Ready", "MarsClusterReady", f"MarsCluster default/m1 is ready at {ENDPOINT}."),
        )
        cluster.patch(
            PATH + "/status",
            {"status": {"endpoint": ENDPOINT, "readyReplicas": {"Supervisor": 1, "Worker": 2}}},
        )
    except BaseException as exc:
        errors.append(exc)


def test_create_waits_for_ready_list_shows_it_and_stop_deletes_it(
    runner: CliRunner, tmp_path: Path, cluster: ClientClusterThread
) -> None:
    cli = _cli(tmp_path, cluster)
    errors: list[BaseException] = []
    player = threading.Thread(target=_play_operator, args=(cluster, errors))
    player.start()
    try:
        created = runner.invoke(
            app,
            [
                *cli,
                "cluster",
                "create",
                "mars",
                "--name",
                "m1",
                "--workers",
                "2",
                "--worker-cpu",
                "0.5",
                "--worker-mem",
                "1g",
                "--min-workers",
                "1",
                "--env",
                "A=b",
                "--timeout",
                "30",
            ],
        )
    finally:
        player.join(timeout=60)
    assert not errors, errors
    assert created.exit_code == 0, created.output
    assert f"MarsCluster m1 is ready at {ENDPOINT}" in created.stdout
    assert "cluster stop m1" in created.stdout

    # What the operator gets: a MarsCluster with the options as its spec (and the kind's
    # defaults for the supervisors' resources).
    sent: dict[str, Any] = cluster.get_or_none(PATH) or {}
    assert sent["spec"] == {
        "supervisorCpu": 1.0,
        "supervisorMem": "4g",
        "workerNum": 2,
        "workerCpu": 0.5,
        "workerMem": "1g",
        "supervisorNum": 1,
        "minWorkerNum": 1,
        "supervisorExtraEnv": {"A": "b"},
        "workerExtraEnv": {"A": "b"},
    }

    listed = runner.invoke(app, [*cli, "cluster", "list"])
    assert listed.exit_code == 0, listed.output
    rows = [line.split() for line in lines(listed.stdout)]
    assert rows[0] == ["NAME", "KIND", "STATE", "WORKERS", "ENDPOINT", "AGE"]
    assert rows[1][:5] == ["m1", "MarsCluster", "Ready", "2/2", ENDPOINT]

    got = runner.invoke(app, [*cli, "get"])
    assert got.exit_code == 0, got.output
    header, row = (line.split() for line in lines(got.stdout)[:2])
    assert header[-1] == "ENDPOINT" and row[-1] == ENDPOINT
    assert row[:3] == ["m1", "MarsCluster", "Ready"]

    stopped = runner.invoke(app, [*cli, "cluster", "stop", "m1"])
    assert stopped.exit_code == 0, stopped.output
    assert cluster.get_or_none(PATH) is None
    assert "No clusters." in runner.invoke(app, [*cli, "cluster", "list"]).stdout


def test_create_without_waiting_and_a_cluster_that_never_gets_ready(
    runner: CliRunner, tmp_path: Path, cluster: ClientClusterThread
) -> None:
    cli = _cli(tmp_path, cluster)
    submitted = runner.invoke(app, [*cli, "cluster", "create", "mars", "--name", "m1", "--no-wait"])
    assert submitted.exit_code == 0, submitted.output
    assert "MarsCluster m1 submitted." in submitted.stdout
    assert cluster.get_or_none(PATH) is not None

    late = runner.invoke(
        app, [*cli, "cluster", "create", "mars", "--name", "m2", "--timeout", "0.5"]
    )
    assert late.exit_code == 1
    assert "MarsCluster m2 is not ready after 0.5 s" in late.stdout


def test_stop_refuses_what_is_not_a_cluster_and_bad_options_are_named(
    runner: CliRunner, tmp_path: Path, cluster: ClientClusterThread
) -> None:
    cli = _cli(tmp_path, cluster)
    unknown = runner.invoke(app, [*cli, "cluster", "create", "spark", "--no-wait"])
    assert unknown.exit_code != 0
    assert "unknown engine 'spark'" in unknown.output
    bad_env = runner.invoke(app, [*cli, "cluster", "create", "mars", "--env", "NOVALUE"])
    assert bad_env.exit_code != 0
    assert "--env: expected KEY=VALUE" in bad_env.output
    bad_size = runner.invoke(
        app, [*cli, "cluster", "create", "mars", "--worker-mem", "lots", "--no-wait"]
    )
    assert bad_size.exit_code != 0
    assert "spec.workerMem" in bad_size.output
    manifest = write_manifest(tmp_path, pytorch_job("ddp", master="pass", worker="pass"))
    assert runner.invoke(app, [*cli, "run", "--detach", str(manifest)]).exit_code == 0
    refused = runner.invoke(app, [*cli, "cluster", "stop", "ddp"])
    assert refused.exit_code != 0
    assert "ddp is a PyTorchJob, not a cluster" in refused.output
    assert cluster.get_or_none("/apis/kubemill.dev/v1/namespaces/default/pytorchjobs/ddp")
