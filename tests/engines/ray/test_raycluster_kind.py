"""The RayCluster kind: KubeRay's manifests load unchanged, what kubemill does not honour is
refused at its field path, and the status is written in KubeRay's words and read back."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from kubemill.api import ClusterOptions, Condition, ConditionType, ManifestError
from kubemill.engines.ray.api.raycluster import (
    API_VERSION,
    HEAD,
    HeadGroupSpec,
    HeadInfo,
    RayCluster,
    RayClusterSpec,
    RayClusterStatus,
    ScaleStrategy,
    WorkerGroupSpec,
    client_addresses,
    cluster_manifest,
)
from kubemill.engines.ray.api.rayjob import RayJobSpec
from kubemill.engines.ray.api.refusals import KUBERAY_OPERATOR, REFUSALS, Refusal
from kubemill.kinds import load_one
from kubemill.sdk.client import has_suspend, is_service

KUBERAY_SAMPLE: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "raycluster-kuberay"},
    "spec": {
        "rayVersion": "2.60.0",
        "headGroupSpec": {
            "serviceType": "NodePort",
            "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-head",
                            "image": "rayproject/ray:2.60.0",
                            "resources": {"limits": {"cpu": "1", "memory": "2G"}},
                            "ports": [
                                {"containerPort": 6379, "name": "gcs-server"},
                                {"containerPort": 8265, "name": "dashboard"},
                                {"containerPort": 10001, "name": "client"},
                            ],
                        }
                    ]
                }
            },
        },
        "workerGroupSpecs": [
            {
                "groupName": "workergroup",
                "replicas": 2,
                "minReplicas": 1,
                "maxReplicas": 5,
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]
                    }
                },
            }
        ],
    },
}


def sample(**changes: Any) -> dict[str, Any]:
    """The KubeRay sample, with ``changes`` set at dotted paths under ``spec``."""
    doc = copy.deepcopy(KUBERAY_SAMPLE)
    for path, value in changes.items():
        node = doc["spec"]
        *parents, last = path.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return doc


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ManifestError) as caught:
        load_one(doc)
    return {e.path: e.message for e in caught.value.errors}


def test_kuberays_sample_loads_with_its_groups_as_replica_types() -> None:
    job = load_one(KUBERAY_SAMPLE)
    assert isinstance(job, RayCluster)
    assert job.api_version == "kubemill.dev/v1"  # served in KubeRay's group, held as ours
    assert {t: s.replicas for t, s in job.replica_specs.items()} == {HEAD: 1, "workergroup": 2}
    assert job.spec.desired_workers == 2
    assert job.run_policy.suspend is False


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        ({"enableInTreeAutoscaling": True}, "spec.enableInTreeAutoscaling", "autoscaler"),
        ({"autoscalerOptions": {}}, "spec.autoscalerOptions", "autoscaler"),
        (
            {"workerGroupSpecs.0.rayStartParams": {"address": "elsewhere:6379"}},
            "spec.workerGroupSpecs[0].rayStartParams",
            "'address' is set by kubemill",
        ),
        (
            {"workerGroupSpecs.0.rayStartParams": {"port": "7000"}},
            "spec.workerGroupSpecs[0].rayStartParams",
            "'port' is the head's GCS port, not a worker's",
        ),
        (
            {"headGroupSpec.rayStartParams": {"dashboard-port": "web"}},
            "spec.headGroupSpec.rayStartParams",
            "not a port number",
        ),
        (
            {"headGroupSpec.rayStartParams": {"--num-cpus": "1"}},
            "spec.headGroupSpec.rayStartParams",
            "without the leading '--'",
        ),
        ({"workerGroupSpecs.0.numOfHosts": 2}, "spec.workerGroupSpecs[0].numOfHosts", "multi"),
        ({"workerGroupSpecs.0.idleTimeoutSeconds": 60}, "spec.workerGroupSpecs[0]", "idle"),
        ({"workerGroupSpecs.0.replicas": 9}, "spec.workerGroupSpecs[0].replicas", "between"),
        ({"workerGroupSpecs.0.minReplicas": 6}, "spec.workerGroupSpecs[0].minReplicas", "more"),
        ({"workerGroupSpecs.0.groupName": "head"}, "spec.workerGroupSpecs[0].groupName", "head"),
        (
            {"workerGroupSpecs.0.groupName": "Big_Group"},
            "spec.workerGroupSpecs[0].groupName",
            "not a valid group name",
        ),
        (
            {
                "headGroupSpec.template": {
                    "spec": {"containers": [{"name": "x", "image": "i", "command": ["sleep"]}]}
                }
            },
            "spec.headGroupSpec.template.spec.containers[0].command",
            "ray start",
        ),
        (
            {"headGroupSpec.template": {"spec": {"containers": []}}},
            "spec.headGroupSpec.template.spec.containers",
            "at least one container",
        ),
        ({"managedBy": "kueue.x-k8s.io/multikueue"}, "spec.managedBy", "another controller"),
    ],
)
def test_what_kubemill_does_not_honour_is_refused_at_its_field_path(
    changes: dict[str, Any], path: str, words: str
) -> None:
    found = errors_of(sample(**changes))
    assert any(p.startswith(path) and words in m for p, m in found.items()), found


def test_two_groups_of_one_name_are_refused() -> None:
    doc = sample()
    doc["spec"]["workerGroupSpecs"].append(copy.deepcopy(doc["spec"]["workerGroupSpecs"][0]))
    found = errors_of(doc)
    assert "names another group" in found["spec.workerGroupSpecs[1].groupName"]


def test_suspend_is_the_spec_field_kubemill_suspend_patches() -> None:
    job = load_one(KUBERAY_SAMPLE)
    patch = type(job).suspend_patch(True)
    assert patch == {"spec": {"suspend": True}}
    doc = sample(suspend=True)
    assert load_one(doc).run_policy.suspend is True


def test_a_patch_of_a_groups_replicas_changes_its_replica_count() -> None:
    job = load_one(sample(**{"workerGroupSpecs.0.replicas": 4}))
    assert job.replica_count("workergroup") == 4


def test_the_status_is_written_in_kuberays_words_and_read_back() -> None:
    status = RayClusterStatus(
        conditions=[
            Condition(type=ConditionType.CREATED),
            Condition(type=ConditionType.READY),
            Condition(type=ConditionType.RESTARTING, status="False"),
        ],
        head_pod_ready=True,
        state="ready",
        ready_worker_replicas=2,
        endpoints={"dashboard": "8265"},
    )
    wire = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    types = [c["type"] for c in wire["conditions"]]
    assert types == ["HeadPodReady", "Created", "RayClusterProvisioned", "ReplicaFailure"]
    assert wire["conditions"][0]["status"] == "True"
    assert wire["readyWorkerReplicas"] == 2 and wire["state"] == "ready"
    assert "headPodReady" not in wire  # a condition on the wire, as KubeRay's
    back = RayClusterStatus.model_validate(wire)
    assert back.head_pod_ready is True
    assert [c.type for c in back.conditions] == [
        ConditionType.CREATED,
        ConditionType.READY,
        ConditionType.RESTARTING,
    ]
    assert back.phase == "Ready"


def test_cluster_create_makes_a_head_and_a_worker_group() -> None:
    manifest = cluster_manifest("rc", ClusterOptions(workers=3, worker_cpu=2, env={"A": "1"}))
    job = load_one(manifest)
    assert isinstance(job, RayCluster)
    assert manifest["apiVersion"] == API_VERSION
    assert {t: s.replicas for t, s in job.replica_specs.items()} == {HEAD: 1, "workers": 3}
    assert job.spec.worker_group_specs[0].ray_start_params == {"num-cpus": "2"}
    env = job.spec.worker_group_specs[0].template.spec.containers[0].env or []
    assert [(e.name, e.value) for e in env] == [("A", "1")]


def test_client_addresses_follow_the_status() -> None:
    job = load_one(KUBERAY_SAMPLE)
    assert client_addresses(job, job.status) == {}
    local = RayClusterStatus(
        head=HeadInfo(pod_ip="127.0.0.1"), endpoints={"client": "4001", "dashboard": "4002"}
    )
    assert client_addresses(job, local) == {
        "ray.init(address=...)": "ray://127.0.0.1:4001",
        "dashboard (ray job submit --address)": "http://127.0.0.1:4002",
    }
    kube = RayClusterStatus(
        head=HeadInfo(service_name="raycluster-kuberay-head-svc"), endpoints={"client": "10001"}
    )
    assert client_addresses(job, kube) == {
        "ray.init(address=...)": "ray://raycluster-kuberay-head-svc.default.svc.cluster.local:10001"
    }


def test_a_ray_cluster_is_a_service_with_a_suspend_unlike_a_mars_cluster() -> None:
    # KubeRay suspends a RayCluster (its pods stop, the object stays): the SDK lets it,
    # where a service cluster without a suspend field is refused (test_sdk_never_finishes).
    assert is_service("RayCluster") and has_suspend("RayCluster")
    assert is_service("MarsCluster") and not has_suspend("MarsCluster")
    assert has_suspend("TFJob")


REFUSED_VALUES: dict[str, Any] = {
    "head_service": {},
    "enable_ingress": True,
    "workers_to_delete": ["w-0"],
    "idle_timeout_seconds": 60,
    "num_of_hosts": 2,
    "suspend": True,
    "enable_in_tree_autoscaling": True,
    "autoscaler_options": {},
    "head_service_annotations": {"a": "b"},
    "gcs_fault_tolerance_options": {},
    "managed_by": "kueue.x-k8s.io/multikueue",
    "backoff_limit": 1,
    "schedule": "* * * * *",
    "deletion_strategy": {},
}
"""A value each refused field is refused with."""
MODELS: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (HeadGroupSpec, WorkerGroupSpec, RayClusterSpec, ScaleStrategy, RayJobSpec)
}
REQUIRED: dict[str, dict[str, Any]] = {
    "HeadGroupSpec": {"template": {}},
    "WorkerGroupSpec": {"groupName": "g", "template": {}},
    "RayClusterSpec": {"headGroupSpec": {"template": {}}},
    "ScaleStrategy": {},
    "RayJobSpec": {},
}


@pytest.mark.parametrize("row", REFUSALS, ids=lambda r: f"{r.model}.{r.field}")
def test_every_refused_field_of_the_table_is_refused_at_its_path(row: Refusal) -> None:
    model = MODELS[row.model]
    alias = model.model_fields[row.field].alias or row.field
    value = REFUSED_VALUES[row.field]
    with pytest.raises(ValidationError) as caught:
        model.model_validate({**REQUIRED[row.model], alias: value})
    (error,) = caught.value.errors()
    assert error["loc"] == (alias,)
    assert error["msg"] == row.message.format(value=value)
    assert error["ctx"]["hint"] == row.hint
    # The value KubeRay writes by default (none, false, one host, its own operator) is not.
    default = {"num_of_hosts": 1, "managed_by": KUBERAY_OPERATOR}.get(row.field)
    model.model_validate({**REQUIRED[row.model], alias: default})
