"""The MPIJob CRD generated from the model: valid for Kubernetes, structural, named as
upstream's, and as strict as the loader on the fields MPIJob adds.

The schema checks are the ones tests/substrates/kubernetes uses for the registered kinds
(:mod:`support.manifest_checks`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import KindTable
from kubemill.api.crd import build_crd, structural_errors
from kubemill.api.loader import load_one
from kubemill.engines.mpi.api import MPIJOB
from kubemill.engines.pytorch.api import PYTORCHJOB
from kubemill.engines.tensorflow.api import TFJOB
from support import manifest_checks

TESTS = Path(__file__).parents[2]
MANIFESTS = [
    TESTS.parent / "examples" / "seed" / "mpijob-v1alpha2.yaml",
    *sorted((TESTS / "manifests" / "mpi" / "good").glob("*.yaml")),
]
KINDS = KindTable([TFJOB, PYTORCHJOB, MPIJOB])
CRD = build_crd(MPIJOB)
SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_crd_names() -> None:
    assert CRD["metadata"]["name"] == "mpijobs.kubemill.dev"
    assert CRD["spec"]["group"] == "kubemill.dev"
    assert CRD["spec"]["names"] == {
        "kind": "MPIJob",
        "listKind": "MPIJobList",
        "plural": "mpijobs",
        "singular": "mpijob",
        "shortNames": ["mpij"],
        "categories": ["kubemill", "all"],
    }
    assert MPIJOB.upstream_groups == (("kubeflow.org", "v2beta1"),)
    assert set(KINDS.versions_of("MPIJob")) == {
        "kubemill.dev/v1",
        "kubeflow.org/v2beta1",
        "kubeflow.org/v1",
        "kubeflow.org/v1alpha2",
    }


def test_crd_passes_kubernetes_validate_strict() -> None:
    assert manifest_checks.k8s_errors(CRD) == []


def test_schema_is_structural() -> None:
    assert structural_errors(SCHEMA) == []


def test_schema_of_the_mpi_fields() -> None:
    spec = SCHEMA["properties"]["spec"]["properties"]
    assert spec["mpiImplementation"]["enum"] == ["OpenMPI", "Intel", "MPICH"]
    assert spec["launcherCreationPolicy"]["enum"] == ["AtStartup", "WaitForWorkersReady"]
    assert spec["remoteShell"]["enum"] == ["exec", "ssh"]
    assert spec["slotsPerWorker"] == {"type": "integer", "minimum": 1}
    assert spec["runLauncherAsWorker"] == {"type": "boolean"}
    assert spec["mpiReplicaSpecs"]["minProperties"] == 1
    replica = spec["mpiReplicaSpecs"]["additionalProperties"]
    assert replica["properties"]["replicas"]["type"] == "integer"


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in MANIFESTS])
def test_schema_accepts_the_manifests_loaded(path: Path) -> None:
    validator = manifest_checks.crd_validator(CRD)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    wire = load_one(doc, kinds=KINDS).to_wire()
    assert [f"{e.json_path}: {e.message}" for e in validator.iter_errors(wire)] == []
    if doc["apiVersion"] == "kubeflow.org/v2beta1":
        # v2beta1 is kubemill.dev/v1's schema: the manifest as written fits it too.
        as_ours = {**doc, "apiVersion": "kubemill.dev/v1"}
        assert [e.message for e in validator.iter_errors(as_ours)] == []


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("slotsPerWorker", 0, ["spec", "slotsPerWorker"]),
        ("mpiImplementation", "IntelMPI", ["spec", "mpiImplementation"]),
        ("launcherCreationPolicy", "Later", ["spec", "launcherCreationPolicy"]),
        ("remoteShell", "rsh", ["spec", "remoteShell"]),
        ("sshAuthMountPath", ".ssh", ["spec", "sshAuthMountPath"]),
        # v1alpha2's name is not a field of the current version: an unknown field of spec.
        ("mpiDistribution", "OpenMPI", ["spec"]),
    ],
)
def test_schema_refuses_what_the_loader_refuses(field: str, value: Any, where: list[str]) -> None:
    validator = manifest_checks.crd_validator(CRD)
    doc = yaml.safe_load(MANIFESTS[-1].read_text(encoding="utf-8"))
    wire = load_one(doc, kinds=KINDS).to_wire()
    assert list(validator.iter_errors(wire)) == []
    wire["spec"][field] = value
    errors = list(validator.iter_errors(wire))
    assert [list(e.absolute_path) for e in errors] == [where], [e.message for e in errors]
