"""The CRDs generated from the api models: valid, structural, and as strict as the loader."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel
from samples import elastic_pytorchjob, pytorchjob, tfjob

from kubemill.api import Job, KindApi
from kubemill.api.crd import (
    SchemaError,
    build_crd,
    openapi_schema,
    structural_errors,
)
from kubemill.kinds import crds, kind_table, load_one
from support.manifest_checks import (
    crd_validator,
    job_documents,
    job_manifest_files,
    k8s_errors,
    rel,
)

CRDS = {c["spec"]["names"]["kind"]: c for c in crds()}


def schema_of(kind: str) -> dict[str, Any]:
    return CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def schema_at(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    """The schema node a simple `.a.b.c` path (map keys allowed) points at."""
    node = schema
    for part in json_path.strip(".").split("."):
        node = node["properties"][part] if "properties" in node else node["additionalProperties"]
    return node


def test_both_kinds_registered_with_expected_names() -> None:
    assert sorted(CRDS) == [
        "JAXJob",
        "MPIJob",
        "MarsCluster",
        "PaddleJob",
        "PyTorchJob",
        "RayCluster",
        "RayJob",
        "ScheduledSparkApplication",
        "SparkApplication",
        "TFJob",
        "TrainJob",
        "XGBoostJob",
    ]
    assert CRDS["TFJob"]["metadata"]["name"] == "tfjobs.kubemill.dev"
    assert CRDS["PyTorchJob"]["metadata"]["name"] == "pytorchjobs.kubemill.dev"
    for crd in CRDS.values():
        names = crd["spec"]["names"]
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        assert crd["spec"]["scope"] == "Namespaced"
        assert names["categories"] == ["kubemill", "all"]
        assert names["listKind"] == names["kind"] + "List"
        assert names["singular"] == names["kind"].lower()
    assert CRDS["TFJob"]["spec"]["names"]["shortNames"] == ["tfj"]
    assert CRDS["PyTorchJob"]["spec"]["names"]["shortNames"] == ["ptj"]


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_passes_kubernetes_validate_strict(kind: str) -> None:
    assert k8s_errors(CRDS[kind]) == []


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_schema_is_structural(kind: str) -> None:
    assert structural_errors(schema_of(kind)) == []


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_status_subresource_and_printer_columns(kind: str) -> None:
    version = CRDS[kind]["spec"]["versions"][0]
    assert version["subresources"]["status"] == {}
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert columns["Age"] == {
        "name": "Age",
        "type": "date",
        "jsonPath": ".metadata.creationTimestamp",
    }
    # The state column reads a field the status schema declares: the last condition, or
    # the spark-operator's applicationState.
    if kind == "SparkApplication":
        assert columns["Status"]["jsonPath"] == ".status.applicationState.state"
        state = schema_at(schema_of(kind), ".status.applicationState.state")
        assert "COMPLETED" in state["enum"]
    elif kind == "ScheduledSparkApplication":
        # Upstream's columns: the schedule and its last run (it has no conditions of its own).
        assert columns["Schedule"]["jsonPath"] == ".spec.schedule"
        assert columns["Last Run Name"]["jsonPath"] == ".status.lastRunName"
        assert "Scheduled" in schema_at(schema_of(kind), ".status.scheduleState")["enum"]
        return
    elif kind == "RayCluster":
        # KubeRay's columns: its state word, and the workers asked for and running.
        assert columns["Status"]["jsonPath"] == ".status.state"
        assert schema_at(schema_of(kind), ".status.state")["enum"] == [
            "ready",
            "suspended",
            "failed",
        ]
        assert columns["Desired Workers"]["jsonPath"] == ".status.desiredWorkerReplicas"
    elif kind == "RayJob":
        # KubeRay's columns: Ray's job status and the deployment's.
        assert columns["Job Status"]["jsonPath"] == ".status.jobStatus"
        assert "SUCCEEDED" in schema_at(schema_of(kind), ".status.jobStatus")["enum"]
        assert columns["Deployment Status"]["jsonPath"] == ".status.jobDeploymentStatus"
    else:
        assert columns["State"]["jsonPath"] == ".status.conditions[-1:].type"
    assert schema_at(schema_of(kind), ".status.conditions")["items"]["properties"]["type"]["enum"]


def test_pytorch_scale_subresource_points_at_declared_fields() -> None:
    scale = CRDS["PyTorchJob"]["spec"]["versions"][0]["subresources"]["scale"]
    assert scale == {
        "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }
    schema = schema_of("PyTorchJob")
    assert schema_at(schema, scale["specReplicasPath"])["type"] == "integer"
    assert schema_at(schema, scale["statusReplicasPath"])["type"] == "integer"
    assert schema_at(schema, scale["labelSelectorPath"])["type"] == "string"
    assert "scale" not in CRDS["TFJob"]["spec"]["versions"][0]["subresources"]


def test_schema_shapes() -> None:
    tf = schema_of("TFJob")
    assert tf["required"] == ["spec"]
    assert tf["properties"]["metadata"] == {"type": "object"}
    replica = schema_at(tf, ".spec.tfReplicaSpecs")["additionalProperties"]
    assert replica["properties"]["restartPolicy"]["enum"] == [
        "Always",
        "OnFailure",
        "Never",
        "ExitCode",
    ]
    container = replica["properties"]["template"]["properties"]["spec"]["properties"]["containers"]
    assert container["items"]["required"] == ["name"]
    assert container["items"]["properties"]["livenessProbe"] == {
        "x-kubernetes-preserve-unknown-fields": True
    }
    min_resources = schema_at(tf, ".spec.runPolicy.schedulingPolicy.minResources")
    assert min_resources["additionalProperties"] == {"x-kubernetes-int-or-string": True}
    assert schema_at(schema_of("PyTorchJob"), ".spec.nprocPerNode") == {
        "x-kubernetes-int-or-string": True
    }
    text = repr(tf)
    for leftover in ("$ref", "anyOf", "'title'", "'default'", "'null'"):
        assert leftover not in text


SAMPLES = [
    pytest.param(tfjob(), id="tfjob"),
    pytest.param(pytorchjob(), id="pytorchjob"),
    pytest.param(elastic_pytorchjob(), id="elastic-pytorchjob"),
]


@pytest.mark.parametrize("doc", SAMPLES)
def test_schema_accepts_sample_jobs_raw_and_loaded(doc: dict[str, Any]) -> None:
    validator = crd_validator(CRDS[doc["kind"]])
    assert [e.message for e in validator.iter_errors(doc)] == []
    wire = load_one(doc).to_wire()
    assert [e.message for e in validator.iter_errors(wire)] == []


MANIFESTS = [pytest.param(p, id=rel(p)) for p in job_manifest_files()]


@pytest.mark.parametrize("path", MANIFESTS)
def test_schema_accepts_repository_manifests(path: Path) -> None:
    docs = list(job_documents(path))
    for doc in docs:
        as_ours = {**doc, "apiVersion": "kubemill.dev/v1"}
        validator = crd_validator(CRDS[doc["kind"]])
        assert [f"{e.json_path}: {e.message}" for e in validator.iter_errors(as_ours)] == []
        loaded = load_one(doc).to_wire()
        assert [f"{e.json_path}: {e.message}" for e in validator.iter_errors(loaded)] == []


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


_DELETE = object()
W = "spec.tfReplicaSpecs.Worker"
C = f"{W}.template.spec.containers.0"


@pytest.mark.parametrize(
    ("path", "value", "json_path"),
    [
        pytest.param(
            f"{W}.replicas", "two", "$.spec.tfReplicaSpecs.Worker.replicas", id="replicas-str"
        ),
        pytest.param(
            f"{W}.replicas", -1, "$.spec.tfReplicaSpecs.Worker.replicas", id="replicas-neg"
        ),
        pytest.param(
            f"{W}.restartPolicy",
            "Sometimes",
            "$.spec.tfReplicaSpecs.Worker.restartPolicy",
            id="restart-enum",
        ),
        pytest.param(
            "spec.runPolicy.cleanPodPolicy",
            "Some",
            "$.spec.runPolicy.cleanPodPolicy",
            id="clean-enum",
        ),
        pytest.param(
            "spec.runPolicy.backoffLimit", "3", "$.spec.runPolicy.backoffLimit", id="backoff-str"
        ),
        pytest.param(
            f"{W}.template.spec.containers",
            {"name": "x"},
            "$.spec.tfReplicaSpecs.Worker.template.spec.containers",
            id="containers-not-list",
        ),
        pytest.param(
            f"{C}.command",
            "python train.py",
            "$.spec.tfReplicaSpecs.Worker.template.spec.containers[0].command",
            id="command-str",
        ),
        pytest.param(
            f"{C}.name",
            _DELETE,
            "$.spec.tfReplicaSpecs.Worker.template.spec.containers[0]",
            id="container-name-missing",
        ),
        pytest.param(
            f"{C}.imagePullPolicy",
            3,
            "$.spec.tfReplicaSpecs.Worker.template.spec.containers[0].imagePullPolicy",
            id="pull-policy-int",
        ),
        pytest.param(f"{W}.replicaz", 2, "$.spec.tfReplicaSpecs.Worker", id="unknown-field"),
        pytest.param("spec.tfReplicaSpecs", {}, "$.spec.tfReplicaSpecs", id="no-replica-types"),
        pytest.param("spec", _DELETE, "$", id="no-spec"),
        pytest.param(
            "status",
            {"conditions": [{"type": "Exploded"}]},
            "$.status.conditions[0].type",
            id="condition-type",
        ),
    ],
)
def test_schema_rejects_wrong_types(path: str, value: Any, json_path: str) -> None:
    errors = list(crd_validator(CRDS["TFJob"]).iter_errors(_set(tfjob(), path, value)))
    assert [e.json_path for e in errors] == [json_path]


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        pytest.param(2, True, id="int"),
        pytest.param("auto", True, id="auto"),
        pytest.param(2.5, False, id="float"),
        pytest.param(["2"], False, id="list"),
    ],
)
def test_nproc_per_node_is_int_or_string(value: Any, valid: bool) -> None:
    doc = _set(pytorchjob(), "spec.nprocPerNode", value)
    assert crd_validator(CRDS["PyTorchJob"]).is_valid(doc) is valid


# --- the generator and the structural checker themselves ------------------------------------


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        pytest.param(
            {"type": "object", "properties": {"a": {}}}, "a: type is required", id="no-type"
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "object", "additionalProperties": False}},
            },
            "must be a schema",
            id="additional-false",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
            "not allowed",
            id="anyof",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"$ref": "#/x"}}},
            "not allowed",
            id="ref",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "a": {
                        "type": "object",
                        "properties": {"b": {"type": "string"}},
                        "additionalProperties": {"type": "string"},
                    }
                },
            },
            "mutually exclusive",
            id="props-and-additional",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "array"}}},
            "items schema",
            id="array-no-items",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "string", "x-kubernetes-int-or-string": True}},
            },
            "must not have a type",
            id="int-or-string-typed",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "metadata": {"type": "object", "properties": {"x": {"type": "string"}}}
                },
            },
            "metadata",
            id="metadata-described",
        ),
        pytest.param(
            {"type": "object", "properties": {}, "required": ["spec"]},
            "not declared",
            id="required-undeclared",
        ),
    ],
)
def test_structural_checker_catches(schema: dict[str, Any], fragment: str) -> None:
    errors = structural_errors(schema)
    assert any(fragment in e for e in errors), errors


class _Pod(BaseModel):
    name: str


class _Blob(BaseModel):
    size: int


class _Union(Job):
    KIND: ClassVar[str] = "Weird"
    spec: _Pod | _Blob


def test_generator_refuses_unions_it_cannot_express() -> None:
    entry = KindApi(model=_Union, plural="weirds")
    with pytest.raises(SchemaError, match=r"spec: a union"):
        openapi_schema(entry)


class _NewSpec(BaseModel):
    workers: int = 1
    labels: dict[str, str] = {}
    size: str | int | None = None


class _NewKind(Job):
    KIND: ClassVar[str] = "NewKind"
    spec: _NewSpec = _NewSpec()


def test_a_new_kind_is_one_registry_entry() -> None:
    entry = KindApi(model=_NewKind, plural="newkinds", short_names=("nk",))
    crd = build_crd(entry)
    assert crd["metadata"]["name"] == "newkinds.kubemill.dev"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"] == {
        "workers": {"type": "integer"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "size": {"x-kubernetes-int-or-string": True},
    }
    assert k8s_errors(crd) == []
    assert _NewKind.KIND not in kind_table().kind_names()


def test_unknown_override_path_is_an_error() -> None:
    entry = KindApi(model=_NewKind, plural="xs", schema_overrides={"spec.nope": {"minimum": 1}})
    with pytest.raises(SchemaError, match=r"spec\.nope"):
        openapi_schema(entry)
