"""A job pod's progress sidecar as ``render`` (and so the operator) builds it: the file in an
``emptyDir``, a projected token of the kubemill audience for the sidecar only, a native
sidecar of the operator's image; valid for Kubernetes 1.29+ on every manifest, nothing for a
service cluster, and no secret shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from samples import pytorchjob

from kubemill.api import Job
from kubemill.kinds import is_controller, load_one
from kubemill.progress import FORWARD_AUDIENCE, PROGRESS_FILE_ENV
from kubemill.sdk.manifests import load_path
from kubemill.substrates.kubernetes.build import Owner, build_pod
from kubemill.substrates.kubernetes.progress import (
    DIRECTORY,
    FORWARDER,
    REPORTS_FILE,
    SIDECAR,
    TOKEN_SECONDS,
    TOKEN_VOLUME,
    VOLUME,
    ProgressSidecar,
)
from kubemill.substrates.kubernetes.render import (
    REDACTED_ANNOTATION,
    plan_on_kubernetes,
    render_job,
)
from support.manifest_checks import ROOT, job_manifest_files, k8s_errors, rel

SIDECAR_OF = ProgressSidecar.in_cluster(
    "registry.example/kubemill-operator:1", service="kubemill-operator", namespace="ops", port=8082
)
URL = "http://kubemill-operator.ops.svc:8082/progress"


def _pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "Pod"]


def _forwarder(pod: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in pod["spec"].get("initContainers", []) if c["name"] == SIDECAR]
    return found


def _arg(container: dict[str, Any], name: str) -> str:
    args: list[str] = container["args"]
    return args[args.index(name) + 1]


@pytest.mark.parametrize("path", [pytest.param(p, id=rel(p)) for p in job_manifest_files()])
def test_every_manifest_renders_valid_pods_with_the_sidecar(path: Path) -> None:
    for job in load_path(path):
        objects = render_job(job, progress=SIDECAR_OF)
        # (A schedule's render starts with its run, a kind of kubemill's: test_render_job.)
        built_in = [o for o in objects if not o["apiVersion"].startswith("kubemill.dev/")]
        assert [e for o in built_in for e in k8s_errors(o)] == []
        for pod in _pods(objects):
            forwarder = _forwarder(pod)
            assert _arg(forwarder, "--name") == pod["metadata"]["ownerReferences"][0]["name"]
        if not is_controller(job.KIND) and plan_on_kubernetes(job).service_cluster is not None:
            # A service cluster (MarsCluster) has no program whose progress is reported.
            assert SIDECAR not in str(objects)


def test_the_replicas_container_writes_the_file_the_sidecar_reads_with_its_own_token() -> None:
    job = load_one(pytorchjob(namespace="team-a"))
    (pod, *_) = _pods(render_job(job, progress=SIDECAR_OF))
    spec = pod["spec"]
    main, other = spec["containers"]
    assert PROGRESS_FILE_ENV not in str(other)  # the template's own sidecar: not the replica
    forwarder = _forwarder(pod)
    assert forwarder["restartPolicy"] == "Always"  # native: starts first, stopped after main
    assert forwarder["image"] == "registry.example/kubemill-operator:1"
    assert forwarder["command"] == list(FORWARDER)
    assert forwarder["args"] == [
        "--forward", URL,
        "--token-file", "/var/run/kubemill/progress-token/token",
        "--file", REPORTS_FILE,
        "--api-version", "kubemill.dev/v1",
        "--kind", "PyTorchJob",
        "--namespace", "team-a",
        "--name", "ddp",
    ]  # fmt: skip
    assert forwarder["resources"]["limits"]["memory"] == "64Mi"
    assert forwarder["securityContext"]["readOnlyRootFilesystem"] is True
    assert forwarder["securityContext"]["allowPrivilegeEscalation"] is False
    assert main["env"][-1] == {"name": PROGRESS_FILE_ENV, "value": REPORTS_FILE}
    assert {"name": VOLUME, "mountPath": DIRECTORY} in main["volumeMounts"]
    mounts = {m["name"]: m for m in forwarder["volumeMounts"]}
    assert mounts[VOLUME]["readOnly"] is True
    assert TOKEN_VOLUME not in {m["name"] for m in main["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[VOLUME]
    assert volumes[TOKEN_VOLUME]["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "audience": FORWARD_AUDIENCE,
                "expirationSeconds": TOKEN_SECONDS,
                "path": "token",
            }
        }
    ]


def test_the_templates_own_init_containers_and_variable_come_first() -> None:
    doc = pytorchjob()
    template = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    template["spec"]["initContainers"] = [{"name": "fetch", "image": "busybox"}]
    template["spec"]["containers"][0]["env"] = [{"name": PROGRESS_FILE_ENV, "value": "/x"}]
    (pod, *_) = _pods(render_job(load_one(doc), progress=SIDECAR_OF))
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["fetch", SIDECAR]
    env = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == PROGRESS_FILE_ENV]
    # Kubernetes takes the last of a repeated variable: the file the sidecar reads.
    assert env[-1] == {"name": PROGRESS_FILE_ENV, "value": REPORTS_FILE}


def test_without_an_endpoint_pods_get_nothing_of_it() -> None:
    for pod in _pods(render_job(load_one(pytorchjob()))):
        text = str(pod)
        assert SIDECAR not in text
        assert PROGRESS_FILE_ENV not in text


def test_a_job_read_from_an_upstream_group_is_named_as_it_is_stored() -> None:
    job: Job = load_one(pytorchjob())
    plan = plan_on_kubernetes(job)
    owner = Owner.of(job, api_version="kubeflow.org/v1")
    pod = build_pod(job, plan.replicas[0], owner=owner, plan=plan, progress=SIDECAR_OF)
    assert _arg(_forwarder(pod), "--api-version") == "kubeflow.org/v1"


def test_no_secret_is_shown() -> None:
    """The pod carries no credential (the kubelet mounts the token), and a job's Secrets
    (an MPI TrainJob's SSH key) are still redacted."""
    (path,) = [p for p in job_manifest_files() if p.parts[-2:] == ("trainjob", "mpi.yaml")]
    assert path.is_relative_to(ROOT)
    (job,) = load_path(path)
    objects = render_job(job, progress=SIDECAR_OF)
    secrets = [o for o in objects if o["kind"] == "Secret"]
    assert secrets
    for secret in secrets:
        assert REDACTED_ANNOTATION in secret["metadata"]["annotations"]
        assert set(secret["data"].values()) == {""}
    for pod in _pods(objects):
        forwarder = _forwarder(pod)
        assert "env" not in forwarder  # nothing handed over but paths and names
        assert all(
            "token" not in a or a.startswith("/") or a == "--token-file" for a in forwarder["args"]
        )
