"""`kubemill render`: what the operator creates at start, valid for Kubernetes 1.29+."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from samples import elastic_pytorchjob, pytorchjob, tfjob

from kubemill.api import Job
from kubemill.engines.spark.api.scheduled import ScheduledSparkApplication
from kubemill.kinds import crds, load_one
from kubemill.sdk.manifests import load_path
from kubemill.substrates.kubernetes.render import dump_yaml, plan_on_kubernetes, render_job
from support.manifest_checks import K8S_VERSIONS, crd_validator, job_manifest_files, k8s_errors, rel

GANGS = (None, "volcano", "scheduler-plugins")

# The PodGroup CRDs are not in the official schemas: their spec fields, from the volcano
# (scheduling.volcano.sh/v1beta1) and scheduler-plugins (scheduling.x-k8s.io/v1alpha1) CRDs.
_QUANTITIES = {"type": "object", "additionalProperties": {"type": ["string", "integer"]}}
_META = {
    "type": "object",
    "required": ["name", "namespace", "ownerReferences"],
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
}
POD_GROUP_SCHEMAS = {
    "scheduling.volcano.sh/v1beta1": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "kind": {"const": "PodGroup"},
            "metadata": _META,
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["minMember"],
                "properties": {
                    "minMember": {"type": "integer", "minimum": 0},
                    "minResources": _QUANTITIES,
                    "minTaskMember": {"type": "object"},
                    "priorityClassName": {"type": "string"},
                    "queue": {"type": "string"},
                },
            },
        },
    },
    "scheduling.x-k8s.io/v1alpha1": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "kind": {"const": "PodGroup"},
            "metadata": _META,
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["minMember"],
                "properties": {
                    "minMember": {"type": "integer", "minimum": 0},
                    "minResources": _QUANTITIES,
                    "scheduleTimeoutSeconds": {"type": "integer"},
                },
            },
        },
    },
}


def object_errors(obj: dict[str, Any]) -> list[str]:
    if obj["kind"] == "PodGroup":
        schema = POD_GROUP_SCHEMAS[obj["apiVersion"]]
        return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)]
    return k8s_errors(obj)


def sample_jobs() -> list[Any]:
    jobs = [
        pytest.param(tfjob(), id="sample-tfjob"),
        pytest.param(pytorchjob(), id="sample-pytorchjob"),
        pytest.param(elastic_pytorchjob(), id="sample-elastic"),
    ]
    return jobs


def repository_jobs() -> list[Any]:
    params = []
    for path in job_manifest_files():
        params.append(pytest.param(path, id=rel(path)))
    return params


@pytest.mark.parametrize("gang", GANGS)
@pytest.mark.parametrize("doc", sample_jobs())
def test_rendered_sample_objects_validate(doc: dict[str, Any], gang: str | None) -> None:
    objects = render_job(load_one(doc), gang_scheduler=gang)
    assert objects
    assert [e for o in objects for e in object_errors(o)] == []


@pytest.mark.parametrize("gang", GANGS)
@pytest.mark.parametrize("path", repository_jobs())
def test_rendered_repository_manifests_validate(path: Path, gang: str | None) -> None:
    jobs: list[Job] = load_path(path)
    for job in jobs:
        objects = render_job(job, gang_scheduler=gang)
        if isinstance(job, ScheduledSparkApplication):
            # Its next run, valid for its CRD, then that run's objects.
            run, *objects = objects
            (crd,) = (c for c in crds() if c["spec"]["names"]["kind"] == run["kind"])
            assert [e.message for e in crd_validator(crd).iter_errors(run)] == []
            job = load_one(run)
        # Foreign replicas (a Spark driver's executors) are created by a replica, not kubemill.
        plan = plan_on_kubernetes(job)
        foreign = {f.replica_type for f in plan.foreign}
        replicas = sum(job.replica_count(t) for t in job.replica_specs if t not in foreign)
        if plan.service_cluster is not None:
            # A service cluster's pods are its Deployments' (a MarsCluster): no PodGroup.
            deployed = sum(o["spec"]["replicas"] for o in objects if o["kind"] == "Deployment")
            assert (deployed, any(o["kind"] in ("Pod", "PodGroup") for o in objects)) == (
                replicas,
                False,
            )
        else:
            # A replica run through a child controller is its batch/v1 Job (a RayJob's
            # submitter), which makes the pod.
            assert sum(o["kind"] in ("Pod", "Job") for o in objects) == replicas
            assert sum(o["kind"] == "PodGroup" for o in objects) == (gang is not None)
        assert [e for o in objects for e in object_errors(o)] == []


def test_every_replica_gets_a_pod_and_a_service() -> None:
    objects = render_job(load_one(tfjob()))
    pods = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Pod")
    services = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Service")
    assert pods == services == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]


def test_namespace_override_moves_objects_and_addresses() -> None:
    job = load_one(tfjob(namespace="team-a"))
    objects = render_job(job, namespace="prod")
    assert {o["metadata"]["namespace"] for o in objects} == {"prod"}
    pod = next(o for o in objects if o["kind"] == "Pod")
    tf_config = next(
        e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "TF_CONFIG"
    )
    assert "mnist-ps-0.prod.svc:2222" in tf_config
    assert "team-a" not in tf_config
    assert job.namespace == "team-a"  # the caller's job is untouched


def test_default_namespace_when_the_manifest_has_none() -> None:
    doc = pytorchjob()
    del doc["metadata"]["namespace"]
    assert {o["metadata"]["namespace"] for o in render_job(load_one(doc))} == {"default"}


def test_suspended_job_renders_nothing() -> None:
    doc = tfjob()
    doc["spec"]["runPolicy"]["suspend"] = True
    assert render_job(load_one(doc)) == []


def test_render_is_deterministic() -> None:
    job = load_one(tfjob())
    assert render_job(job, gang_scheduler="volcano") == render_job(job, gang_scheduler="volcano")


def test_dump_yaml_is_a_multi_document_stream_that_round_trips() -> None:
    objects = render_job(load_one(tfjob()), gang_scheduler="volcano")
    stream = io.StringIO()
    text = dump_yaml(objects, stream)
    assert stream.getvalue() == text
    assert text.startswith("---\n")
    assert text.count("\n---\n") == len(objects) - 1
    assert list(yaml.safe_load_all(text)) == objects
    # Keys stay in builder order (apiVersion, kind, metadata, spec), as kubectl shows them.
    assert text.splitlines()[1:3] == ["apiVersion: scheduling.volcano.sh/v1beta1", "kind: PodGroup"]


def test_dump_yaml_writes_multiline_strings_as_blocks() -> None:
    text = dump_yaml([{"data": {"script": "line one\nline two\n"}}])
    assert "script: |\n    line one\n    line two\n" in text
    assert list(yaml.safe_load_all(text)) == [{"data": {"script": "line one\nline two\n"}}]


def test_cached_validator_agrees_with_kubernetes_validate() -> None:
    """The cached validator of the tests says what kubernetes-validate says."""
    good = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"clusterIP": "None"},
    }
    bad = {**good, "spec": {"clusterIP": "None", "portz": []}}
    assert k8s_errors(good) == []
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(good, version, strict=True)
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(bad, version, strict=True)
    assert len(k8s_errors(bad)) == len(K8S_VERSIONS)


@pytest.mark.parametrize("gang", GANGS)
@pytest.mark.parametrize("doc", sample_jobs())
def test_rendered_objects_share_nothing(doc: dict[str, Any], gang: str | None) -> None:
    # The CLI may dump with plain yaml.safe_dump_all; shared dicts would become anchors.
    assert "&id" not in yaml.safe_dump_all(render_job(load_one(doc), gang_scheduler=gang))
