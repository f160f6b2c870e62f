"""The SparkApplication and ScheduledSparkApplication CRDs generated from the models: valid
for Kubernetes, structural, named and printed as upstream's, and accepting every manifest
the loader accepts (as loaded, and as written under our own group).

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
from kubemill.api.kinds import KindApi
from kubemill.api.loader import load_one
from kubemill.engines.spark.api.application import SPARKAPPLICATION
from kubemill.engines.spark.api.scheduled import SCHEDULEDSPARKAPPLICATION
from support import manifest_checks

TESTS = Path(__file__).parents[2]
MANIFESTS = sorted((TESTS / "manifests" / "spark").glob("*.yaml"))
KINDS = KindTable([SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION])
ENTRIES = {
    "SparkApplication": SPARKAPPLICATION,
    "ScheduledSparkApplication": SCHEDULEDSPARKAPPLICATION,
}


def _schema(entry: KindApi) -> dict[str, Any]:
    schema = build_crd(entry)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


@pytest.mark.parametrize("entry", [SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION], ids=str)
def test_crd_is_valid_and_structural(entry: KindApi) -> None:
    crd = build_crd(entry)
    assert manifest_checks.k8s_errors(crd) == []
    assert structural_errors(_schema(entry)) == []


def test_crd_names_and_columns_as_upstream() -> None:
    app = build_crd(SPARKAPPLICATION)
    assert app["metadata"]["name"] == "sparkapplications.kubemill.dev"
    assert app["spec"]["names"]["plural"] == "sparkapplications"
    assert app["spec"]["names"]["shortNames"] == ["sparkapp"]
    version = app["spec"]["versions"][0]
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Status", ".status.applicationState.state"),
        ("Attempts", ".status.executionAttempts"),
        ("Start", ".status.lastSubmissionAttemptTime"),
        ("Finish", ".status.terminationTime"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    assert "status" in version["subresources"]
    scheduled = build_crd(SCHEDULEDSPARKAPPLICATION)
    assert scheduled["metadata"]["name"] == "scheduledsparkapplications.kubemill.dev"
    assert scheduled["spec"]["names"]["shortNames"] == ["scheduledsparkapp"]
    columns = scheduled["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == [
        "Schedule",
        "TimeZone",
        "Suspend",
        "Last Run",
        "Last Run Name",
        "Age",
    ]
    for entry in (SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION):
        assert entry.upstream_groups == (("sparkoperator.k8s.io", "v1beta2"),)
        assert set(KINDS.versions_of(entry.kind)) == {
            "kubemill.dev/v1",
            "sparkoperator.k8s.io/v1beta2",
        }


def test_schema_of_the_spark_fields() -> None:
    spec = _schema(SPARKAPPLICATION)["properties"]["spec"]
    assert spec["required"] == ["type", "sparkVersion", "mainApplicationFile"]
    fields = spec["properties"]
    assert fields["type"]["enum"] == ["Java", "Scala", "Python", "R"]
    assert fields["mode"]["enum"] == ["cluster", "client", "in-cluster-client"]
    assert fields["sparkUIOptions"]["properties"]["serviceType"]["enum"] == [
        "ClusterIP",
        "NodePort",
        "LoadBalancer",
    ]
    assert fields["driver"]["properties"]["cores"] == {"type": "integer", "minimum": 1}
    assert fields["driver"]["properties"]["template"]["x-kubernetes-preserve-unknown-fields"]
    assert fields["pythonVersion"] == {"x-kubernetes-int-or-string": True}
    restart = fields["restartPolicy"]["properties"]
    assert restart["onFailureRetryInterval"]["minimum"] == 1
    status = _schema(SPARKAPPLICATION)["properties"]["status"]["properties"]
    assert {"sparkApplicationId", "submissionID", "driverInfo", "applicationState"} <= set(status)
    assert "" in status["applicationState"]["properties"]["state"]["enum"]
    assert "webUIServiceName" in status["driverInfo"]["properties"]
    scheduled = _schema(SCHEDULEDSPARKAPPLICATION)["properties"]["spec"]
    assert scheduled["required"] == ["schedule", "template"]
    template = scheduled["properties"]["template"]
    assert template["required"] == ["type", "sparkVersion", "mainApplicationFile"]
    assert scheduled["properties"]["concurrencyPolicy"]["enum"] == ["Allow", "Forbid", "Replace"]


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in MANIFESTS])
def test_schema_accepts_the_manifests_loaded(path: Path) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    validator = manifest_checks.crd_validator(build_crd(ENTRIES[doc["kind"]]))
    wire = load_one(doc, kinds=KINDS).to_wire()
    assert [f"{e.json_path}: {e.message}" for e in validator.iter_errors(wire)] == []
    # v1beta2 is kubemill.dev/v1's schema: the manifest as written fits it too.
    as_ours = {**doc, "apiVersion": "kubemill.dev/v1"}
    assert [f"{e.json_path}: {e.message}" for e in validator.iter_errors(as_ours)] == []


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("type", "Go", ["spec", "type"]),
        ("mode", "local", ["spec", "mode"]),
        ("timeToLiveSeconds", -1, ["spec", "timeToLiveSeconds"]),
        ("imagePullPolicy", "Sometimes", ["spec", "imagePullPolicy"]),
        (
            "sparkConf",
            {"spark.executor.instances": 2},
            ["spec", "sparkConf", "spark.executor.instances"],
        ),
        ("failureRetry", 3, ["spec"]),
    ],
)
def test_schema_refuses_what_the_loader_refuses(field: str, value: Any, where: list[str]) -> None:
    validator = manifest_checks.crd_validator(build_crd(SPARKAPPLICATION))
    doc = yaml.safe_load((TESTS / "manifests" / "spark" / "full-v1beta2.yaml").read_text())
    wire = load_one(doc, kinds=KINDS).to_wire()
    wire["spec"][field] = value
    errors = list(validator.iter_errors(wire))
    assert [list(e.absolute_path) for e in errors] == [where], [e.message for e in errors]
