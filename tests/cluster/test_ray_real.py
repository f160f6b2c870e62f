"""RayCluster and RayJob through the real control plane (the Ray rows of test_kinds_real).

Each created three ways, as every kind there: by the SDK (``kubemill.dev/v1``), by ``kubectl
apply --server-side --validate=strict`` in ``kubemill.dev/v1`` and in KubeRay's ``ray.io/v1``
(served by ``--serve-upstream-groups``). The real API server accepts the object and every
child the operator creates (its ServiceAccount refused nothing), the real kube-scheduler binds
the pods, the node stand-in plays them, and the status goes through the status subresource.
Then suspend removes the pods and resume brings them back, and deleting the object lets the
real garbage collector take every child. In KubeRay's group: a worker killed is restarted
in place and counted, a patch of a group's replicas adds a worker; a submission mode kubemill
does not run is refused by the real server, the in-tree autoscaler by the operator's Event.

A RayJob's K8sJobMode submitter is a batch/v1 Job, as KubeRay's: the real Job controller of
the controller manager makes its pod from the template the operator wrote, the node stand-in
plays that pod (it runs no command: a test decides each container's exit, so nothing needs
Ray on this machine), and the Job's status decides the submitter's: the Job giving up after
its backoffLimit fails the RayJob with SubmissionFailed.

The node stand-in does not run Ray, so a RayJob's outcome (Ray's job API, which the operator
asks at the head pod's IP, a loopback address of the stand-in's where no Ray answers) is not
judged here: only what the real server must accept on the way to it.
tests/engines/ray/test_rayjob_local.py and test_rayjob_operator_ray.py judge real Ray jobs.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.engines.ray.api.scaling import worker_group_patch
from kubemill.kinds import load_one
from kubemill.sdk import JobClient
from support.control_plane import ControlPlane
from support.node import NodeStandIn
from support.real_kinds import (
    HOW,
    WAIT,
    Job,
    Kind,
    Seen,
    create,
    namespace_pods,
    owned_by,
    running,
    through_status_subresource,
    true,
)
from support.real_operator import RealOperator, run_kubemill
from support.waiting import eventually

pytestmark = pytest.mark.usefixtures("operator")

EXAMPLES = Path(__file__).parents[2] / "examples" / "ray"


def example(file: str, name: str) -> dict[str, Any]:
    """The example manifest in kubemill's group, named ``name``."""
    manifest: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text(encoding="utf-8"))
    manifest = copy.deepcopy(manifest)
    manifest["apiVersion"] = "kubemill.dev/v1"
    manifest["metadata"] = {"name": name}
    return manifest


RAY_CLUSTER = Kind(
    "RayCluster",
    lambda n: example("raycluster.yaml", n),
    "rayclusters",
    "ray.io/v1",
    3,
    (),
)
RAY_JOB = Kind(
    "RayJob",
    lambda n: example("rayjob-sum.yaml", n),
    "rayjobs",
    "ray.io/v1",
    4,
    (),
)
"""A head, two workers and the K8sJobMode submitter (the pod its Job makes)."""


def patch_suspend(client: JobClient, plane: ControlPlane, job: Job, value: bool) -> None:
    """Suspended or resumed as its creator would: the SDK, or a merge patch of ``spec.suspend``."""
    if job.api_version == "kubemill.dev/v1":
        (client.suspend if value else client.resume)(job.name)
        return
    plane.request(
        "PATCH",
        job.path,
        {"spec": {"suspend": value}},
        content_type="application/merge-patch+json",
    )


def suspend_resume_then_delete(
    plane: ControlPlane, node: NodeStandIn, job: Job, kind: Kind, suspended: str
) -> None:
    """Suspend: every pod goes, the object stays and its status says so (``suspended`` is
    ``field=value``); resume: new pods come back; delete: the garbage collector takes every
    child."""
    namespace = job.namespace
    client = JobClient("kubernetes", kubeconfig=str(plane.admin_kubeconfig), namespace=namespace)
    first = {p["metadata"]["uid"] for p in namespace_pods(plane, namespace).values()}
    patch_suspend(client, plane, job, True)
    eventually(lambda: not namespace_pods(plane, namespace), timeout=WAIT, what="the pods gone")
    field, value = suspended.split("=")
    eventually(
        lambda: job.get().get("status", {}).get(field) == value,
        timeout=WAIT,
        what=Seen(f"status.{field} {value}", job),
    )
    patch_suspend(client, plane, job, False)
    eventually(
        lambda: running(plane, node, namespace, kind.pods),
        timeout=WAIT,
        what=Seen("running again", job),
    )
    again = {p["metadata"]["uid"] for p in namespace_pods(plane, namespace).values()}
    assert not first & again
    uid = job.get()["metadata"]["uid"]
    children = owned_by(plane, namespace, uid)
    assert any(c.startswith("services/") for c in children), children
    plane.request("DELETE", job.path)
    eventually(
        lambda: not owned_by(plane, namespace, uid) and not namespace_pods(plane, namespace),
        timeout=WAIT,
        what=f"its children collected: {children}",
    )


@pytest.mark.parametrize("how", HOW)
def test_a_ray_cluster_is_provisioned_suspended_resumed_and_collected(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator, how: str
) -> None:
    namespace = control_plane.new_namespace()
    job = create(control_plane, namespace, RAY_CLUSTER, how, RAY_CLUSTER.manifest("rc"))
    eventually(
        lambda: running(control_plane, node, namespace, RAY_CLUSTER.pods),
        timeout=WAIT,
        what=Seen("the head and 2 workers running", job),
    )
    pods = namespace_pods(control_plane, namespace)
    assert set(pods) == {"rc-head-0", "rc-workers-0", "rc-workers-1"}
    # Bound by the real kube-scheduler (the node plays only pods bound to it).
    assert {p["spec"]["nodeName"] for p in pods.values()} == {control_plane.node}
    service = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services/rc-head-svc")
    assert {p["port"] for p in service["spec"]["ports"]} >= {6379, 8265, 10001}
    eventually(
        lambda: true(job.get(), "RayClusterProvisioned"),
        timeout=WAIT,
        what=Seen("RayClusterProvisioned", job),
    )
    ready = job.get()
    status = ready["status"]
    assert (status["state"], status["readyWorkerReplicas"], status["desiredWorkerReplicas"]) == (
        "ready",
        2,
        2,
    )
    assert true(ready, "HeadPodReady")
    assert status["endpoints"]["dashboard"] == "8265"
    assert through_status_subresource(ready, "conditions")
    assert not operator.failed_creates(namespace)
    suspend_resume_then_delete(control_plane, node, job, RAY_CLUSTER, "state=suspended")


@pytest.mark.parametrize("how", HOW)
def test_a_rayjob_brings_up_its_cluster_and_submitter_suspends_and_is_collected(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator, how: str
) -> None:
    namespace = control_plane.new_namespace()
    job = create(control_plane, namespace, RAY_JOB, how, RAY_JOB.manifest("rj"))
    # The head, then the workers once it is ready, then the submitter once every node is.
    eventually(
        lambda: running(control_plane, node, namespace, RAY_JOB.pods),
        timeout=WAIT,
        what=Seen("the head, 2 workers and the submitter running", job),
    )
    pods = namespace_pods(control_plane, namespace)
    nodes = {"rj-head-0", "rj-workers-0", "rj-workers-1"}
    assert nodes < set(pods)
    assert {p["spec"]["nodeName"] for p in pods.values()} == {control_plane.node}
    # The submitter: the Job the operator created, owned by the RayJob, and its pod the real
    # Job controller made from the template.
    submitter_job = control_plane.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/rj")
    uid = job.get()["metadata"]["uid"]
    assert submitter_job["metadata"]["ownerReferences"][0]["uid"] == uid
    assert submitter_job["spec"]["backoffLimit"] == 2
    (submitter,) = [pods[n] for n in set(pods) - nodes]
    assert submitter["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert submitter["metadata"]["ownerReferences"][0]["name"] == "rj"
    command = submitter["spec"]["containers"][0]["command"]
    assert f"http://rj-head-svc.{namespace}.svc.cluster.local:8265" in command
    eventually(
        lambda: true(job.get(), "Running"),
        timeout=WAIT,
        what=Seen("Running (the Job's pod ready)", job),
    )
    # The SDK/CLI find it in either group (KubeRay's for kubectl-upstream).
    the_client_reads_the_submitter_from_its_job(
        control_plane, node, namespace, nodes, str(submitter["metadata"]["name"])
    )
    control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services/rj-head-svc")
    # No Ray answers at the head pod's IP here: the deployment is as far as it goes.
    eventually(
        lambda: job.get().get("status", {}).get("jobDeploymentStatus"),
        timeout=WAIT,
        what=Seen("a jobDeploymentStatus", job),
    )
    started = job.get()
    status = started["status"]
    assert status["rayClusterName"] == "rj"
    assert status["dashboardURL"] == f"rj-head-svc.{namespace}.svc.cluster.local:8265"
    assert through_status_subresource(started, "jobDeploymentStatus")
    assert not operator.failed_creates(namespace)
    suspend_resume_then_delete(control_plane, node, job, RAY_JOB, "jobDeploymentStatus=Suspended")


def the_client_reads_the_submitter_from_its_job(
    plane: ControlPlane, node: NodeStandIn, namespace: str, nodes: set[str], pod: str
) -> None:
    """The SDK and ``kubemill get``/``describe``/``logs`` read the submitter from its Job:
    Running (the Job's pod ready), at the address of the pod the real Job controller made,
    which is no row of its own; its log is that pod's, under the replica's name."""
    client = JobClient("kubernetes", kubeconfig=str(plane.admin_kubeconfig), namespace=namespace)

    def submitter_running() -> Any:
        replicas = {r.name: r for r in client.get("rj").replicas}
        assert set(replicas) == nodes | {"rj-submitter-0"}, sorted(replicas)
        seen = replicas["rj-submitter-0"]
        return seen if seen.phase == "Running" else None

    seen = eventually(submitter_running, timeout=WAIT, what="the client's submitter Running")
    ip = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")["status"]["podIP"]
    assert seen.address.split(":")[0] == ip, seen
    cli = ["--substrate", "kubernetes", "-n", namespace]
    listing = run_kubemill(plane, *cli, "get", "rj")
    assert "4/4" in listing.stdout, listing.stdout + listing.stderr
    described = run_kubemill(plane, *cli, "describe", "rj")
    assert described.returncode == 0, described.stderr
    assert "submitter" in described.stdout and pod not in described.stdout, described.stdout
    node.write_log(namespace, pod, "ray-job-submitter", "submitted raysubmit_1")
    logs = run_kubemill(plane, *cli, "logs", "rj", "--replica", "submitter-0")
    assert "submitted raysubmit_1" in logs.stdout, logs.stdout + logs.stderr


def test_the_submitters_job_giving_up_fails_the_rayjob_with_submission_failed(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator
) -> None:
    """The real Job controller retries the submitter's failed pod with a new one (counted as
    the submitter's restart), and once past ``submitterConfig.backoffLimit`` marks the Job
    Failed: the RayJob is Failed with SubmissionFailed, as KubeRay's."""
    namespace = control_plane.new_namespace()
    manifest = RAY_JOB.manifest("rs")
    manifest["spec"]["submitterConfig"] = {"backoffLimit": 1}
    job = create(control_plane, namespace, RAY_JOB, "kubectl-upstream", manifest)
    nodes = {"rs-head-0", "rs-workers-0", "rs-workers-1"}

    def submitter_pod() -> str | None:
        live = [
            name
            for name, pod in namespace_pods(control_plane, namespace).items()
            if name not in nodes
            and pod["status"].get("phase") == "Running"
            and node.running(namespace, name)
        ]
        return live[0] if len(live) == 1 else None

    first = eventually(submitter_pod, timeout=WAIT, what=Seen("the submitter's pod running", job))
    node.finish(namespace, first, 1)
    second = eventually(
        lambda: (name := submitter_pod()) != first and name,
        timeout=WAIT,
        what=Seen("a new submitter pod (the Job controller's retry)", job),
    )
    eventually(
        lambda: job.restarts("Submitter") == 1,
        timeout=WAIT,
        what=Seen("the failed run counted", job),
    )
    assert job.get()["status"].get("jobDeploymentStatus") != "Failed"
    node.finish(namespace, second, 1)
    eventually(
        lambda: job.get()["status"].get("jobDeploymentStatus") == "Failed",
        timeout=WAIT,
        what=Seen("the RayJob Failed", job),
    )
    status = job.get()["status"]
    assert status["reason"] == "SubmissionFailed"
    assert "BackoffLimitExceeded" in status["message"], status["message"]
    # shutdownAfterJobFinishes (the example's): the cluster and the Job go, the RayJob stays.
    eventually(
        lambda: (
            not namespace_pods(control_plane, namespace)
            and not control_plane.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")[
                "items"
            ]
        ),
        timeout=WAIT,
        what=Seen("the cluster's pods and the Job deleted", job),
    )
    assert job.get()["status"]["jobDeploymentStatus"] == "Failed"
    assert not operator.failed_creates(namespace)
    control_plane.request("DELETE", job.path)


def test_a_ray_worker_killed_is_restarted_and_counted_and_a_patch_scales_its_group(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator
) -> None:
    namespace = control_plane.new_namespace()
    job = create(
        control_plane, namespace, RAY_CLUSTER, "kubectl-upstream", RAY_CLUSTER.manifest("rc")
    )
    eventually(
        lambda: true(job.get(), "RayClusterProvisioned"),
        timeout=WAIT,
        what=Seen("RayClusterProvisioned", job),
    )
    first_uid = namespace_pods(control_plane, namespace)["rc-workers-1"]["metadata"]["uid"]
    # Killed: under the group's restartPolicy Always the kubelet (the node) restarts it in
    # place; the operator counts the restart, in KubeRay's group in kubemill's annotation
    # (the real server prunes a status field KubeRay's schema does not have).
    node.finish(namespace, "rc-workers-1", 137)
    eventually(
        lambda: job.restarts("workers") == 1,
        timeout=WAIT,
        what=Seen("the worker's restart counted", job),
    )
    assert namespace_pods(control_plane, namespace)["rc-workers-1"]["metadata"]["uid"] == first_uid
    eventually(
        lambda: job.get()["status"].get("readyWorkerReplicas") == 2,
        timeout=WAIT,
        what=Seen("2 workers ready again", job),
    )
    group = {**job.get()["spec"]["workerGroupSpecs"][0], "replicas": 3}
    control_plane.request(
        "PATCH",
        job.path,
        {"spec": {"workerGroupSpecs": [group]}},
        content_type="application/merge-patch+json",
    )
    eventually(
        lambda: running(control_plane, node, namespace, 4),
        timeout=WAIT,
        what=Seen("a third worker running", job),
    )
    assert "rc-workers-2" in namespace_pods(control_plane, namespace)
    eventually(
        lambda: job.get()["status"].get("desiredWorkerReplicas") == 3,
        timeout=WAIT,
        what=Seen("3 workers desired", job),
    )
    assert not operator.failed_creates(namespace)
    control_plane.request("DELETE", job.path)


def test_what_kubemill_does_not_run_is_refused_by_the_real_server_or_told_by_an_event(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    """A submission mode kubemill does not run is out of the CRD's schema: the real server
    refuses it at its field path. The in-tree autoscaler is a valid KubeRay field, so the
    server accepts it; the operator refuses it, as an InvalidSpec Event naming the field,
    and runs no pod."""
    namespace = control_plane.new_namespace()
    manifest = RAY_JOB.manifest("rj-bad")
    manifest["apiVersion"] = "ray.io/v1"
    manifest["spec"]["submissionMode"] = "InteractiveMode"
    refused = apply(control_plane, namespace, manifest)
    assert refused.returncode != 0
    assert 'spec.submissionMode: Unsupported value: "InteractiveMode"' in refused.stderr
    assert (
        control_plane.get_or_none(f"/apis/ray.io/v1/namespaces/{namespace}/rayjobs/rj-bad") is None
    )

    manifest = RAY_CLUSTER.manifest("rc-bad")
    manifest["apiVersion"] = "ray.io/v1"
    manifest["spec"]["enableInTreeAutoscaling"] = True
    accepted = apply(control_plane, namespace, manifest)
    assert "serverside-applied" in accepted.stdout, accepted.stderr

    def told() -> list[str]:
        events = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
        return [
            e["message"]
            for e in events
            if e["reason"] == "InvalidSpec" and e["involvedObject"]["name"] == "rc-bad"
        ]

    [message] = eventually(told, timeout=WAIT, what="an InvalidSpec event")
    assert "spec.enableInTreeAutoscaling" in message, message
    assert not namespace_pods(control_plane, namespace)


def apply(
    plane: ControlPlane, namespace: str, manifest: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """``kubectl apply --server-side --validate=strict`` of ``manifest``, refused or not."""
    return plane.kubectl(
        "apply",
        "--server-side",
        "--validate=strict",
        "--field-manager=test",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=yaml.safe_dump(manifest),
        check=False,
    )


def test_a_rayjob_in_http_mode_runs_its_cluster_and_no_submitter_pod(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator
) -> None:
    """HTTPMode has no submitter pod (kubemill POSTs the job to the head's job API): the real
    server sees the head, the worker and the head Service, and nothing more. The node does not
    run Ray: the operator's asks at the head pod's IP go unanswered, so it submits nothing,
    the deployment stays Initializing, and no outcome is judged here."""
    namespace = control_plane.new_namespace()
    manifest = example("rayjob-http.yaml", "rh")
    job = create(control_plane, namespace, RAY_JOB, "kubectl-upstream", manifest)
    eventually(
        lambda: running(control_plane, node, namespace, 2),
        timeout=WAIT,
        what=Seen("the head and the worker running", job),
    )
    eventually(
        lambda: job.get().get("status", {}).get("jobDeploymentStatus") == "Initializing",
        timeout=WAIT,
        what=Seen("jobDeploymentStatus Initializing", job),
    )
    time.sleep(2)  # the operator acts on a ready cluster at once: give it the time to err
    assert set(namespace_pods(control_plane, namespace)) == {"rh-head-0", "rh-workers-0"}
    control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services/rh-head-svc")
    assert not operator.failed_creates(namespace)
    control_plane.request("DELETE", job.path)


def test_a_ray_cluster_with_token_auth_gets_its_secret_and_is_scaled_by_a_json_patch(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator
) -> None:
    """KubeRay's ``authOptions.mode: token`` in KubeRay's group: the real server keeps the
    field, and takes the token Secret the operator makes (the cluster's name, key
    ``auth_token``, owned by the cluster) and pods whose Ray containers read it; then the
    engine's scale of the group, a JSON patch (a ``test`` of the group's name, its count at
    its index), is applied by the real server, whole or not at all. ``kubemill scale`` and
    the SDK find the cluster in KubeRay's group and scale, read and delete it there: a third
    worker runs, and the real garbage collector takes its children."""
    namespace = control_plane.new_namespace()
    manifest = RAY_CLUSTER.manifest("rca")
    manifest["spec"]["authOptions"] = {"mode": "token"}
    job = create(control_plane, namespace, RAY_CLUSTER, "kubectl-upstream", manifest)
    eventually(
        lambda: true(job.get(), "RayClusterProvisioned"),
        timeout=WAIT,
        what=Seen("RayClusterProvisioned", job),
    )
    assert job.get()["spec"]["authOptions"] == {"mode": "token"}
    secret = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/secrets/rca")
    assert secret["metadata"]["ownerReferences"][0]["uid"] == job.get()["metadata"]["uid"]
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    assert len(token) == 64
    pods = namespace_pods(control_plane, namespace)
    assert set(pods) == {"rca-head-0", "rca-workers-0", "rca-workers-1"}
    for pod in pods.values():
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "rca",
            "key": "auth_token",
        }
        assert token not in json.dumps(pod)

    # The engine's patch with a test that fails (the group not at that index), sent as the
    # SDK would: the real server refuses it whole.
    patch = worker_group_patch(load_one(job.get()), None, 3)
    wrong = [{**patch[0], "value": "other"}, *patch[1:]]
    with pytest.raises(urllib.error.HTTPError) as refused:
        control_plane.request("PATCH", job.path, wrong, content_type="application/json-patch+json")
    assert refused.value.code == 422
    assert job.get()["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    # `kubemill scale` finds the cluster in KubeRay's group and patches it there.
    cli = ["--substrate", "kubernetes", "-n", namespace]
    scaled = run_kubemill(control_plane, *cli, "scale", "rca", "--replicas", "3")
    assert scaled.returncode == 0, scaled.stdout + scaled.stderr
    assert "RayCluster rca scaled" in scaled.stdout, scaled.stdout
    eventually(
        lambda: running(control_plane, node, namespace, 4),
        timeout=WAIT,
        what=Seen("a third worker running", job),
    )
    assert job.get()["apiVersion"] == "ray.io/v1"
    assert job.get()["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    # The SDK reads it there too, with its replicas from their pods, and deletes it there.
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )

    uid = job.get()["metadata"]["uid"]

    def four_running() -> bool:
        view = client.get("rca")
        return view.job.metadata.uid == uid and [r.phase for r in view.replicas] == ["Running"] * 4

    eventually(four_running, timeout=WAIT, what=Seen("the SDK's four replicas Running", job))
    listing = run_kubemill(control_plane, *cli, "get")
    assert "rca" in listing.stdout, listing.stdout + listing.stderr
    assert not operator.failed_creates(namespace)
    client.delete("rca")
    eventually(
        lambda: (
            control_plane.get_or_none(job.path) is None
            and not owned_by(control_plane, namespace, uid)
            and not namespace_pods(control_plane, namespace)
        ),
        timeout=WAIT,
        what=f"the children of {uid} collected",
    )
