"""The operator through a job's life, against kmock: each test asserts calls and final state.

One cluster and one operator (``--all-namespaces --serve-upstream-groups``) serve the whole
module; every test works in a namespace of its own and looks only at the calls made there.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.operator.reconciler import RESTARTS_ANNOTATION
from kubemill.substrates.kubernetes.render import render_job
from support.kmock_cluster import Gate
from support.operator_jobs import mpijob, pytorchjob, replica_job, tfjob
from support.operator_support import (
    KUBELET_FINISHES_AFTER,
    Cluster,
    Kubelet,
    Operator,
    condition,
    is_true,
    job_path,
    summarize,
    writes,
)
from support.waiting import eventually

V1_KINDS_ONE_REPLICA = {"JAXJob": "Worker", "XGBoostJob": "Master", "PaddleJob": "Worker"}
"""The kubeflow.org/v1 kinds of issue 19 and the replica type one replica of which is a
whole job (what decides it when alone)."""


def pods_of(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def services_of(cluster: Cluster, namespace: str) -> set[str]:
    items = cluster.list(f"/api/v1/namespaces/{namespace}/services")
    return {s["metadata"]["name"] for s in items}


def event_reasons(cluster: Cluster, namespace: str) -> Counter[str]:
    return Counter(e["reason"] for e in cluster.list(f"/api/v1/namespaces/{namespace}/events"))


def wait_pods(cluster: Cluster, namespace: str, names: set[str]) -> dict[str, dict[str, Any]]:
    return eventually(
        lambda: (pods := pods_of(cluster, namespace)) and set(pods) == names and pods,
        what=f"pods {sorted(names)}",
    )


def wait_condition(cluster: Cluster, path: str, kind: str) -> dict[str, Any]:
    return eventually(
        lambda: (job := cluster.get(path)) and is_true(job, kind) and job,
        what=f"{kind} on {path}",
    )


def assert_idle_pass_writes_nothing(
    cluster: Cluster, operator: Operator, namespace: str, kind: str, name: str
) -> None:
    """Touch the job (a label) and check the reconcile it causes writes nothing at all."""
    before = len(cluster.calls())
    path = job_path(kind, namespace, name)
    touched = cluster.patch(path, {"metadata": {"labels": {"touched": str(before)}}})
    version = touched["metadata"]["resourceVersion"]
    eventually(
        lambda: operator.reconciled(namespace, name, version),
        what=f"a reconcile of {name} at resourceVersion {version}",
    )
    after = [c for c in cluster.calls()[before:] if not c.from_tests]
    assert writes(after) == [], summarize(writes(after))


def test_a_job_gets_one_pod_and_one_headless_service_per_replica_exactly_as_rendered(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    created = cluster.create(job_path("TFJob", namespace), tfjob("train", ps=1, workers=2))
    names = {"train-chief-0", "train-ps-0", "train-worker-0", "train-worker-1"}
    wait_pods(cluster, namespace, names)
    eventually(lambda: services_of(cluster, namespace) == names, what="services")
    job = wait_condition(cluster, job_path("TFJob", namespace, "train"), "Created")

    # One Event per kind of decision in the pass, naming every object it concerned.
    events = eventually(
        lambda: len(e := cluster.list(f"/api/v1/namespaces/{namespace}/events")) == 3 and e,
        what="events",
    )
    messages = {e["reason"]: e["message"] for e in events}
    assert set(messages) == {"SuccessfulCreatePod", "SuccessfulCreateService", "TFJobCreated"}
    for pod in names:
        assert f"Created pod: {pod}" in messages["SuccessfulCreatePod"]
        assert f"Created service: {pod}" in messages["SuccessfulCreateService"]
    assert messages["TFJobCreated"] == f"TFJob {namespace}/train is created."
    assert {(e["type"], e["involvedObject"]["uid"]) for e in events} == {
        ("Normal", created["metadata"]["uid"])
    }

    calls = writes(cluster.operator_calls(namespace=namespace))
    posted = {
        (c.plural, c.body["metadata"]["name"]): c.body
        for c in calls
        if c.method == "POST" and c.plural in ("pods", "services")
    }
    counts = Counter((c.method, c.resource) for c in calls)
    # Each child exactly once, the status written once (Created); nothing else but events.
    assert counts[("POST", "pods")] == 4 and counts[("POST", "services")] == 4, summarize(calls)
    assert counts[("PATCH", "tfjobs/status")] == 1, summarize(calls)
    assert set(counts) == {
        ("POST", "pods"),
        ("POST", "services"),
        ("PATCH", "tfjobs/status"),
        ("POST", "events"),
    }, summarize(calls)

    # The bodies sent are exactly what `kubemill render` prints for the stored job.
    rendered = {
        ("pods" if o["kind"] == "Pod" else "services", o["metadata"]["name"]): o
        for o in render_job(load_one(created))
    }
    assert posted == rendered

    worker = posted["pods", "train-worker-1"]
    container = worker["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {
            "chief": [f"train-chief-0.{namespace}.svc:2222"],
            "ps": [f"train-ps-0.{namespace}.svc:2222"],
            "worker": [
                f"train-worker-0.{namespace}.svc:2222",
                f"train-worker-1.{namespace}.svc:2222",
            ],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert worker["spec"]["restartPolicy"] == "OnFailure"
    assert worker["metadata"]["labels"] == {
        "team": "ml",
        "kubemill.dev/operator-name": "kubemill",
        "kubemill.dev/job-name": "train",
        "kubemill.dev/replica-type": "worker",
        "kubemill.dev/replica-index": "1",
    }
    assert worker["metadata"]["annotations"] == {"note": "kept"}
    assert worker["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubemill.dev/v1",
            "kind": "TFJob",
            "name": "train",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    service = cluster.get(f"/api/v1/namespaces/{namespace}/services/train-worker-1")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {
        "kubemill.dev/job-name": "train",
        "kubemill.dev/replica-type": "worker",
        "kubemill.dev/replica-index": "1",
    }
    assert job["status"]["replicaStatuses"]["Worker"]["active"] == 0


def test_pods_running_make_the_job_running_and_an_idle_pass_writes_nothing(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    cluster.create(job_path("PyTorchJob", namespace), pytorchjob("ddp", workers=2))
    names = {"ddp-master-0", "ddp-worker-0", "ddp-worker-1"}
    wait_pods(cluster, namespace, names)
    for pod in sorted(names):
        kubelet.set(pod, "Running", container="pytorch")
    job = wait_condition(cluster, job_path("PyTorchJob", namespace, "ddp"), "Running")
    eventually(
        lambda: (
            cluster.get(job_path("PyTorchJob", namespace, "ddp"))["status"]["replicaStatuses"]
            == {
                "Master": {
                    "active": 1,
                    "succeeded": 0,
                    "failed": 0,
                    "restarts": 0,
                    "retiredRestarts": 0,
                },
                "Worker": {
                    "active": 2,
                    "succeeded": 0,
                    "failed": 0,
                    "restarts": 0,
                    "retiredRestarts": 0,
                },
            }
        ),
        what="replica counts",
    )
    assert job["status"]["startTime"]
    assert_idle_pass_writes_nothing(cluster, operator, namespace, "PyTorchJob", "ddp")


def terminating(cluster: Cluster, namespace: str) -> list[str]:
    """The pods deleted but still there (their kubelet has not finished them)."""
    return sorted(
        n for n, p in pods_of(cluster, namespace).items() if p["metadata"].get("deletionTimestamp")
    )


def status_of(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = cluster.get(job_path(kind, namespace, name)).get("status") or {}
    return status


def test_in_place_restarts_and_a_recreated_pod_count_against_the_backoff_limit(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    run_policy = {"backoffLimit": 2}
    cluster.create(job_path("PyTorchJob", namespace), pytorchjob("bo", run_policy=run_policy))
    pods = wait_pods(cluster, namespace, {"bo-master-0", "bo-worker-0"})
    for pod in pods:
        kubelet.set(pod, "Running", container="pytorch")
    path = job_path("PyTorchJob", namespace, "bo")
    wait_condition(cluster, path, "Running")

    # The worker's container crashes once and the kubelet restarts it in place (OnFailure).
    kubelet.set("bo-worker-0", "Running", container="pytorch", restart_count=1, exit_code=1)
    eventually(
        lambda: (
            status_of(cluster, "PyTorchJob", namespace, "bo")["replicaStatuses"]["Worker"][
                "restarts"
            ]
            == 1
        ),
        what="one restart counted",
    )
    eventually(lambda: event_reasons(cluster, namespace)["PyTorchJobRestarting"] == 1)

    # Then the pod itself fails (evicted): under OnFailure it is deleted and created again.
    old_uid = pods["bo-worker-0"]["metadata"]["uid"]
    kubelet.set("bo-worker-0", "Failed", container="pytorch", restart_count=1, reason="Evicted")
    job = wait_condition(cluster, path, "Restarting")
    assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == 2
    recreated = eventually(
        lambda: (
            (p := pods_of(cluster, namespace).get("bo-worker-0"))
            and p["metadata"]["uid"] != old_uid
            and p
        ),
        what="the worker pod recreated",
    )
    deletes = [
        c
        for c in cluster.operator_calls(namespace=namespace)
        if c.method == "DELETE" and c.plural == "pods"
    ]
    assert [(c.name, c.body["preconditions"]) for c in deletes] == [
        ("bo-worker-0", {"uid": old_uid})
    ]
    kubelet.set("bo-worker-0", "Running", container="pytorch")
    wait_condition(cluster, path, "Running")
    assert not is_true(cluster.get(path), "Restarting")

    # Three more in-place restarts: 3 > backoffLimit 2, the job fails and its pods stop.
    assert recreated["metadata"]["uid"] != old_uid
    kubelet.set("bo-worker-0", "Running", container="pytorch", restart_count=3, exit_code=1)
    job = wait_condition(cluster, path, "Failed")
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert "backoff limit (2 restarts)" in failed["message"]
    eventually(lambda: pods_of(cluster, namespace) == {}, what="active pods deleted")
    assert job["status"]["completionTime"]


def test_exit_code_137_recreates_the_pod_and_exit_code_1_fails_the_job(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    cluster.create(job_path("PyTorchJob", namespace), pytorchjob("ec", policy="ExitCode"))
    pods = wait_pods(cluster, namespace, {"ec-master-0", "ec-worker-0"})
    assert pods["ec-worker-0"]["spec"]["restartPolicy"] == "Never"  # the operator restarts
    for pod in pods:
        kubelet.set(pod, "Running", container="pytorch")
    path = job_path("PyTorchJob", namespace, "ec")
    wait_condition(cluster, path, "Running")

    old_uid = pods["ec-worker-0"]["metadata"]["uid"]
    kubelet.set("ec-worker-0", "Failed", container="pytorch", exit_code=137, reason="OOMKilled")
    eventually(
        lambda: (
            (p := pods_of(cluster, namespace).get("ec-worker-0"))
            and p["metadata"]["uid"] != old_uid
        ),
        what="the killed worker recreated",
    )
    job = wait_condition(cluster, path, "Restarting")
    assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    calls = writes(cluster.operator_calls(namespace=namespace))
    pod_calls = [
        (c.method, c.name or c.body["metadata"]["name"]) for c in calls if c.plural == "pods"
    ]
    assert pod_calls.count(("DELETE", "ec-worker-0")) == 1
    assert pod_calls.count(("POST", "ec-worker-0")) == 2  # the first and the recreation

    kubelet.set("ec-worker-0", "Running", container="pytorch")
    wait_condition(cluster, path, "Running")
    kubelet.set("ec-worker-0", "Failed", container="pytorch", exit_code=1)
    job = wait_condition(cluster, path, "Failed")
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "PyTorchJobFailed"
    assert "worker-0 exited with code 1" in failed["message"]
    assert "ec-worker-0" in pods_of(cluster, namespace)  # a permanent failure keeps its pod


def test_chief_success_succeeds_the_job_and_clean_pod_policy_running_stops_the_rest(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    run_policy = {"cleanPodPolicy": "Running"}
    cluster.create(job_path("TFJob", namespace), tfjob("done", workers=2, run_policy=run_policy))
    names = {"done-chief-0", "done-worker-0", "done-worker-1"}
    wait_pods(cluster, namespace, names)
    eventually(lambda: services_of(cluster, namespace) == names, what="services")
    for pod in sorted(names):
        kubelet.set(pod, "Running", container="tensorflow")
    path = job_path("TFJob", namespace, "done")
    wait_condition(cluster, path, "Running")

    kubelet.set("done-chief-0", "Succeeded", container="tensorflow", exit_code=0)
    job = wait_condition(cluster, path, "Succeeded")
    assert job["status"]["completionTime"]
    eventually(lambda: set(pods_of(cluster, namespace)) == {"done-chief-0"}, what="cleanup")
    eventually(lambda: services_of(cluster, namespace) == {"done-chief-0"}, what="services")
    deleted = sorted(
        (c.plural, c.name)
        for c in cluster.operator_calls(namespace=namespace)
        if c.method == "DELETE"
    )
    assert deleted == [
        ("pods", "done-worker-0"),
        ("pods", "done-worker-1"),
        ("services", "done-worker-0"),
        ("services", "done-worker-1"),
    ]
    assert_idle_pass_writes_nothing(cluster, operator, namespace, "TFJob", "done")


def test_suspend_deletes_the_pods_and_resume_creates_them_again_with_a_new_start_time(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    path = job_path("PyTorchJob", namespace, "sus")
    cluster.create(
        job_path("PyTorchJob", namespace), pytorchjob("sus", run_policy={"suspend": True})
    )
    job = wait_condition(cluster, path, "Suspended")
    assert pods_of(cluster, namespace) == {}
    assert not [c for c in cluster.operator_calls(namespace=namespace) if c.plural == "pods"]

    cluster.patch(path, {"spec": {"runPolicy": {"suspend": False}}})
    pods = wait_pods(cluster, namespace, {"sus-master-0", "sus-worker-0"})
    job = eventually(
        lambda: (
            (j := cluster.get(path))
            and (c := condition(j, "Suspended"))
            and c["status"] == "False"
            and j
        ),
        what="resumed",
    )
    first_start = job["status"]["startTime"]
    for pod in pods:
        kubelet.set(pod, "Running", container="pytorch")
    wait_condition(cluster, path, "Running")

    cluster.patch(path, {"spec": {"runPolicy": {"suspend": True}}})
    job = wait_condition(cluster, path, "Suspended")
    eventually(lambda: pods_of(cluster, namespace) == {}, what="pods deleted on suspend")
    eventually(lambda: services_of(cluster, namespace) == set(), what="services deleted")
    running = condition(cluster.get(path), "Running")
    assert running is not None and running["status"] == "False"

    cluster.patch(path, {"spec": {"runPolicy": {"suspend": False}}})
    again = wait_pods(cluster, namespace, {"sus-master-0", "sus-worker-0"})
    assert {p["metadata"]["uid"] for p in again.values()}.isdisjoint(
        p["metadata"]["uid"] for p in pods.values()
    )
    job = eventually(
        lambda: (j := cluster.get(path)) and not is_true(j, "Suspended") and j, what="resumed"
    )
    assert job["status"]["startTime"] >= first_start


@pytest.mark.parametrize(
    ("kind", "upstream"),
    [
        pytest.param("TFJob", False, id="tfjob"),
        pytest.param("PyTorchJob", False, id="pytorchjob"),
        pytest.param("TFJob", True, id="kubeflow-tfjob"),
        pytest.param("PyTorchJob", True, id="kubeflow-pytorchjob"),
        pytest.param("MPIJob", False, id="mpijob"),
        pytest.param("MPIJob", True, id="kubeflow-mpijob"),
        *(
            pytest.param(kind, upstream, id=("kubeflow-" if upstream else "") + kind.lower())
            for kind in V1_KINDS_ONE_REPLICA
            for upstream in (False, True)
        ),
    ],
)
def test_ttl_after_finished_deletes_the_job_and_its_children_go_with_it(
    cluster: Cluster,
    operator: Operator,
    namespace: str,
    kubelet: Kubelet,
    kind: str,
    upstream: bool,
) -> None:
    run_policy = {"ttlSecondsAfterFinished": 1}
    api_version = "kubeflow.org/v1" if upstream else "kubemill.dev/v1"
    if kind == "TFJob":
        manifest = tfjob("ttl", workers=0, run_policy=run_policy, api_version=api_version)
        first, container = "ttl-chief-0", "tensorflow"
    elif kind == "MPIJob":
        api_version = "kubeflow.org/v2beta1" if upstream else "kubemill.dev/v1"
        manifest = mpijob(runPolicy=run_policy)
        manifest["apiVersion"] = api_version
        manifest["metadata"]["name"] = "ttl"
        del manifest["spec"]["mpiReplicaSpecs"]["Worker"]
        first, container = "ttl-launcher-0", "launcher"
    elif kind in V1_KINDS_ONE_REPLICA:
        only = V1_KINDS_ONE_REPLICA[kind]
        manifest, container = replica_job(
            kind, "ttl", {only: 1}, run_policy=run_policy, api_version=api_version
        )
        first = f"ttl-{only.lower()}-0"
    else:
        manifest = pytorchjob("ttl", workers=0, run_policy=run_policy, api_version=api_version)
        first, container = "ttl-master-0", "pytorch"
    created = cluster.create(job_path(kind, namespace, upstream=upstream), manifest)
    wait_pods(cluster, namespace, {first})
    kubelet.set(first, "Succeeded", container=container, exit_code=0)
    path = job_path(kind, namespace, "ttl", upstream=upstream)
    eventually(lambda: cluster.get_or_none(path) is None, what="the job deleted by its TTL")
    calls = cluster.operator_calls(namespace=namespace)
    deletes = [c for c in calls if c.method == "DELETE" and c.group == api_version.split("/")[0]]
    assert [
        (c.name, c.body.get("preconditions"), c.body.get("propagationPolicy")) for c in deletes
    ] == [("ttl", {"uid": created["metadata"]["uid"]}, "Background")]
    assert {c.path for c in calls if c.method == "PATCH"} == {f"{path}/status"}
    # The cluster's garbage collector removes what the job owned.
    eventually(lambda: pods_of(cluster, namespace) == {}, what="children collected")
    assert event_reasons(cluster, namespace)[f"{kind}Succeeded"] == 1


def test_upstream_kubeflow_jobs_are_served_with_children_owned_by_the_upstream_object(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    manifest = pytorchjob("up", api_version="kubeflow.org/v1")
    created = cluster.create(job_path("PyTorchJob", namespace, upstream=True), manifest)
    pods = wait_pods(cluster, namespace, {"up-master-0", "up-worker-0"})
    assert pods["up-master-0"]["metadata"]["ownerReferences"][0]["apiVersion"] == "kubeflow.org/v1"
    assert (
        pods["up-master-0"]["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    )
    for pod in pods:
        kubelet.set(pod, "Running", container="pytorch")
    wait_condition(cluster, job_path("PyTorchJob", namespace, "up", upstream=True), "Running")
    patched = {c.path for c in cluster.operator_calls(namespace=namespace) if c.method == "PATCH"}
    assert patched == {f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/up/status"}


def test_a_job_the_operator_cannot_run_gets_a_warning_event_and_nothing_else(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    manifest = tfjob("bad", workers=1)
    # The CRD schema would refuse this on a real cluster; kmock stores anything.
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "x"
    cluster.create(job_path("TFJob", namespace), manifest)
    event = eventually(
        lambda: [e for e in cluster.list(f"/api/v1/namespaces/{namespace}/events")],
        what="an event",
    )
    assert [(e["type"], e["reason"]) for e in event] == [("Warning", "InvalidSpec")]
    assert "no container is named 'tensorflow'" in event[0]["message"]
    assert event[0]["involvedObject"]["name"] == "bad"
    calls = writes(cluster.operator_calls(namespace=namespace))
    assert [(c.method, c.resource) for c in calls] == [("POST", "events")]


def test_metrics_count_jobs_and_reconciles_and_health_reports_the_leader(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    before = operator.metrics()
    cluster.create(job_path("TFJob", namespace), tfjob("m", workers=0))
    wait_pods(cluster, namespace, {"m-chief-0"})
    kubelet.set("m-chief-0", "Succeeded", container="tensorflow", exit_code=0)
    wait_condition(cluster, job_path("TFJob", namespace, "m"), "Succeeded")

    def grew(name: str) -> float:
        return operator.metrics().get(name, 0.0) - before.get(name, 0.0)

    eventually(lambda: grew('kubemill_jobs_succeeded_total{kind="TFJob"}') == 1)
    assert grew('kubemill_jobs_created_total{kind="TFJob"}') == 1
    assert grew('kubemill_jobs_failed_total{kind="TFJob"}') == 0
    assert grew('kubemill_reconcile_duration_seconds_count{kind="TFJob"}') >= 2
    assert operator.metrics()["kubemill_leader"] == 1
    assert operator.probe()["kubemill"] == {"leading": True, "queued": 0}


def test_scaling_workers_down_removes_the_extra_replica_and_up_adds_it_again(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    cluster.create(job_path("PyTorchJob", namespace), pytorchjob("sc", workers=2))
    path = job_path("PyTorchJob", namespace, "sc")
    names = {"sc-master-0", "sc-worker-0", "sc-worker-1"}
    wait_pods(cluster, namespace, names)
    eventually(lambda: services_of(cluster, namespace) == names, what="services")

    cluster.patch(path, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1}}}})
    wait_pods(cluster, namespace, names - {"sc-worker-1"})
    eventually(lambda: services_of(cluster, namespace) == names - {"sc-worker-1"})
    # Only the extra replica goes; the pods that stay are not restarted (as upstream).
    deleted = [
        (c.plural, c.name)
        for c in cluster.operator_calls(namespace=namespace)
        if c.method == "DELETE"
    ]
    assert sorted(deleted) == [("pods", "sc-worker-1"), ("services", "sc-worker-1")]

    cluster.patch(path, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}})
    pods = wait_pods(cluster, namespace, names)
    env = {e["name"]: e["value"] for e in pods["sc-worker-1"]["spec"]["containers"][0]["env"]}
    assert env["WORLD_SIZE"] == "3" and env["RANK"] == "2"


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob"])
def test_upstream_jobs_keep_restart_counts_in_an_annotation_and_the_backoff_limit_holds(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, kind: str
) -> None:
    # Kubeflow's CRD prunes restarts/retiredRestarts from the status: without a place to
    # keep them the recreation below would be forgotten and the job restart forever.
    run_policy = {"backoffLimit": 1}
    if kind == "TFJob":
        manifest = tfjob("kb", workers=1, run_policy=run_policy, api_version="kubeflow.org/v1")
        first, container = "kb-chief-0", "tensorflow"
    elif kind == "PyTorchJob":
        manifest = pytorchjob("kb", run_policy=run_policy, api_version="kubeflow.org/v1")
        first, container = "kb-master-0", "pytorch"
    else:
        # Two replicas, worker 0 among them (an XGBoostJob's other one is its Master).
        replicas = {"Master": 1, "Worker": 1} if kind == "XGBoostJob" else {"Worker": 2}
        manifest, container = replica_job(
            kind, "kb", replicas, run_policy=run_policy, api_version="kubeflow.org/v1"
        )
        first = "kb-master-0" if kind == "XGBoostJob" else "kb-worker-1"
    cluster.create(job_path(kind, namespace, upstream=True), manifest)
    path = job_path(kind, namespace, "kb", upstream=True)
    pods = wait_pods(cluster, namespace, {first, "kb-worker-0"})
    for pod in pods:
        kubelet.set(pod, "Running", container=container)
    wait_condition(cluster, path, "Running")

    old_uid = pods["kb-worker-0"]["metadata"]["uid"]
    kubelet.set("kb-worker-0", "Failed", container=container, reason="Evicted")
    job = wait_condition(cluster, path, "Restarting")
    recorded = json.loads(job["metadata"]["annotations"][RESTARTS_ANNOTATION])
    assert recorded == {"Worker": {"restarts": 1, "retiredRestarts": 1}}
    assert set(job["status"]["replicaStatuses"]["Worker"]) == {"active", "succeeded", "failed"}
    eventually(
        lambda: (
            (p := pods_of(cluster, namespace).get("kb-worker-0"))
            and p["metadata"]["uid"] != old_uid
        ),
        what="the worker recreated once",
    )
    kubelet.set("kb-worker-0", "Running", container=container)
    wait_condition(cluster, path, "Running")

    # The second failure would be a second restart: over backoffLimit 1, the job fails.
    kubelet.set("kb-worker-0", "Failed", container=container, reason="Evicted")
    job = wait_condition(cluster, path, "Failed")
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert json.loads(job["metadata"]["annotations"][RESTARTS_ANNOTATION]) == recorded
    pod_posts = [
        c.body["metadata"]["name"]
        for c in cluster.operator_calls(namespace=namespace)
        if c.method == "POST" and c.plural == "pods" and c.status == 201
    ]
    assert Counter(pod_posts) == {first: 1, "kb-worker-0": 2}


def test_a_status_write_on_a_job_changed_since_the_read_conflicts_and_the_job_is_judged_again(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    # Hold the operator's first status write until the user has suspended the job.
    gate = Gate(method="PATCH", plural="pytorchjobs", subresource="status", namespace=namespace)
    cluster.cluster.gates.append(gate)
    try:
        cluster.create(job_path("PyTorchJob", namespace), pytorchjob("cf", workers=1))
        wait_pods(cluster, namespace, {"cf-master-0", "cf-worker-0"})
        eventually(lambda: gate.held == 1, what="the status write held")
        path = job_path("PyTorchJob", namespace, "cf")
        cluster.patch(path, {"spec": {"runPolicy": {"suspend": True}}})
    finally:
        gate.open()
    job = wait_condition(cluster, path, "Suspended")
    eventually(lambda: pods_of(cluster, namespace) == {}, what="pods deleted on suspend")
    statuses = [
        (c.status, (c.body.get("metadata") or {}).get("resourceVersion"))
        for c in cluster.operator_calls(namespace=namespace)
        if c.resource == "pytorchjobs/status"
    ]
    # The held write carried the version it was decided on, got 409, and the next pass
    # decided again on the suspended job.
    assert statuses[0][0] == 409 and statuses[0][1], statuses
    assert all(rv for _, rv in statuses), statuses
    assert statuses[-1][0] == 200, statuses
    assert is_true(job, "Suspended") and not is_true(job, "Running")
    assert (
        operator.metrics()[
            'kubemill_api_errors_total{code="409",resource="pytorchjobs",verb="patch"}'
        ]
        >= 1
    )


def test_a_terminating_pod_is_waited_for_before_its_replica_is_created_again(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    cluster.cluster.kubelet_finishes_after = None  # the test ends the Terminating window
    try:
        cluster.create(job_path("PyTorchJob", namespace), pytorchjob("tw", workers=1))
        path = job_path("PyTorchJob", namespace, "tw")
        names = {"tw-master-0", "tw-worker-0"}
        pods = wait_pods(cluster, namespace, names)
        for pod in sorted(names):
            kubelet.set(pod, "Running", container="pytorch")
        wait_condition(cluster, path, "Running")

        # Someone deletes the running worker (kubectl delete): it stops for its grace
        # period, and a pod with its name must not be created meanwhile (409 AlreadyExists,
        # and then the old pod taken for the new one).
        cluster.delete(f"/api/v1/namespaces/{namespace}/pods/tw-worker-0")
        assert terminating(cluster, namespace) == ["tw-worker-0"]
        touched = cluster.patch(path, {"metadata": {"labels": {"touched": "yes"}}})
        version = touched["metadata"]["resourceVersion"]
        eventually(lambda: operator.reconciled(namespace, "tw", version), what="a pass")
        assert terminating(cluster, namespace) == ["tw-worker-0"]
        posts = [
            (c.body["metadata"]["name"], c.status)
            for c in cluster.operator_calls(namespace=namespace)
            if c.method == "POST" and c.plural == "pods"
        ]
        assert sorted(posts) == sorted((n, 201) for n in names), posts

        assert cluster.finish_terminating(namespace) == ["tw-worker-0"]
        again = eventually(
            lambda: (
                (p := pods_of(cluster, namespace).get("tw-worker-0"))
                and p["metadata"]["uid"] != pods["tw-worker-0"]["metadata"]["uid"]
                and p
            ),
            what="the worker created again once the old one is gone",
        )
        assert not again["metadata"].get("deletionTimestamp")
    finally:
        cluster.cluster.kubelet_finishes_after = KUBELET_FINISHES_AFTER
        cluster.finish_terminating(namespace)
