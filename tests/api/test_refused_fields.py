"""Fields kubemill accepts in its schema but cannot honour are refused, each at its path.

docs/fields.md lists every spec field as honoured, passed through or refused; these are
the refused ones (and the values of them that are harmless, which still load).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubemill.api import FieldError, ManifestError, RestartPolicy
from kubemill.engines.pytorch.api import PyTorchJob
from kubemill.engines.tensorflow.api import TFJob
from kubemill.kinds import load_one


def tfjob(spec: dict[str, Any] | None = None, **template_spec: Any) -> dict[str, Any]:
    pod = {"containers": [{"name": "tensorflow", "image": "local"}], **template_spec}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tj"},
        "spec": {
            **(spec or {}),
            "tfReplicaSpecs": {"PS": {"template": {"spec": pod}}, "Worker": {"replicas": 2}},
        },
    }


def pytorchjob(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    pod = {"containers": [{"name": "pytorch", "image": "local"}]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pj"},
        "spec": {
            **(spec or {}),
            "pytorchReplicaSpecs": {
                "Master": {"template": {"spec": copy.deepcopy(pod)}},
                "Worker": {"replicas": 2, "template": {"spec": copy.deepcopy(pod)}},
            },
        },
    }


def with_worker_template(manifest: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(manifest)
    specs = out["spec"]["tfReplicaSpecs"]
    specs["Worker"]["template"] = {
        "spec": {"containers": [{"name": "tensorflow", "image": "local"}]}
    }
    return out


def errors_of(manifest: dict[str, Any]) -> list[FieldError]:
    with pytest.raises(ManifestError) as caught:
        load_one(manifest)
    return list(caught.value.errors)


def test_enable_dynamic_worker_is_refused_with_a_hint() -> None:
    manifest = with_worker_template(tfjob({"enableDynamicWorker": True}))
    (error,) = errors_of(manifest)
    assert error.path == "spec.enableDynamicWorker"
    assert error.message.startswith("not supported yet")
    assert "remove enableDynamicWorker" in error.hint


def test_enable_dynamic_worker_false_loads_and_plans_the_full_cluster() -> None:
    job = load_one(with_worker_template(tfjob({"enableDynamicWorker": False})))
    assert isinstance(job, TFJob)
    assert job.spec.enable_dynamic_worker is False


def test_elastic_metrics_are_refused_with_a_hint() -> None:
    metrics = [{"type": "Resource", "resource": {"name": "cpu"}}]
    manifest = pytorchjob({"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}})
    manifest["spec"]["elasticPolicy"]["metrics"] = metrics
    (error,) = errors_of(manifest)
    assert error.path == "spec.elasticPolicy.metrics"
    assert error.message.startswith("not supported yet")
    assert "HorizontalPodAutoscaler" in error.message
    assert "remove metrics" in error.hint


def test_an_empty_metrics_list_is_refused_too() -> None:
    # Upstream creates an autoscaler whenever metrics is set, even to [] (CPU by default).
    manifest = pytorchjob({"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "metrics": []}})
    assert [e.path for e in errors_of(manifest)] == ["spec.elasticPolicy.metrics"]


def test_an_elastic_policy_without_metrics_loads() -> None:
    job = load_one(pytorchjob({"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}}))
    assert isinstance(job, PyTorchJob)
    assert job.spec.elastic_policy is not None
    assert job.spec.elastic_policy.metrics is None


@pytest.mark.parametrize("value", ["kueue.x-k8s.io/multikueue", "example.com/other"])
def test_managed_by_another_controller_is_refused(value: str) -> None:
    (error,) = errors_of(pytorchjob({"runPolicy": {"managedBy": value}}))
    assert error.path == "spec.runPolicy.managedBy"
    assert value in error.message
    assert "remove managedBy" in error.hint


@pytest.mark.parametrize("value", ["", "kubeflow.org/training-operator"])
def test_managed_by_the_built_in_controller_loads(value: str) -> None:
    job = load_one(pytorchjob({"runPolicy": {"managedBy": value}}))
    assert job.run_policy.managed_by == value


def test_a_pod_template_name_is_refused() -> None:
    manifest = with_worker_template(tfjob())
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"] = {"name": "mine"}
    (error,) = errors_of(manifest)
    assert error.path == "spec.tfReplicaSpecs.Worker.template.metadata.name"
    assert "<job>-<replica type>-<index>" in error.message


@pytest.mark.parametrize(
    ("replica_policy", "pod_policy", "says"),
    [
        pytest.param(None, "OnFailure", "'Never'", id="tf-default-never"),
        pytest.param("OnFailure", "Never", "'OnFailure'", id="conflict"),
        pytest.param("ExitCode", "OnFailure", "'ExitCode'", id="exit-code"),
    ],
)
def test_a_pod_restart_policy_the_replica_replaces_is_refused(
    replica_policy: str | None, pod_policy: str, says: str
) -> None:
    manifest = with_worker_template(tfjob(restartPolicy=pod_policy))
    if replica_policy is not None:
        manifest["spec"]["tfReplicaSpecs"]["PS"]["restartPolicy"] = replica_policy
    (error,) = errors_of(manifest)
    assert error.path == "spec.tfReplicaSpecs.PS.template.spec.restartPolicy"
    assert says in error.message
    assert says in error.message
    assert "set spec.tfReplicaSpecs.PS.restartPolicy instead" in error.hint
    assert "TFJob replicas default to Never" in error.hint


@pytest.mark.parametrize(
    ("replica_policy", "pod_policy"),
    [
        pytest.param(None, "Never", id="tf-default"),
        pytest.param("OnFailure", "OnFailure", id="same"),
        pytest.param("ExitCode", "Never", id="exit-code-runs-as-never"),
    ],
)
def test_a_pod_restart_policy_that_agrees_loads(
    replica_policy: str | None, pod_policy: str
) -> None:
    manifest = with_worker_template(tfjob(restartPolicy=pod_policy))
    if replica_policy is not None:
        manifest["spec"]["tfReplicaSpecs"]["PS"]["restartPolicy"] = replica_policy
    job = load_one(manifest)
    assert job.replica_specs["PS"].template.spec.restart_policy == pod_policy


def test_pytorch_default_restart_policy_is_on_failure_for_the_check() -> None:
    manifest = pytorchjob()
    manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["restartPolicy"] = (
        "OnFailure"
    )
    job = load_one(manifest)
    assert job.restart_policy("Worker") is RestartPolicy.ON_FAILURE
    manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["restartPolicy"] = (
        "Always"
    )
    (error,) = errors_of(manifest)
    assert error.path == "spec.pytorchReplicaSpecs.Worker.template.spec.restartPolicy"


def test_the_v1alpha1_pod_restart_policy_is_the_replica_policy_not_a_conflict() -> None:
    job = load_one(
        {
            "apiVersion": "kubeflow.org/v1alpha1",
            "kind": "TFJob",
            "metadata": {"name": "old"},
            "spec": {
                "replicaSpecs": [
                    {
                        "replicas": 2,
                        "tfReplicaType": "WORKER",
                        "template": {
                            "spec": {
                                "containers": [{"name": "tensorflow", "image": "local"}],
                                "restartPolicy": "OnFailure",
                            }
                        },
                    }
                ]
            },
        }
    )
    assert job.restart_policy("Worker") is RestartPolicy.ON_FAILURE


def test_a_v1alpha1_template_name_is_refused_at_its_list_item() -> None:
    template = {
        "metadata": {"name": "mine"},
        "spec": {"containers": [{"name": "tensorflow", "image": "local"}]},
    }
    errors = errors_of(
        {
            "apiVersion": "kubeflow.org/v1alpha1",
            "kind": "TFJob",
            "metadata": {"name": "old"},
            "spec": {"replicaSpecs": [{"tfReplicaType": "WORKER", "template": template}]},
        }
    )
    assert [e.path for e in errors] == ["spec.replicaSpecs[0].template.metadata.name"]


def test_refusals_come_with_every_other_problem_at_once() -> None:
    manifest = with_worker_template(tfjob({"enableDynamicWorker": True}))
    manifest["metadata"]["name"] = "Not_A_Name"
    manifest["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    paths = sorted(e.path for e in errors_of(manifest))
    assert paths == ["metadata.name", "spec.enableDynamicWorker", "spec.runPolicy.managedBy"]


def test_a_replaced_pod_restart_policy_is_reported_with_parse_errors_elsewhere() -> None:
    # Cross-field refusals are semantic checks: found even when other fields fail to parse.
    manifest = with_worker_template(tfjob({"enableDynamicWorker": True}, restartPolicy="Always"))
    manifest["spec"]["tfReplicaSpecs"]["PS"]["template"]["metadata"] = {"name": "mine"}
    paths = sorted(e.path for e in errors_of(manifest))
    assert paths == [
        "spec.enableDynamicWorker",
        "spec.tfReplicaSpecs.PS.template.metadata.name",
        "spec.tfReplicaSpecs.PS.template.spec.restartPolicy",
    ]
