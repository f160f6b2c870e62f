"""``kubemill install`` / ``uninstall`` / ``version`` against the kmock test cluster.

The cluster has no controllers: :class:`Controllers` plays the two whose work install waits
for, as a thread -- the apiextensions controller (a CRD's ``Established`` condition) and the
deployment controller (the operator Deployment's ``Available`` condition and replica counts).
On a real cluster those controllers do it.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import KUBEMILL
from typer.testing import CliRunner

from kubemill import __version__
from kubemill.cli.app import app
from kubemill.kinds import crds
from kubemill.substrates.kubernetes.install import NAME
from support.kube_client_support import TOKEN, ClientClusterThread, kmock_cluster

NS = "kubemill-system"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class Controllers:
    """The apiextensions and deployment controllers, reduced to the conditions install
    waits for; they write only when something is missing (as the real ones, idempotent)."""

    def __init__(self, cluster: ClientClusterThread) -> None:
        self.cluster = cluster
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Controllers:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)

    def _status(self, path: str, status: dict[str, Any]) -> None:
        self.cluster.request(
            "PATCH", f"{path}/status", {"status": status},
            content_type="application/merge-patch+json",
        )  # fmt: skip

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            for crd in self.cluster.list(CRDS):
                conditions = (crd.get("status") or {}).get("conditions") or []
                if not any(c["type"] == "Established" for c in conditions):
                    condition = {"type": "Established", "status": "True", "reason": "InitialNames"}
                    self._status(f"{CRDS}/{crd['metadata']['name']}", {"conditions": [condition]})
            for deployment in self.cluster.list("/apis/apps/v1/deployments"):
                meta, status = deployment["metadata"], deployment.get("status") or {}
                if status.get("observedGeneration") == meta["generation"]:
                    continue
                replicas = deployment["spec"]["replicas"]
                path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}"
                self._status(
                    path,
                    {
                        "observedGeneration": meta["generation"],
                        "replicas": replicas,
                        "readyReplicas": replicas,
                        "availableReplicas": replicas,
                        "conditions": [
                            {"type": "Available", "status": "True", "reason": "MinimumReplicas"}
                        ],
                    },
                )


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    """A fresh cluster: no CRDs, no kubemill namespace."""
    with ClientClusterThread() as thread, Controllers(thread):
        yield thread


@pytest.fixture
def cli(tmp_path: Path, cluster: ClientClusterThread) -> list[str]:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    return ["--kubeconfig", str(kubeconfig)]


def _state(cluster: ClientClusterThread) -> dict[Any, str]:
    """Every object in the cluster (namespaces too) with its resourceVersion."""
    objects = {
        (resource.group, resource.plural, namespace, name): obj["metadata"]["resourceVersion"]
        for (resource, namespace, name), obj in list(cluster.cluster.objects.items())
        if not obj.deleted
    }
    for namespace in list(cluster.cluster.namespaces):
        meta = cluster.cluster.namespace_meta.get(namespace) or {}
        objects[("", "namespaces", None, namespace)] = meta.get("resourceVersion", "1")
    return objects


def _tfjob(name: str) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "python:3.11", "command": ["true"]}
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
            }
        },
    }


def test_install_then_uninstall_leaves_nothing_behind(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    before = _state(cluster)

    installed = runner.invoke(app, [*cli, "install"])

    assert installed.exit_code == 0, installed.output
    lines = installed.stdout.splitlines()
    assert f"namespace/{NS} created" in lines
    assert f"deployment/{NAME} -n {NS} created" in lines
    assert f"{len(crds())} CRDs established" in lines
    assert f"deployment/{NAME} -n {NS} available" in lines
    deployment = cluster.get(DEPLOYMENT)
    assert deployment["metadata"]["labels"]["app.kubernetes.io/version"] == __version__
    managers = {e["manager"] for e in deployment["metadata"]["managedFields"]}
    assert "kubemill" in managers
    for crd in crds():
        assert cluster.get_or_none(f"{CRDS}/{crd['metadata']['name']}") is not None
    assert (
        cluster.get_or_none(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{NAME}")
        is not None
    )

    removed = runner.invoke(app, [*cli, "uninstall", "--crds"])

    assert removed.exit_code == 0, removed.output
    assert f"namespace/{NS} deleted" in removed.stdout.splitlines()
    assert _state(cluster) == before


def test_a_second_install_writes_nothing(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    first = runner.invoke(app, [*cli, "install"])
    assert first.exit_code == 0, first.output
    state, last = _state(cluster), cluster.cluster._last_rv

    second = runner.invoke(app, [*cli, "install"])

    assert second.exit_code == 0, second.output
    applied = [
        line
        for line in second.stdout.splitlines()
        if line.endswith(("created", "configured", "unchanged"))
    ]
    assert applied and all(line.endswith(" unchanged") for line in applied), second.stdout
    assert _state(cluster) == state
    assert cluster.cluster._last_rv == last  # no write at all, not even to an untracked field


def test_an_install_with_another_image_configures_only_the_deployment(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    assert runner.invoke(app, [*cli, "install"]).exit_code == 0

    upgraded = runner.invoke(app, [*cli, "install", "--image", "example.org/kubemill:next"])

    assert upgraded.exit_code == 0, upgraded.output
    changed = [line for line in upgraded.stdout.splitlines() if line.endswith(" configured")]
    assert changed == [f"deployment/{NAME} -n {NS} configured"]
    container = cluster.get(DEPLOYMENT)["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "example.org/kubemill:next"


def test_dry_run_writes_nothing(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    last = cluster.cluster._last_rv
    fresh = runner.invoke(app, [*cli, "install", "--dry-run"])
    assert fresh.exit_code == 0, fresh.output
    assert f"deployment/{NAME} -n {NS} created (dry run)" in fresh.stdout.splitlines()
    assert cluster.cluster._last_rv == last
    assert NS not in cluster.cluster.namespaces
    assert cluster.list(CRDS) == []

    assert runner.invoke(app, [*cli, "install"]).exit_code == 0
    last = cluster.cluster._last_rv
    changed = runner.invoke(app, [*cli, "install", "--dry-run", "--replicas", "3"])
    assert changed.exit_code == 0, changed.output
    assert f"deployment/{NAME} -n {NS} configured (dry run)" in changed.stdout.splitlines()
    assert f"serviceaccount/{NAME} -n {NS} unchanged (dry run)" in changed.stdout.splitlines()
    assert cluster.cluster._last_rv == last
    assert cluster.get(DEPLOYMENT)["spec"]["replicas"] == 2

    gone = runner.invoke(app, [*cli, "uninstall", "--crds", "--dry-run"])
    assert gone.exit_code == 0, gone.output
    assert f"deployment/{NAME} -n {NS} deleted (dry run)" in gone.stdout.splitlines()
    assert cluster.cluster._last_rv == last


def test_uninstall_with_jobs_warns_and_keeps_them_without_crds(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    assert runner.invoke(app, [*cli, "install"]).exit_code == 0
    for name in ("a", "b"):
        cluster.create("/apis/kubemill.dev/v1/namespaces/default/tfjobs", _tfjob(name))

    kept = runner.invoke(app, [*cli, "uninstall"])

    assert kept.exit_code == 0, kept.output
    assert "2 jobs (2 TFJob) kept with the CRDs" in kept.stderr
    assert cluster.get_or_none(DEPLOYMENT) is None
    assert NS not in cluster.cluster.namespaces
    assert len(cluster.list("/apis/kubemill.dev/v1/tfjobs")) == 2
    assert len(cluster.list(CRDS)) == len(crds())

    everything = runner.invoke(app, [*cli, "uninstall", "--crds"])

    assert everything.exit_code == 0, everything.output
    assert "deleting the CRDs deletes 2 jobs (2 TFJob)" in everything.stderr
    assert cluster.list(CRDS) == []


def test_a_field_someone_else_changed_is_a_conflict_until_forced(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    assert runner.invoke(app, [*cli, "install"]).exit_code == 0
    cluster.request(
        "PATCH", DEPLOYMENT, {"spec": {"replicas": 5}},
        params={"fieldManager": "kubectl-edit"}, content_type="application/merge-patch+json",
    )  # fmt: skip

    refused = runner.invoke(app, [*cli, "install"])

    assert refused.exit_code == 1
    assert "kubectl-edit" in refused.stderr
    assert "--force-conflicts" in refused.stderr
    assert cluster.get(DEPLOYMENT)["spec"]["replicas"] == 5

    forced = runner.invoke(app, [*cli, "install", "--force-conflicts"])

    assert forced.exit_code == 0, forced.output
    assert cluster.get(DEPLOYMENT)["spec"]["replicas"] == 2


def test_a_namespace_install_did_not_create_is_kept(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    cluster.create_namespaces("ops")

    installed = runner.invoke(app, [*cli, "install", "-n", "ops"])
    assert installed.exit_code == 0, installed.output
    assert "namespace/ops exists (not kubemill's): kept" in installed.stdout
    removed = runner.invoke(app, [*cli, "uninstall", "-n", "ops"])

    assert removed.exit_code == 0, removed.output
    assert "ops" in cluster.cluster.namespaces
    assert cluster.list("/apis/apps/v1/namespaces/ops/deployments") == []
    assert cluster.list("/api/v1/namespaces/ops/serviceaccounts") == []


def test_version_shows_the_client_and_the_installed_operator(
    runner: CliRunner, cli: list[str], cluster: ClientClusterThread
) -> None:
    client_only = runner.invoke(app, [*cli, "version", "--client"])
    assert client_only.exit_code == 0, client_only.output
    assert client_only.stdout.splitlines() == [
        line
        for line in client_only.stdout.splitlines()
        if line.startswith(f"kubemill {__version__} ")
    ]
    assert len(client_only.stdout.splitlines()) == 1

    missing = runner.invoke(app, [*cli, "version"])
    assert missing.exit_code == 0, missing.output
    assert f"operator: not installed in namespace {NS}" in missing.stdout

    assert (
        runner.invoke(app, [*cli, "install", "--image", "registry.test/kubemill:7"]).exit_code == 0
    )
    shown = runner.invoke(app, [*cli, "version"])

    assert shown.exit_code == 0, shown.output
    operator_line = shown.stdout.splitlines()[1]
    assert operator_line.startswith(f"operator {__version__} (image registry.test/kubemill:7, 2/2")


def test_version_without_any_cluster_shows_the_client(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    result = runner.invoke(app, ["version"])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [result.stdout.splitlines()[0]]
    assert result.stdout.startswith(f"kubemill {__version__} (Python ")


def test_the_operator_logs_its_version_and_settings_at_start(
    tmp_path: Path, cluster: ClientClusterThread
) -> None:
    cluster.install_crds()
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), PYTHONUNBUFFERED="1")
    env.pop("KUBERNETES_SERVICE_HOST", None)
    argv = [
        str(KUBEMILL), "operator", "--namespace", "default", "--workers", "3",
        "--metrics-port", "0", "--health-port", "0",
    ]  # fmt: skip
    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "settings:" not in log.read_text() and process.poll() is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=30)
    text = log.read_text()
    line = next(line for line in text.splitlines() if "settings:" in line)
    assert f"kubemill operator {__version__} (Python " in line
    assert "namespaces=['default']" in line and "workers=3" in line
    assert TOKEN not in text  # the kubeconfig's credentials are never logged
