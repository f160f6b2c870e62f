"""``kubemill --substrate kubernetes ...`` against an emulated cluster over real HTTP.

The cluster is the Kubernetes client tests' kmock cluster (``tests/kube_client``); the
test plays the operator and the kubelet (creates the pods the operator would, writes
their statuses, logs and the job's conditions) and checks what the CLI shows.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import lines, pytorch_job, write_manifest
from typer.testing import CliRunner

from kubemill.cli.app import app

# tests/kube_client and tests/operator are no packages: import from their directories.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kube_client"))

from kube_client_support import (
    ClientClusterThread,
    Operator,
    kmock_cluster,
    running,
)


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    with ClientClusterThread() as thread:
        thread.install_crds()
        yield thread


def _kubeconfig(tmp_path: Path, cluster: ClientClusterThread) -> Path:
    path: Path = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    return path


def test_run_detach_get_logs_describe_delete(
    runner: CliRunner, tmp_path: Path, cluster: ClientClusterThread
) -> None:
    kubeconfig = _kubeconfig(tmp_path, cluster)
    manifest = write_manifest(
        tmp_path, pytorch_job("ddp", master="print('m')", worker="print('w')")
    )
    cli = ["--substrate", "kubernetes", "--kubeconfig", str(kubeconfig)]

    submitted = runner.invoke(app, [*cli, "run", "--detach", str(manifest)])
    assert submitted.exit_code == 0, submitted.output
    assert "PyTorchJob ddp submitted" in submitted.stdout
    # The next commands name the substrate and kubeconfig, so they reach the same cluster.
    assert f"kubemill --substrate kubernetes --kubeconfig {kubeconfig} logs ddp -f" in (
        submitted.stdout
    )

    operator = Operator(cluster)
    pods = operator.create_pods("pytorchjobs", "default", "ddp")
    assert [p["metadata"]["name"] for p in pods] == ["ddp-master-0", "ddp-worker-0"]
    operator.pod_status("default", "ddp-master-0", running("pytorch", ip="10.1.0.7"))
    operator.pod_status("default", "ddp-worker-0", running("pytorch", ip="10.1.0.8", restarts=2))
    operator.set_conditions(
        "pytorchjobs",
        "default",
        "ddp",
        ("Created", "PyTorchJobCreated", "PyTorchJob default/ddp is created."),
        ("Running", "PyTorchJobRunning", "PyTorchJob default/ddp is running."),
    )

    listed = runner.invoke(app, [*cli, "get"])
    assert listed.exit_code == 0, listed.output
    rows = [line.split() for line in lines(listed.stdout)]
    assert rows[0] == ["NAME", "KIND", "STATE", "REPLICAS", "RESTARTS", "AGE"]
    assert rows[1][:5] == ["ddp", "PyTorchJob", "Running", "2/2", "2"]

    book = operator.start_log("default", "ddp-master-0", "pytorch")
    book.write("epoch 1 loss=0.5", "epoch 2 loss=0.3")
    book.end()
    logged = runner.invoke(app, [*cli, "logs", "ddp", "--replica", "master-0"])
    assert logged.exit_code == 0, logged.output
    assert logged.stdout.splitlines() == ["epoch 1 loss=0.5", "epoch 2 loss=0.3"]

    described = runner.invoke(app, [*cli, "describe", "ddp"])
    assert described.exit_code == 0, described.output
    assert "PyTorchJobRunning" in described.stdout
    replica_rows = {
        line.split()[0]: line.split()
        for line in described.stdout.splitlines()
        if line.strip().startswith("ddp-")
    }
    assert replica_rows["ddp-master-0"][1] == "Running"
    assert "10.1.0.7" in " ".join(replica_rows["ddp-master-0"])
    assert replica_rows["ddp-worker-0"][2] == "2"

    deleted = runner.invoke(app, [*cli, "delete", "ddp"])
    assert deleted.exit_code == 0, deleted.output
    gone = runner.invoke(app, [*cli, "get", "ddp"])
    assert gone.exit_code == 1
    assert len(gone.stderr.splitlines()) == 1
    assert "ddp" in gone.stderr


def test_missing_crds_say_to_install(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ClientClusterThread() as bare:
        monkeypatch.setenv("KUBEMILL_SUBSTRATE", "kubernetes")
        result = runner.invoke(app, ["--kubeconfig", str(_kubeconfig(tmp_path, bare)), "get"])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1
    assert "kubemill install" in result.stderr
