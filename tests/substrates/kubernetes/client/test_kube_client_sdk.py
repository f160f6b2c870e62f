"""``JobClient(substrate="kubernetes", kubeconfig=..., context=..., namespace=...)`` end to end
against the kmock cluster, and the import cost of the substrate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubemill.sdk import JobClient, SubstrateError
from kubemill.substrates.kubernetes.client import KubernetesBackend
from support.kube_client_support import SEED_TFJOB as MANIFEST
from support.kube_client_support import ClientClusterThread, Operator, kmock_cluster, running


def test_job_client_on_kubernetes(
    cluster: ClientClusterThread, operator: Operator, kubeconfig: Path, tmp_path: Path
) -> None:
    cluster.create_namespaces("ml")
    manifest = tmp_path / "seed.yaml"
    manifest.write_text(MANIFEST)
    client = JobClient("kubernetes", kubeconfig=str(kubeconfig), context="kmock", namespace="ml")
    assert isinstance(client.backend, KubernetesBackend)

    view = client.submit(manifest)
    assert (view.kind, view.namespace, view.name) == ("TFJob", "ml", "seed")
    operator.create_pods("tfjobs", "ml", "seed")
    operator.pod_status("ml", "seed-worker-0", running("tensorflow", ip="10.2.0.4"))
    operator.start_log("ml", "seed-worker-0", "tensorflow").write("step 1")

    got = client.get("seed")
    assert [(r.name, r.phase, r.address) for r in got.replicas] == [
        ("seed-worker-0", "Running", "10.2.0.4:2222")
    ]
    assert [v.name for v in client.list()] == ["seed"]
    assert [(line.replica, line.text) for line in client.logs("seed")] == [
        ("seed-worker-0", "step 1")
    ]
    assert client.events("seed") == []
    client.delete("seed")
    assert client.list() == []


def test_job_client_names_options_the_substrate_does_not_take(kubeconfig: Path) -> None:
    with pytest.raises(SubstrateError, match=r"option\(s\) config_path do not apply"):
        JobClient("kubernetes", kubeconfig=str(kubeconfig), config_path="x")


def test_a_context_from_the_kubeconfig_is_used(
    cluster: ClientClusterThread, tmp_path: Path
) -> None:
    config = kmock_cluster.write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:1")
    text = config.read_text()
    # A second context pointing at the served cluster, with its own namespace.
    data = yaml.safe_load(text)
    data["clusters"].append({"name": "served", "cluster": {"server": cluster.url}})
    data["contexts"].append(
        {"name": "good", "context": {"cluster": "served", "user": "tests", "namespace": "x"}}
    )
    config.write_text(yaml.safe_dump(data))
    client = JobClient("kubernetes", kubeconfig=str(config), context="good")
    assert client.list() == []
    assert client.backend.default_namespace == "x"  # type: ignore[attr-defined]


def test_importing_the_sdk_and_the_backend_module_does_not_import_kubernetes() -> None:
    code = (
        "import sys, kubemill.sdk, kubemill.substrates.kubernetes.client;"
        "print(sorted(m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
