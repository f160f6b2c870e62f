"""``kubemill --substrate kubernetes ...`` against an emulated cluster over real HTTP.

The cluster is the Kubernetes client tests' kmock cluster
(``tests/support/kube_client_support.py``); the test plays the operator and the kubelet
(creates the pods the operator would, writes their statuses, logs and the job's
conditions) and checks what the CLI shows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import lines, pytorch_job, write_manifest
from typer.testing import CliRunner

from kubemill.cli.app import app
from support.kube_client_support import (
    ClientClusterThread,
    Operator,
    kmock_cluster,
    running,
    terminated,
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


def _play_operator_and_kubelet(cluster: ClientClusterThread, *, worker_exit: int) -> None:
    """Once the job exists: pods Running with logs, then the worker ends and the job with it."""
    job_path = "/apis/kubemill.dev/v1/namespaces/default/pytorchjobs/fg"
    deadline = time.monotonic() + 30
    while cluster.get_or_none(job_path) is None:
        assert time.monotonic() < deadline, "the CLI never created the job"
        time.sleep(0.02)
    operator = Operator(cluster)
    operator.create_pods("pytorchjobs", "default", "fg")
    operator.set_conditions(
        "pytorchjobs", "default", "fg", ("Created", "PyTorchJobCreated", "created")
    )
    books = {}
    for pod, ip in (("fg-master-0", "10.1.0.7"), ("fg-worker-0", "10.1.0.8")):
        books[pod] = operator.start_log("default", pod, "pytorch")
        operator.pod_status("default", pod, running("pytorch", ip=ip))
    operator.set_conditions(
        "pytorchjobs",
        "default",
        "fg",
        ("Created", "PyTorchJobCreated", "created"),
        ("Running", "PyTorchJobRunning", "running"),
    )
    books["fg-master-0"].write("master says hi")
    books["fg-worker-0"].write("worker says hi")
    for book in books.values():
        book.end()
    operator.pod_status(
        "default", "fg-worker-0", terminated("pytorch", exit_code=worker_exit, ip="10.1.0.8")
    )
    operator.pod_status("default", "fg-master-0", terminated("pytorch", exit_code=0, ip="10.1.0.7"))
    final = (
        ("Succeeded", "PyTorchJobSucceeded", "PyTorchJob default/fg successfully completed.")
        if worker_exit == 0
        else ("Failed", "PyTorchJobFailed", "worker-0 exited with code 3")
    )
    operator.set_conditions(
        "pytorchjobs", "default", "fg", ("Created", "PyTorchJobCreated", "created"), final
    )


@pytest.mark.parametrize(
    ("worker_exit", "code", "outcome"),
    [
        pytest.param(0, 0, "PyTorchJob fg Succeeded", id="succeeded"),
        pytest.param(3, 1, "PyTorchJob fg Failed (PyTorchJobFailed): worker-0 exited", id="failed"),
    ],
)
def test_foreground_run_follows_the_cluster(
    runner: CliRunner,
    tmp_path: Path,
    cluster: ClientClusterThread,
    worker_exit: int,
    code: int,
    outcome: str,
) -> None:
    kubeconfig = _kubeconfig(tmp_path, cluster)
    manifest = write_manifest(tmp_path, pytorch_job("fg", master="print('m')", worker="print('w')"))
    errors: list[BaseException] = []

    def play() -> None:
        try:
            _play_operator_and_kubelet(cluster, worker_exit=worker_exit)
        except BaseException as exc:
            errors.append(exc)

    player = threading.Thread(target=play)
    player.start()
    try:
        result = runner.invoke(
            app,
            ["--substrate", "kubernetes", "--kubeconfig", str(kubeconfig), "run", str(manifest)],
        )
    finally:
        player.join(timeout=60)
    assert not errors, errors
    assert result.exit_code == code, result.output
    assert "master-0 | master says hi" in result.stdout
    assert "worker-0 | worker says hi" in result.stdout
    assert outcome in lines(result.stdout)[-2]
    assert "kubemill --substrate kubernetes" in lines(result.stdout)[-1]


def test_suspend_resume_and_interrupt_patch_the_job(
    runner: CliRunner, tmp_path: Path, cluster: ClientClusterThread
) -> None:
    from kubemill.api import STOP_ANNOTATION

    kubeconfig = _kubeconfig(tmp_path, cluster)
    manifest = write_manifest(tmp_path, pytorch_job("ddp", master="print('m')"))
    cli = ["--substrate", "kubernetes", "--kubeconfig", str(kubeconfig)]
    assert runner.invoke(app, [*cli, "run", "--detach", str(manifest)]).exit_code == 0
    path = "/apis/kubemill.dev/v1/namespaces/default/pytorchjobs/ddp"

    def patches() -> list[object]:
        return [c.body for c in cluster.client_calls() if c.method == "PATCH"]

    suspended = runner.invoke(app, [*cli, "suspend", "ddp"])
    assert suspended.exit_code == 0, suspended.output
    assert patches() == [{"spec": {"runPolicy": {"suspend": True}}}]
    assert f"kubemill --substrate kubernetes --kubeconfig {kubeconfig} resume ddp" in (
        suspended.stdout
    )
    operator = Operator(cluster)
    operator.set_conditions(
        "pytorchjobs", "default", "ddp", ("Suspended", "PyTorchJobSuspended", "x")
    )
    got = runner.invoke(app, [*cli, "get", "ddp"])
    assert lines(got.stdout)[1].split()[:3] == ["ddp", "PyTorchJob", "Suspended"]

    resumed = runner.invoke(app, [*cli, "resume", "ddp"])
    assert resumed.exit_code == 0, resumed.output
    assert patches()[1:] == [{"spec": {"runPolicy": {"suspend": False}}}]

    stopped = runner.invoke(app, [*cli, "interrupt", "ddp"])
    assert stopped.exit_code == 0, stopped.output
    assert patches()[2:] == [{"metadata": {"annotations": {STOP_ANNOTATION: "kubemill interrupt"}}}]
    assert cluster.get(path)["metadata"]["annotations"][STOP_ANNOTATION] == "kubemill interrupt"
