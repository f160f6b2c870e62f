"""Every kind's cluster path through the real control plane, kind by kind, as one table.

For TFJob, PyTorchJob, MPIJob (exec and ssh), SparkApplication, ScheduledSparkApplication
and MarsCluster, each created three ways: by the SDK (``kubemill.dev/v1``), by ``kubectl
apply --server-side --validate=strict`` in ``kubemill.dev/v1``, and by the same in the
kind's upstream group (served by ``--serve-upstream-groups``), where it has one. Each time
its children are accepted (the operator's ServiceAccount had no create refused), its pods
are bound by the real kube-scheduler and played by the node, and its outcome is written
through the status subresource. Along the way: restarts (in place under OnFailure,
recreated under ExitCode, counted in the status or, in an upstream group whose schema has
no such field, in kubemill's annotation), cleanPodPolicy (All and None here; Running in
test_jobs_real and test_mpi_real), the SDK's ``logs``, ``wait`` and ``events`` for what it
created, and then, kind by kind, suspend and resume and the TTL with every owned child
collected by the real garbage collector.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kubemill.sdk import JobClient, SubstrateError
from support.control_plane import ControlPlane, absent
from support.node import NodeStandIn
from support.operator_jobs import mpijob, pytorchjob, tfjob
from support.real_kinds import (
    HOW,
    WAIT,
    Job,
    Kind,
    Manifest,
    Seen,
    create,
    namespace_pods,
    owned_by,
    running,
    through_status_subresource,
    true,
)
from support.real_operator import RealOperator, delete_schedule
from support.waiting import eventually

pytestmark = pytest.mark.usefixtures("operator")


def spark_application(name: str) -> Manifest:
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": "example/spark:4",
            "mainApplicationFile": "local:///opt/pi.py",
            "sparkVersion": "4.0.1",
            "restartPolicy": {"type": "Never"},
            "driver": {"cores": 1, "memory": "512m"},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }


def scheduled_spark_application(name: str) -> Manifest:
    template = spark_application("unused")["spec"]
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": name},
        "spec": {"schedule": "@every 2s", "concurrencyPolicy": "Forbid", "template": template},
    }


def mars_cluster(name: str) -> Manifest:
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "MarsCluster",
        "metadata": {"name": name},
        "spec": {"supervisorNum": 1, "workerNum": 2, "workerCpu": 1, "workerMem": "1g"},
    }


def mpi(name: str, shell: str) -> Manifest:
    manifest = mpijob(runPolicy={})
    manifest["metadata"] = {"name": name, "annotations": {"kubemill.dev/remote-shell": shell}}
    return manifest


TRAINING = [
    Kind(
        "TFJob",
        lambda n: tfjob(n),
        "tfjobs",
        "kubeflow.org/v1",
        3,
        ("-worker-", "-chief-"),
        "Worker",
    ),
    Kind(
        "PyTorchJob",
        lambda n: pytorchjob(n),
        "pytorchjobs",
        "kubeflow.org/v1",
        2,
        ("-worker-", "-master-"),
        "Worker",
    ),
    Kind(
        "MPIJob-exec",
        lambda n: mpi(n, "exec"),
        "mpijobs",
        "kubeflow.org/v2beta1",
        3,
        ("-launcher",),
        "Worker",
        exit_code_policy=False,
    ),
    Kind(
        "MPIJob-ssh",
        lambda n: mpi(n, "ssh"),
        "mpijobs",
        "kubeflow.org/v2beta1",
        3,
        ("-launcher",),
        "Worker",
        exit_code_policy=False,
    ),
]
SPARK = Kind(
    "SparkApplication",
    spark_application,
    "sparkapplications",
    "sparkoperator.k8s.io/v1beta2",
    1,
    ("-driver",),
)
MARS = Kind("MarsCluster", mars_cluster, "marsclusters", None, 3, ())
SCHEDULE = Kind(
    "ScheduledSparkApplication",
    scheduled_spark_application,
    "scheduledsparkapplications",
    "sparkoperator.k8s.io/v1beta2",
    1,
    ("-driver",),
)
KINDS = [*TRAINING, SPARK, SCHEDULE, MARS]

CASES = [
    pytest.param(kind, how, id=f"{kind.id}-{how}")
    for kind in KINDS
    for how in HOW
    if how != "kubectl-upstream" or kind.upstream
]


# --- reading the cluster ---


def finish(
    plane: ControlPlane, node: NodeStandIn, namespace: str, fragments: tuple[str, ...]
) -> None:
    """Each running pod whose name holds a fragment exits 0, fragment by fragment."""
    for fragment in fragments:
        for name, pod in namespace_pods(plane, namespace).items():
            live = "deletionTimestamp" not in pod["metadata"] and node.running(namespace, name)
            if fragment in name and live:
                node.finish(namespace, name, 0)


def one_pod(plane: ControlPlane, node: NodeStandIn, namespace: str, fragment: str) -> str:
    """The name of the running pod whose name holds ``fragment``."""
    return eventually(  # type: ignore[no-any-return]
        lambda: next(
            (
                n
                for n, p in namespace_pods(plane, namespace).items()
                if fragment in n
                and "deletionTimestamp" not in p["metadata"]
                and node.running(namespace, n)
            ),
            None,
        ),
        timeout=WAIT,
        what=f"a running pod *{fragment}*",
    )


# --- created three ways, run to the outcome ---


@pytest.mark.parametrize(("kind", "how"), CASES)
def test_a_job_created_by_the_sdk_or_kubectl_runs_to_its_outcome_in_the_status(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator, kind: Kind, how: str
) -> None:
    namespace = control_plane.new_namespace()
    name = "job"
    manifest = kind.manifest(name)
    policy = {"sdk": "All", "kubectl": "None"}.get(how)
    if kind in TRAINING:
        run_policy = manifest["spec"].setdefault("runPolicy", {})
        run_policy["backoffLimit"] = 3
        if policy:
            run_policy["cleanPodPolicy"] = policy
        # The restarted replica: in place under OnFailure (SDK, upstream), recreated under
        # ExitCode (kubectl in kubemill.dev, where the kind takes it).
        replicas = next(v for k, v in manifest["spec"].items() if k.endswith("ReplicaSpecs"))
        replicas[kind.restarted]["restartPolicy"] = (
            "ExitCode" if recreated(kind, how) else "OnFailure"
        )
    if kind is SPARK and how != "kubectl":
        manifest["spec"]["restartPolicy"] = {
            "type": "OnFailure",
            "onFailureRetries": 1,
            "onFailureRetryInterval": 1,
        }
    job = create(control_plane, namespace, kind, how, manifest)

    if kind is SCHEDULE:
        schedule_runs_one_application(control_plane, node, operator, job)
        return
    eventually(
        lambda: running(control_plane, node, namespace, kind.pods),
        timeout=WAIT,
        what=Seen(f"{kind.pods} pods running", job),
    )
    started = namespace_pods(control_plane, namespace)
    # Bound by the real kube-scheduler (the node plays only pods bound to it).
    assert {p["spec"]["nodeName"] for p in started.values()} == {control_plane.node}

    if kind is MARS:
        ready = eventually(
            lambda: true(job.get(), "Ready") and job.get(), timeout=WAIT, what="Ready"
        )
        assert ready["status"]["readyReplicas"] == {"Supervisor": 1, "Worker": 2}
        assert ready["status"]["endpoint"].startswith("http://127.0.0.1:")
        assert through_status_subresource(ready, "conditions")
        assert not operator.failed_creates(namespace)
        return

    if kind is SPARK:
        spark_runs_to_completion(control_plane, node, job, retried=how != "kubectl")
        assert not operator.failed_creates(namespace)
        return

    assert kind.restarted
    fragment = f"-{kind.restarted.lower()}-0"
    worker = one_pod(control_plane, node, namespace, fragment)
    first_uid = started[worker]["metadata"]["uid"]
    if recreated(kind, how):
        # 137 (killed) is retryable under ExitCode: the operator deletes the pod and
        # creates it again.
        node.finish(namespace, worker, 137)
        eventually(
            lambda: (
                (again := namespace_pods(control_plane, namespace).get(worker)) is not None
                and again["metadata"]["uid"] != first_uid
                and node.running(namespace, worker)
            ),
            timeout=WAIT,
            what="the pod created again and running",
        )
        # A recreation counts as a restart (its retiredRestarts part), as in place.
        eventually(
            lambda: job.restarts(kind.restarted or "") == 1,
            timeout=WAIT,
            what="the recreation counted",
        )
    else:
        node.finish(namespace, worker, 1)
        eventually(
            lambda: job.restarts(kind.restarted or "") == 1,
            timeout=WAIT,
            what="the in-place restart counted",
        )
        restarted = namespace_pods(control_plane, namespace)[worker]
        assert restarted["metadata"]["uid"] == first_uid
        # The node's pod status, as a kubelet writes it after an in-place restart.
        [container] = restarted["status"]["containerStatuses"]
        assert container["restartCount"] == 1 and "running" in container["state"]
        assert container["lastState"]["terminated"]["exitCode"] == 1

    if how == "sdk":
        # The SDK's logs, through the API server's proxy to the node.
        client = JobClient("kubernetes", kubeconfig=str(control_plane.admin_kubeconfig))
        container = started[worker]["spec"]["containers"][0]["name"]
        node.write_log(namespace, worker, container, "step 1\nstep 2")
        replica = f"{kind.restarted.lower()}-0"
        lines = eventually(
            lambda: [line.text for line in client.logs(name, namespace, replica=replica, tail=1)],
            timeout=WAIT,
            what="the worker's last log line",
        )
        assert lines == ["step 2"], lines
    finish(control_plane, node, namespace, kind.ends)
    done = eventually(
        lambda: true(job.get(), "Succeeded") and job.get(), timeout=WAIT, what="Succeeded"
    )
    assert through_status_subresource(done, "conditions")
    assert done["status"]["completionTime"]
    if how == "sdk":
        ended = client.wait(name, namespace, timeout=WAIT)
        assert ended.finished and ended.phase == "Succeeded", ended.phase
        reasons = {event.reason for event in client.events(name, namespace)}
        assert reasons, "no Event on the job"
    if policy == "All":
        eventually(
            lambda: not namespace_pods(control_plane, namespace),
            timeout=WAIT,
            what="cleanPodPolicy All: every pod deleted",
        )
    elif policy == "None":
        time.sleep(2)  # the operator acts on the success at once: give it the time to err
        left = namespace_pods(control_plane, namespace)
        assert len(left) == kind.pods and not any(
            "deletionTimestamp" in p["metadata"] for p in left.values()
        ), sorted(left)
    assert not operator.failed_creates(namespace)


def recreated(kind: Kind, how: str) -> bool:
    """Whether this case's restarted replica runs under ExitCode (its pod recreated)."""
    return how == "kubectl" and kind.exit_code_policy


def test_an_mpijob_under_exit_code_is_told_invalid_by_an_event(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    """The CRD's schema takes ExitCode (every kind's replicas share it), so the server
    accepts the object; the operator refuses it as mpi-operator does, and says so where
    `kubectl describe` shows it: an InvalidSpec Event naming the field. No pod runs."""
    namespace = control_plane.new_namespace()
    manifest = mpi("job", "exec")
    manifest["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    job = create(control_plane, namespace, TRAINING[2], "kubectl", manifest)

    def told() -> list[str]:
        events = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
        return [
            e["message"]
            for e in events
            if e["reason"] == "InvalidSpec" and e["involvedObject"]["name"] == job.name
        ]

    [message] = eventually(told, timeout=WAIT, what="an InvalidSpec event")
    assert "spec.mpiReplicaSpecs.Worker.restartPolicy" in message, message
    described = control_plane.kubectl("describe", "mpijobs.kubemill.dev", "job", "-n", namespace)
    assert "InvalidSpec" in described.stdout
    assert not namespace_pods(control_plane, namespace)


def spark_runs_to_completion(
    plane: ControlPlane, node: NodeStandIn, job: Job, *, retried: bool
) -> None:
    """The driver ends; with ``retried`` (OnFailure, one retry) it fails first, and the
    application runs again with a new driver before it completes."""

    def state() -> str:
        return str(job.get().get("status", {}).get("applicationState", {}).get("state", ""))

    driver = one_pod(plane, node, job.namespace, "-driver")
    eventually(lambda: state() == "RUNNING", timeout=WAIT, what="RUNNING")
    if retried:
        first = node.pod(job.namespace, driver)["metadata"]["uid"]
        node.finish(job.namespace, driver, 1)
        eventually(
            lambda: (
                job.get().get("status", {}).get("executionAttempts") == 2 and state() == "RUNNING"
            ),
            timeout=WAIT,
            what="the second attempt running",
        )
        driver = one_pod(plane, node, job.namespace, "-driver")
        assert node.pod(job.namespace, driver)["metadata"]["uid"] != first
    node.finish(job.namespace, driver, 0)
    eventually(lambda: state() == "COMPLETED", timeout=WAIT, what="COMPLETED")
    done = job.get()
    assert through_status_subresource(done, "applicationState")
    assert done["status"]["executionAttempts"] == (2 if retried else 1)


def schedule_runs_one_application(
    plane: ControlPlane, node: NodeStandIn, operator: RealOperator, schedule: Job
) -> None:
    """A run is created (a SparkApplication in the schedule's group, owned by it), its
    driver runs and ends, and the schedule's status counts it a success."""
    runs = f"/apis/{schedule.api_version}/namespaces/{schedule.namespace}/sparkapplications"
    first = eventually(
        lambda: plane.request("GET", runs)["items"], timeout=WAIT, what="a first run"
    )[0]
    owner = first["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "ScheduledSparkApplication",
        schedule.name,
        schedule.get()["metadata"]["uid"],
    )
    run = first["metadata"]["name"]
    driver = one_pod(plane, node, schedule.namespace, f"{run}-driver")
    assert node.pod(schedule.namespace, driver)["spec"]["nodeName"] == plane.node
    node.finish(schedule.namespace, driver, 0)
    eventually(
        lambda: run in schedule.get().get("status", {}).get("pastSuccessfulRunNames", []),
        timeout=WAIT,
        what="the run counted a success",
    )
    assert through_status_subresource(schedule.get(), "pastSuccessfulRunNames")
    assert not operator.failed_creates(schedule.namespace)
    # The schedule goes on: stop it here, so that it does not run into the next tests.
    delete_schedule(plane, schedule.path)


# --- suspend and resume, then the TTL and the garbage collector ---


def suspended(kind: Kind, obj: dict[str, Any]) -> bool:
    status = obj.get("status", {})
    if kind is SPARK:
        return bool(status.get("applicationState", {}).get("state") == "SUSPENDED")
    return true(obj, "Suspended")


@pytest.mark.parametrize("kind", [*TRAINING, SPARK], ids=lambda k: k.id)
def test_suspend_resume_then_the_ttl_and_the_real_garbage_collector_take_the_job(
    control_plane: ControlPlane, node: NodeStandIn, kind: Kind
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    manifest = kind.manifest("brief")
    if kind is SPARK:
        manifest["spec"]["timeToLiveSeconds"] = 1
    else:
        manifest["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 1, "cleanPodPolicy": "None"}
    client.submit(manifest)
    job = Job(control_plane, namespace, "kubemill.dev/v1", kind.plural, "brief")
    eventually(
        lambda: running(control_plane, node, namespace, kind.pods), timeout=WAIT, what="running"
    )
    uid = job.get()["metadata"]["uid"]
    first = {p["metadata"]["uid"] for p in namespace_pods(control_plane, namespace).values()}
    client.suspend("brief")
    eventually(
        lambda: not namespace_pods(control_plane, namespace), timeout=WAIT, what="the pods gone"
    )
    eventually(lambda: suspended(kind, job.get()), timeout=WAIT, what="Suspended in the status")
    # The SDK's one word: the spark-operator's state for a SparkApplication.
    assert client.get("brief").phase == ("SUSPENDED" if kind is SPARK else "Suspended")
    client.resume("brief")
    eventually(
        lambda: running(control_plane, node, namespace, kind.pods),
        timeout=WAIT,
        what="running again",
    )
    again = {p["metadata"]["uid"] for p in namespace_pods(control_plane, namespace).values()}
    assert not first & again
    children = owned_by(control_plane, namespace, uid)
    assert children, "the job owns no children"
    finish(control_plane, node, namespace, kind.ends)
    eventually(lambda: absent(control_plane, job.path), timeout=WAIT, what="deleted by its TTL")
    # Its children carried ownerReferences to it: the real garbage collector takes them all.
    eventually(
        lambda: not owned_by(control_plane, namespace, uid),
        timeout=WAIT,
        what=f"its children collected: {children}",
    )


def test_a_schedule_suspended_starts_no_run_and_resumed_starts_again(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    manifest = scheduled_spark_application("tick")
    manifest["spec"]["concurrencyPolicy"] = "Allow"
    client.submit(manifest)
    schedule = Job(control_plane, namespace, "kubemill.dev/v1", SCHEDULE.plural, "tick")
    runs = f"/apis/kubemill.dev/v1/namespaces/{namespace}/sparkapplications"

    def names() -> set[str]:
        return {r["metadata"]["name"] for r in control_plane.request("GET", runs)["items"]}

    eventually(lambda: names(), timeout=WAIT, what="a first run")
    client.suspend("tick")
    eventually(
        lambda: "nextRun" not in schedule.get().get("status", {}),
        timeout=WAIT,
        what="nextRun cleared",
    )
    before = names()
    time.sleep(5)  # two due times of "@every 2s" pass while suspended
    assert names() == before, "a run started while the schedule was suspended"
    client.resume("tick")
    eventually(lambda: names() - before, timeout=WAIT, what="a new run after resume")
    uid = schedule.get()["metadata"]["uid"]
    delete_schedule(control_plane, schedule.path)
    eventually(
        lambda: not owned_by(control_plane, namespace, uid),
        timeout=WAIT,
        what="its runs collected with the schedule",
    )


def test_a_mars_cluster_refuses_suspend_and_its_deletion_collects_its_children(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(mars_cluster("mars"))
    job = Job(control_plane, namespace, "kubemill.dev/v1", MARS.plural, "mars")
    eventually(lambda: true(job.get(), "Ready"), timeout=WAIT, what="Ready")
    with pytest.raises(SubstrateError, match="no suspend"):
        client.suspend("mars")
    assert "suspend" not in json.dumps(job.get()["spec"])
    uid = job.get()["metadata"]["uid"]
    children = owned_by(control_plane, namespace, uid)
    assert any(c.startswith("deployments/") for c in children), children
    client.delete("mars")
    eventually(
        lambda: (
            not owned_by(control_plane, namespace, uid)
            and not namespace_pods(control_plane, namespace)
        ),
        timeout=WAIT,
        what="its Deployments, Role, Service and pods collected",
    )
