"""The runtimes' CRDs (``trainer.kubeflow.org/v1alpha1`` TrainingRuntime, namespaced, and
ClusterTrainingRuntime, cluster-wide): structural schemas the API server accepts, every
default runtime valid for them, and what the models refuse refused by them too."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubemill.api.crd import structural_errors
from kubemill.engines.trainer.api.runtime_crds import default_runtime_objects, runtime_crds
from support.manifest_checks import crd_validator, k8s_errors


def crd_of(kind: str) -> dict[str, Any]:
    (crd,) = (c for c in runtime_crds() if c["spec"]["names"]["kind"] == kind)
    return crd


def test_the_crds_are_structural_and_scoped_as_upstreams() -> None:
    crds = runtime_crds()
    assert [(c["metadata"]["name"], c["spec"]["scope"]) for c in crds] == [
        ("trainingruntimes.trainer.kubeflow.org", "Namespaced"),
        ("clustertrainingruntimes.trainer.kubeflow.org", "Cluster"),
    ]
    for crd in crds:
        assert [e for e in k8s_errors(crd)] == []
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1alpha1"
        assert structural_errors(version["schema"]["openAPIV3Schema"]) == []


@pytest.mark.parametrize("runtime", default_runtime_objects(), ids=lambda r: r["metadata"]["name"])
def test_each_default_runtime_is_valid_for_the_crd(runtime: dict[str, Any]) -> None:
    validator = crd_validator(crd_of("ClusterTrainingRuntime"))
    assert [e.message for e in validator.iter_errors(runtime)] == []
    assert runtime["metadata"]["labels"]["app.kubernetes.io/part-of"] == "kubemill"
    # The namespaced kind has the same schema: an administrator may copy one into a namespace.
    namespaced = {**runtime, "kind": "TrainingRuntime"}
    assert [
        e.message for e in crd_validator(crd_of("TrainingRuntime")).iter_errors(namespaced)
    ] == []


def test_the_crd_refuses_what_the_model_refuses() -> None:
    (runtime, *_) = default_runtime_objects()
    validator = crd_validator(crd_of("ClusterTrainingRuntime"))
    bad = copy.deepcopy(runtime)
    bad["spec"]["mlPolicy"]["numNodes"] = 0
    assert [e.message for e in validator.iter_errors(bad)] != []
    unknown = copy.deepcopy(runtime)
    unknown["spec"]["mlPolicy"]["horovod"] = {}
    assert [e.message for e in validator.iter_errors(unknown)] != []
