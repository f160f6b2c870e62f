"""Scaling a RayCluster's worker group (``JobClient.scale``, ``kubemill scale``): the
engine's merge patch (every group, the named one with its new count, bounds widened), the
same patch on Kubernetes, and the refusals, with field paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ManifestError
from kubemill.engines.ray.api.scaling import worker_group_patch
from kubemill.kinds import load_one
from kubemill.sdk import JobClient, SubstrateError
from support.kube_client_support import ClientClusterThread, kmock_cluster

EXAMPLE = Path(__file__).parents[3] / "examples" / "ray" / "raycluster.yaml"


def cluster(groups: int = 1) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    first = doc["spec"]["workerGroupSpecs"][0]
    for i in range(1, groups):
        doc["spec"]["workerGroupSpecs"].append({**first, "groupName": f"more{i}", "replicas": 1})
    return doc


def test_the_patch_carries_every_group_the_named_one_with_its_count() -> None:
    job = load_one(cluster(groups=2))
    patch = worker_group_patch(job, "more1", 3)
    groups = patch["spec"]["workerGroupSpecs"]
    assert [(g["groupName"], g["replicas"]) for g in groups] == [("workers", 2), ("more1", 3)]
    assert groups[0] == job.to_wire()["spec"]["workerGroupSpecs"][0]
    # Applied as a merge patch (the list replaced), it loads: the count is the new one.
    doc = cluster(groups=2)
    doc["spec"].update(patch["spec"])
    assert [g.count for g in load_one(doc).spec.worker_group_specs] == [2, 3]


def test_the_only_group_is_the_default_and_its_bounds_widen_to_the_count() -> None:
    job = load_one(cluster())  # minReplicas 1, maxReplicas 4
    [up] = worker_group_patch(job, None, 6)["spec"]["workerGroupSpecs"]
    assert (up["replicas"], up["minReplicas"], up["maxReplicas"]) == (6, 1, 6)
    [down] = worker_group_patch(job, None, 0)["spec"]["workerGroupSpecs"]
    assert (down["replicas"], down["minReplicas"], down["maxReplicas"]) == (0, 0, 4)


def test_a_group_the_cluster_has_not_is_refused_naming_those_it_has() -> None:
    with pytest.raises(ManifestError) as unknown:
        worker_group_patch(load_one(cluster(groups=2)), "gpu", 1)
    [error] = unknown.value.errors
    assert error.path == "spec.workerGroupSpecs"
    assert "no worker group 'gpu'" in error.message and error.hint == "name one of: workers, more1"
    with pytest.raises(ManifestError, match="no group was named"):
        worker_group_patch(load_one(cluster(groups=2)), None, 1)


@pytest.fixture
def cluster_thread() -> Iterator[ClientClusterThread]:
    """A served cluster with the kubemill CRDs (upstream groups too) installed."""
    with ClientClusterThread() as thread:
        thread.install_crds()
        yield thread


def test_on_kubernetes_the_cluster_is_merge_patched(
    cluster_thread: ClientClusterThread, tmp_path: Path
) -> None:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster_thread.url)
    manifest = tmp_path / "rc.yaml"
    manifest.write_text(yaml.safe_dump(cluster()))
    client = JobClient("kubernetes", kubeconfig=str(kubeconfig), context="kmock")
    client.submit(manifest)

    view = client.scale("raycluster-sum", 3)

    [patch] = [c for c in cluster_thread.client_calls() if c.method == "PATCH"]
    path = patch.path  # kubemill's group by default; the upstream one where it serves it
    assert path.endswith("/v1/namespaces/default/rayclusters/raycluster-sum")
    assert [g["replicas"] for g in patch.body["spec"]["workerGroupSpecs"]] == [3]
    stored = cluster_thread.get(path)
    assert [g["replicas"] for g in stored["spec"]["workerGroupSpecs"]] == [3]
    assert [g.count for g in view.job.spec.worker_group_specs] == [3]  # type: ignore[attr-defined]


def test_a_kind_without_scalable_groups_is_refused_locally(tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "pytorch", "image": "x", "command": ["sleep", "60"]}
                            ]
                        }
                    },
                }
            }
        },
    }
    manifest.write_text(yaml.safe_dump(doc))
    client = JobClient(state_dir=tmp_path / "state")
    client.submit(manifest, detach=True)
    try:
        with pytest.raises(SubstrateError, match="PyTorchJob p has no groups kubemill scales"):
            client.scale("p", 2)
        with pytest.raises(ManifestError, match="below 0"):
            client.scale("p", -1)
    finally:
        client.delete("p")
