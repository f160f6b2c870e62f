"""Defaults applied on load, as the upstream webhooks apply them."""

from __future__ import annotations

from typing import Any

import pytest

from kubemill.api import CleanPodPolicy, Job, RestartPolicy
from kubemill.kinds import load_one


def minimal(kind: str, replica_type: str, container: str, **extra: Any) -> dict[str, Any]:
    field = "tfReplicaSpecs" if kind == "TFJob" else "pytorchReplicaSpecs"
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "d"},
        "spec": {
            field: {
                replica_type: {
                    "template": {"spec": {"containers": [{"name": container, "image": "x"}]}},
                    **extra,
                }
            }
        },
    }


TF = minimal("TFJob", "Worker", "tensorflow")
PT = minimal("PyTorchJob", "Master", "pytorch")


def ports(job: Job, rtype: str) -> list[tuple[str | None, int]]:
    container = job.replica_specs[rtype].template.spec.containers[0]
    return [(p.name, p.container_port) for p in container.ports or []]


@pytest.mark.parametrize(
    ("manifest", "rtype", "restart", "port"),
    [
        pytest.param(TF, "Worker", RestartPolicy.NEVER, ("tfjob-port", 2222), id="tfjob"),
        pytest.param(
            PT, "Master", RestartPolicy.ON_FAILURE, ("pytorchjob-port", 23456), id="pytorchjob"
        ),
    ],
)
def test_kind_defaults(
    manifest: dict[str, Any], rtype: str, restart: RestartPolicy, port: tuple[str, int]
) -> None:
    job = load_one(manifest)
    assert job.replica_count(rtype) == 1
    assert job.replica_specs[rtype].restart_policy is restart
    assert job.restart_policy(rtype) is restart
    assert ports(job, rtype) == [port]
    assert job.run_policy.clean_pod_policy is CleanPodPolicy.NONE
    assert job.run_policy.suspend is False
    assert job.namespace == "default"


def test_tfjob_success_policy_defaults_to_empty() -> None:
    job = load_one(TF)
    assert job.to_wire()["spec"]["successPolicy"] == ""


def test_an_explicit_framework_port_is_kept() -> None:
    manifest = minimal("TFJob", "PS", "tensorflow")
    container = manifest["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"name": "metrics", "containerPort": 9100}]
    job = load_one(manifest)
    assert ports(job, "PS") == [("metrics", 9100), ("tfjob-port", 2222)]
    container["ports"] = [{"name": "tfjob-port", "containerPort": 4000}]
    assert ports(load_one(manifest), "PS") == [("tfjob-port", 4000)]


def test_only_the_framework_container_gets_the_port() -> None:
    manifest = minimal("PyTorchJob", "Master", "pytorch")
    spec = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    spec["containers"].append({"name": "sidecar", "image": "x"})
    job = load_one(manifest)
    sidecar = job.replica_specs["Master"].template.spec.containers[1]
    assert sidecar.ports is None


@pytest.mark.parametrize(
    ("key", "canonical"),
    [
        pytest.param("worker", "Worker", id="lower"),
        pytest.param("WORKER", "Worker", id="upper"),
        pytest.param("ps", "PS", id="ps-lower"),
        pytest.param("Ps", "PS", id="ps-mixed"),
        pytest.param("chief", "Chief", id="chief"),
        pytest.param("EVALUATOR", "Evaluator", id="evaluator"),
    ],
)
def test_replica_type_keys_are_case_normalised(key: str, canonical: str) -> None:
    job = load_one(minimal("TFJob", key, "tensorflow"))
    assert list(job.replica_specs) == [canonical]
    assert job.to_wire()["spec"]["tfReplicaSpecs"].keys() == {canonical}


def test_explicit_values_win_over_defaults() -> None:
    manifest = minimal("TFJob", "Worker", "tensorflow", replicas=3, restartPolicy="Always")
    manifest["spec"]["runPolicy"] = {"cleanPodPolicy": "All", "suspend": True}
    job = load_one(manifest)
    assert job.replica_count("Worker") == 3
    assert job.restart_policy("Worker") is RestartPolicy.ALWAYS
    assert job.run_policy.clean_pod_policy is CleanPodPolicy.ALL
    assert job.run_policy.suspend is True


def test_elastic_bounds_default_as_upstream() -> None:
    manifest = minimal("PyTorchJob", "Worker", "pytorch", replicas=3)
    manifest["spec"]["elasticPolicy"] = {}
    job = load_one(manifest)
    assert job.elastic_bounds == (3, 3)  # type: ignore[attr-defined]
    manifest["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 5}
    assert load_one(manifest).elastic_bounds == (2, 5)  # type: ignore[attr-defined]
