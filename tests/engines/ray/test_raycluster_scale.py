"""Scaling a RayCluster's worker group (``JobClient.scale``, ``kubemill scale``): the
engine's JSON patch (the named group's counts only, at its index, after a ``test`` of its
name; bounds widened), applied whole or not at all on both substrates (a JSON patch the
API server applies on Kubernetes; the local store's, in one transaction), a reorder in
between refused instead of scaling another group, and the refusals, with field paths."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ManifestError
from kubemill.engines.ray.api.scaling import worker_group_patch
from kubemill.kinds import load_one
from kubemill.sdk import JobClient, SubstrateError
from kubemill.substrates.local.records import JsonPatchError, apply_json_patch
from support.kube_client_support import ClientClusterThread, kmock_cluster

EXAMPLE = Path(__file__).parents[3] / "examples" / "ray" / "raycluster.yaml"
AT = "/spec/workerGroupSpecs/0"


def cluster(groups: int = 1) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    first = doc["spec"]["workerGroupSpecs"][0]
    for i in range(1, groups):
        doc["spec"]["workerGroupSpecs"].append({**first, "groupName": f"more{i}", "replicas": 1})
    return doc


def test_the_patch_sets_the_named_groups_count_at_its_index_after_testing_its_name() -> None:
    job = load_one(cluster(groups=2))
    assert worker_group_patch(job, "more1", 3) == [
        {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "more1"},
        {"op": "add", "path": "/spec/workerGroupSpecs/1/replicas", "value": 3},
    ]
    # Applied, it loads with the new count; whatever else the groups have is left alone.
    doc = cluster(groups=2)
    doc["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = {"labels": {"kept": "yes"}}
    before = copy.deepcopy(doc)
    apply_json_patch(doc, worker_group_patch(job, "more1", 3))
    assert [g.count for g in load_one(doc).spec.worker_group_specs] == [2, 3]
    before["spec"]["workerGroupSpecs"][1]["replicas"] = 3
    assert doc == before


def test_the_only_group_is_the_default_and_its_bounds_widen_to_the_count() -> None:
    job = load_one(cluster())  # minReplicas 1, maxReplicas 4

    def counts(patch: list[dict[str, Any]]) -> dict[str, int]:
        assert patch[0] == {"op": "test", "path": f"{AT}/groupName", "value": "workers"}
        return {op["path"].removeprefix(f"{AT}/"): op["value"] for op in patch[1:]}

    assert counts(worker_group_patch(job, None, 6)) == {"replicas": 6, "maxReplicas": 6}
    assert counts(worker_group_patch(job, None, 0)) == {"replicas": 0, "minReplicas": 0}
    assert counts(worker_group_patch(job, None, 3)) == {"replicas": 3}


def test_a_json_patch_whose_test_fails_changes_nothing() -> None:
    doc = cluster(groups=2)
    before = copy.deepcopy(doc)
    # The groups reordered since the patch was made: index 1 is no longer more1.
    doc["spec"]["workerGroupSpecs"].reverse()
    reordered = copy.deepcopy(doc)
    with pytest.raises(JsonPatchError, match="is not 'more1'"):
        apply_json_patch(doc, worker_group_patch(load_one(before), "more1", 3))
    assert doc == reordered
    with pytest.raises(JsonPatchError, match="not there"):
        apply_json_patch(doc, [{"op": "replace", "path": "/spec/nothing/0", "value": 1}])
    with pytest.raises(JsonPatchError, match="'move' is not applied"):
        apply_json_patch(doc, [{"op": "move", "from": "/spec", "path": "/other"}])
    assert doc == reordered


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


def test_on_kubernetes_the_cluster_is_json_patched_and_a_reorder_in_between_is_refused(
    cluster_thread: ClientClusterThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster_thread.url)
    manifest = tmp_path / "rc.yaml"
    manifest.write_text(yaml.safe_dump(cluster(groups=2)))
    client = JobClient("kubernetes", kubeconfig=str(kubeconfig), context="kmock")
    client.submit(manifest)

    view = client.scale("raycluster-sum", 3, group="more1")

    [patch] = [c for c in cluster_thread.client_calls() if c.method == "PATCH"]
    path = patch.path  # kubemill's group by default; the upstream one where it serves it
    assert path.endswith("/v1/namespaces/default/rayclusters/raycluster-sum")
    # A list of operations (the served cluster takes a list only as a JSON patch).
    assert patch.body == worker_group_patch(view.job, "more1", 3)
    stored = cluster_thread.get(path)
    assert [g["replicas"] for g in stored["spec"]["workerGroupSpecs"]] == [2, 3]
    assert [g.count for g in view.job.spec.worker_group_specs] == [2, 3]  # type: ignore[attr-defined]

    # The groups reordered after the client read them: the test fails, nothing is scaled.
    read = client.get("raycluster-sum")
    stored["spec"]["workerGroupSpecs"].reverse()
    cluster_thread.patch(path, {"spec": {"workerGroupSpecs": stored["spec"]["workerGroupSpecs"]}})
    monkeypatch.setattr(client, "get", lambda *args, **kwargs: read)
    with pytest.raises(SubstrateError, match="changed since it was read"):
        client.scale("raycluster-sum", 5, group="more1")
    after = cluster_thread.get(path)["spec"]["workerGroupSpecs"]
    assert [(g["groupName"], g["replicas"]) for g in after] == [("more1", 3), ("workers", 2)]


def test_locally_the_recorded_manifest_is_json_patched_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = tmp_path / "rc.yaml"
    doc = cluster(groups=2)
    for group in doc["spec"]["workerGroupSpecs"]:
        group["replicas"] = group["minReplicas"] = 0  # no Ray process is started
    doc["spec"]["suspend"] = True
    manifest.write_text(yaml.safe_dump(doc))
    client = JobClient(state_dir=tmp_path / "state")
    client.submit(manifest, detach=True)
    try:
        view = client.scale("raycluster-sum", 2, group="more1")
        assert [g.count for g in view.job.spec.worker_group_specs] == [0, 2]  # type: ignore[attr-defined]
        # A reorder between the read and the patch: refused, the manifest as it was.
        read = client.get("raycluster-sum")
        backend = client.backend
        rec = backend.store.job("default", "raycluster-sum")  # type: ignore[attr-defined]
        groups = list(reversed(rec.manifest["spec"]["workerGroupSpecs"]))
        backend.store.patch_manifest(rec.uid, patch={"spec": {"workerGroupSpecs": groups}})  # type: ignore[attr-defined]
        monkeypatch.setattr(client, "get", lambda *args, **kwargs: read)
        with pytest.raises(SubstrateError, match="is not 'more1'"):
            client.scale("raycluster-sum", 4, group="more1")
        stored = backend.store.job("default", "raycluster-sum").manifest  # type: ignore[attr-defined]
        assert [(g["groupName"], g["replicas"]) for g in stored["spec"]["workerGroupSpecs"]] == [
            ("more1", 2),
            ("workers", 0),
        ]
    finally:
        client.delete("raycluster-sum")


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
