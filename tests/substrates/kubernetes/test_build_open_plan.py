"""The Kubernetes objects of the core's open model: files, per-job access, exposed services.

A Plan declares them as data (as the MPI, Spark and Mars frameworks will); the same
reconcile-driven start the operator runs (:func:`render.start_actions`) turns them into
objects, which must be valid for every supported Kubernetes version and wired together:
pods mount the ConfigMap/Secret and run as the per-job ServiceAccount, the Role is bound to
it, the NodePort selects the right pods, and Secret values stay out of render output.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest

from kubemill.api import Job
from kubemill.frameworks import (
    AccessPlan,
    AccessRule,
    ExposedService,
    FilePlan,
    FileSet,
    HostListing,
    Plan,
    ServicePort,
)
from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.build import (
    CONTENT_DIGEST_ANNOTATION,
    UnsupportedPlanError,
    build_for_action,
)
from kubemill.substrates.kubernetes.render import (
    REDACTED_ANNOTATION,
    plan_on_kubernetes,
    redact,
    start_actions,
)
from support.manifest_checks import k8s_errors

JOB = """
apiVersion: kubemill.dev/v1
kind: PyTorchJob
metadata: {name: open, namespace: team}
spec:
  pytorchReplicaSpecs:
    Master:
      template: {spec: {containers: [{name: pytorch, image: img, command: [python]}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: pytorch, image: img, command: [python]}]}}
"""


def open_plan(job: Job) -> Plan:
    plan = plan_on_kubernetes(job)
    replicas = tuple(
        dataclasses.replace(r, stage=1 if r.replica_type == "Master" else 0) for r in plan.replicas
    )
    return dataclasses.replace(
        plan,
        replicas=replicas,
        files=(
            FileSet(
                "open-config",
                (
                    FilePlan("hostfile", "open-worker-0 slots=1\nopen-worker-1 slots=1\n"),
                    FilePlan(
                        "discover_hosts.sh",
                        mode=0o755,
                        listing=HostListing("Worker", "echo {host}", header="#!/bin/sh"),
                    ),
                ),
                mount_path="/etc/mpi",
                replica_types=("Master",),
            ),
            FileSet(
                "open-ssh",
                (FilePlan("id_rsa", "-----BEGIN KEY-----\nsecret\n", mode=0o600),),
                mount_path="/root/.ssh",
                secret=True,
            ),
        ),
        access=AccessPlan(
            "open-launcher",
            (AccessRule(("",), ("pods",), ("get", "list", "watch")),),
            replica_types=("Master",),
        ),
        exposed=(
            ExposedService(
                "open-ui",
                "Master",
                (ServicePort("ui", 80, 8265, node_port=30265),),
                type="NodePort",
                index=0,
            ),
        ),
    )


@pytest.fixture
def objects() -> list[dict[str, Any]]:
    job = load_one(JOB)
    plan = open_plan(job)
    built = [build_for_action(job, plan, a) for a in start_actions(job, plan, gang=None)]
    return [b for b in built if b is not None]


def by(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(
        f"no {kind}/{name} among {[(o['kind'], o['metadata']['name']) for o in objects]}"
    )


def test_every_object_is_valid_kubernetes(objects: list[dict[str, Any]]) -> None:
    problems = [e for obj in objects for e in k8s_errors(obj)]
    assert problems == []


def test_files_and_access_come_before_the_pods_that_need_them(
    objects: list[dict[str, Any]],
) -> None:
    kinds = [o["kind"] for o in objects]
    first_pod = kinds.index("Pod")
    for kind in ("ConfigMap", "Secret", "ServiceAccount", "Role", "RoleBinding"):
        assert kinds.index(kind) < first_pod, kind
    # Each object once: the listing's rewrite replaces the first content, not a second copy.
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(names) == len(set(names))


def test_the_config_map_holds_the_settled_listing_and_its_digest(
    objects: list[dict[str, Any]],
) -> None:
    config = by(objects, "ConfigMap", "open-config")
    assert config["data"]["discover_hosts.sh"] == (
        "#!/bin/sh\necho open-worker-0.team.svc\necho open-worker-1.team.svc\n"
    )
    assert CONTENT_DIGEST_ANNOTATION in config["metadata"]["annotations"]
    assert config["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"


def test_pods_mount_their_file_sets_and_run_as_the_jobs_account(
    objects: list[dict[str, Any]],
) -> None:
    master = by(objects, "Pod", "open-master-0")["spec"]
    worker = by(objects, "Pod", "open-worker-0")["spec"]
    assert master["serviceAccountName"] == "open-launcher"
    assert "serviceAccountName" not in worker
    mounts = {m["mountPath"]: m for m in master["containers"][0]["volumeMounts"]}
    assert set(mounts) == {"/etc/mpi", "/root/.ssh"}
    volumes = {v["name"]: v for v in master["volumes"]}
    config = volumes[mounts["/etc/mpi"]["name"]]["configMap"]
    assert config["name"] == "open-config"
    assert {i["key"]: i["mode"] for i in config["items"]} == {
        "hostfile": 0o644,
        "discover_hosts.sh": 0o755,
    }
    assert volumes[mounts["/root/.ssh"]["name"]]["secret"]["secretName"] == "open-ssh"
    # The worker gets the key set (every replica) but not the launcher-only config.
    assert [m["mountPath"] for m in worker["containers"][0]["volumeMounts"]] == ["/root/.ssh"]


def test_the_role_is_bound_to_the_jobs_account(objects: list[dict[str, Any]]) -> None:
    role = by(objects, "Role", "open-launcher")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    binding = by(objects, "RoleBinding", "open-launcher")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "open-launcher",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "open-launcher", "namespace": "team"}
    ]


def test_the_node_port_selects_the_master(objects: list[dict[str, Any]]) -> None:
    service = by(objects, "Service", "open-ui")["spec"]
    assert service["type"] == "NodePort"
    assert service["ports"] == [{"name": "ui", "port": 80, "targetPort": 8265, "nodePort": 30265}]
    master_labels = by(objects, "Pod", "open-master-0")["metadata"]["labels"]
    assert all(master_labels[k] == v for k, v in service["selector"].items())
    worker_labels = by(objects, "Pod", "open-worker-0")["metadata"]["labels"]
    assert not all(worker_labels.get(k) == v for k, v in service["selector"].items())


def test_secret_values_are_redacted_unless_asked(objects: list[dict[str, Any]]) -> None:
    secret = by(objects, "Secret", "open-ssh")
    assert base64.b64decode(secret["data"]["id_rsa"]).decode() == "-----BEGIN KEY-----\nsecret\n"
    shown = redact(secret)
    assert shown["data"] == {"id_rsa": ""}
    assert REDACTED_ANNOTATION in shown["metadata"]["annotations"]
    assert "secret" not in repr(shown["data"]) and "BEGIN" not in repr(shown)
    assert k8s_errors(shown) == []
    config = by(objects, "ConfigMap", "open-config")
    assert redact(config) is config


def test_an_exposed_service_for_a_missing_replica_type_is_refused() -> None:
    job = load_one(JOB)
    plan = dataclasses.replace(
        plan_on_kubernetes(job),
        exposed=(ExposedService("open-x", "Driver", (ServicePort("ui", 80, 80),)),),
    )
    actions = start_actions(job, plan, gang=None)
    service = next(a for a in actions if getattr(a, "name", "") == "open-x")
    with pytest.raises(UnsupportedPlanError, match="Driver"):
        build_for_action(job, plan, service)
