"""The Kubernetes backend's submit/get/list/delete/events against a kmock cluster over HTTP.

Every test talks to a real HTTP server on 127.0.0.1 through a kubeconfig file, as a user
would; the test itself plays the operator and the kubelet (writes pods and statuses).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubemill.api import STOP_ANNOTATION
from kubemill.kinds import load_one
from kubemill.substrates.base import JobExists, JobNotFound, SubmitOptions, SubstrateError
from kubemill.substrates.kubernetes.client import KubernetesBackend, job_body
from support.kube_client_support import (
    SEED_PYTORCHJOB,
    ClientClusterThread,
    Operator,
    kmock_cluster,
    running,
    terminated,
)

TFJOB = """
apiVersion: kubemill.dev/v1
kind: TFJob
metadata:
  name: mnist
  labels: {team: vision}
spec:
  runPolicy: {backoffLimit: 2}
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers:
            - name: tensorflow
              image: trainer:1
              command: [python, train.py]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: tensorflow
              image: trainer:1
              command: [python, train.py]
"""


def submit(backend: KubernetesBackend, text: str, namespace: str | None = None) -> Any:
    return backend.submit(load_one(text), SubmitOptions(namespace=namespace))


# --- submit --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "plural", "kind", "replicas"),
    [
        pytest.param(
            TFJOB, "tfjobs", "TFJob", ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"], id="tf"
        ),
        pytest.param(
            SEED_PYTORCHJOB,
            "pytorchjobs",
            "PyTorchJob",
            ["ddp-master-0", "ddp-worker-0"],
            id="pytorch-from-kubeflow-group",
        ),
    ],
)
def test_submit_creates_the_job_object_with_the_defaulted_manifest(
    cluster: ClientClusterThread,
    backend: KubernetesBackend,
    manifest: str,
    plural: str,
    kind: str,
    replicas: list[str],
) -> None:
    cluster.create_namespaces("team-a")
    job = load_one(manifest)
    view = backend.submit(job, SubmitOptions(namespace="team-a"))

    posts = [c for c in cluster.client_calls() if c.method == "POST"]
    assert [c.path for c in posts] == [f"/apis/kubemill.dev/v1/namespaces/team-a/{plural}"]
    sent = posts[0].body
    assert sent["apiVersion"] == "kubemill.dev/v1"
    assert sent["kind"] == kind
    assert sent["metadata"]["name"] == job.name
    assert sent["metadata"]["namespace"] == "team-a"
    assert sent["spec"] == job.to_wire()["spec"]
    assert "status" not in sent
    assert sent == job_body(job, "team-a")

    stored = cluster.get(f"/apis/kubemill.dev/v1/namespaces/team-a/{plural}/{job.name}")
    assert stored["spec"] == job.to_wire()["spec"]
    assert view.kind == kind
    assert view.namespace == "team-a"
    assert view.phase == "Pending"
    assert view.created is not None
    assert [r.name for r in view.replicas] == replicas
    assert {(r.phase, r.reason) for r in view.replicas} == {("Pending", "NoPod")}


def test_submit_keeps_labels_and_drops_server_fields(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    job = load_one(TFJOB)
    job.metadata.uid = "stale-uid"
    job.metadata.resource_version = "42"
    job.metadata.creation_timestamp = "2020-01-01T00:00:00Z"
    backend.submit(job, SubmitOptions())
    sent = next(c for c in cluster.client_calls() if c.method == "POST").body
    meta = sent["metadata"]
    assert (meta["name"], meta["namespace"], meta["labels"]) == (
        "mnist",
        "default",
        {"team": "vision"},
    )
    assert not {"uid", "resourceVersion", "creationTimestamp"} & set(meta)


def test_submit_uses_the_kubeconfig_context_namespace(
    cluster: ClientClusterThread, tmp_path: Path
) -> None:
    cluster.create_namespaces("research")
    config = kmock_cluster.write_kubeconfig(tmp_path / "kc", cluster.url)
    text = config.read_text().replace("namespace: default", "namespace: research")
    config.write_text(text)
    backend = KubernetesBackend(kubeconfig=config)
    view = submit(backend, TFJOB)
    assert view.namespace == "research"
    assert backend.get("mnist").namespace == "research"


def test_submit_twice_is_job_exists(backend: KubernetesBackend) -> None:
    submit(backend, TFJOB)
    with pytest.raises(JobExists, match=r"already exists in namespace 'default'.*kubemill delete"):
        submit(backend, TFJOB)


def test_submit_refuses_a_namespace_other_than_the_manifests(backend: KubernetesBackend) -> None:
    job = load_one(TFJOB)
    job.metadata.namespace = "ml"
    with pytest.raises(SubstrateError, match="manifest says namespace 'ml' but 'other'"):
        backend.submit(job, SubmitOptions(namespace="other"))


# --- get and list --------------------------------------------------------------------------


def test_get_maps_the_status_and_each_replica_from_its_pod(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator
) -> None:
    submit(backend, TFJOB)
    operator.create_pods("tfjobs", "default", "mnist")
    operator.pod_status("default", "mnist-ps-0", running("tensorflow", ip="10.1.0.7"))
    operator.pod_status(
        "default",
        "mnist-worker-0",
        running("tensorflow", ip="10.1.0.8", restarts=2, last_exit=137),
    )
    operator.pod_status("default", "mnist-worker-1", terminated("tensorflow", exit_code=3))
    operator.set_conditions(
        "tfjobs",
        "default",
        "mnist",
        ("Created", "TFJobCreated", "TFJob mnist is created."),
        ("Running", "TFJobRunning", "TFJob mnist is running."),
    )

    view = backend.get("mnist")

    assert view.phase == "Running"
    assert view.status.condition("Running").reason == "TFJobRunning"  # type: ignore[arg-type, union-attr]
    ps, worker0, worker1 = view.replicas
    assert (ps.name, ps.replica_type, ps.index, ps.phase) == ("mnist-ps-0", "PS", 0, "Running")
    assert ps.address == "10.1.0.7:2222"  # the pod IP and the defaulted tfjob-port
    assert ps.exit_code is None
    assert ps.started is not None and ps.started.isoformat() == "2026-01-02T03:04:05+00:00"
    assert (worker0.phase, worker0.restarts, worker0.exit_code) == ("Running", 2, None)
    assert (worker1.phase, worker1.exit_code, worker1.reason) == ("Failed", 3, "Error")
    assert worker1.finished is not None


def test_get_explains_replicas_without_pods(backend: KubernetesBackend, operator: Operator) -> None:
    submit(backend, TFJOB)
    assert {r.reason for r in backend.get("mnist").replicas} == {"NoPod"}
    operator.set_conditions("tfjobs", "default", "mnist", ("Suspended", "JobSuspended", "x"))
    assert {(r.phase, r.reason) for r in backend.get("mnist").replicas} == {
        ("Pending", "Suspended")
    }
    operator.set_conditions("tfjobs", "default", "mnist", ("Succeeded", "TFJobSucceeded", "done"))
    view = backend.get("mnist")
    assert view.finished
    assert {(r.phase, r.reason) for r in view.replicas} == {("Unknown", "PodDeleted")}


def test_get_ignores_pods_of_a_namesake_and_shows_stray_replicas(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator
) -> None:
    submit(backend, TFJOB)
    pods = operator.create_pods("tfjobs", "default", "mnist")
    # A leftover of an earlier job of the same name: same labels, another owner uid.
    foreign = dict(pods[0])
    foreign["metadata"] = {
        "name": "mnist-worker-7",
        "labels": pods[0]["metadata"]["labels"],
        "ownerReferences": [{**pods[0]["metadata"]["ownerReferences"][0], "uid": "old-uid"}],
    }
    cluster.create("/api/v1/namespaces/default/pods", foreign)
    # A worker the spec no longer asks for (scaled down), still controlled by the job.
    stray = dict(pods[1])
    stray["metadata"] = {
        "name": "mnist-worker-5",
        "labels": {**pods[1]["metadata"]["labels"], "kubemill.dev/replica-index": "5"},
        "ownerReferences": pods[1]["metadata"]["ownerReferences"],
    }
    cluster.create("/api/v1/namespaces/default/pods", stray)

    names = [(r.name, r.replica_type, r.index) for r in backend.get("mnist").replicas]
    assert names == [
        ("mnist-ps-0", "PS", 0),
        ("mnist-worker-0", "Worker", 0),
        ("mnist-worker-1", "Worker", 1),
        ("mnist-worker-5", "Worker", 5),
    ]


def test_get_of_a_missing_job_is_job_not_found(backend: KubernetesBackend) -> None:
    with pytest.raises(
        JobNotFound, match=r"no job 'nope' in namespace 'default'.*kubemill get -n default"
    ):
        backend.get("nope")


def test_same_name_in_two_kinds_needs_the_kind(backend: KubernetesBackend) -> None:
    submit(backend, TFJOB)
    other = load_one(SEED_PYTORCHJOB)
    other.metadata.name = "mnist"
    backend.submit(other, SubmitOptions())
    with pytest.raises(SubstrateError, match=r"say which: tfjob/mnist or pytorchjob/mnist"):
        backend.get("mnist")
    assert backend.get("tfjob/mnist").kind == "TFJob"
    assert backend.get("ptj/mnist").kind == "PyTorchJob"
    assert backend.get("pytorchjobs.kubemill.dev/mnist").kind == "PyTorchJob"
    with pytest.raises(SubstrateError, match="cannot tell which job"):
        backend.get("deployment/mnist")


def test_list_covers_kinds_and_namespaces_with_one_pod_query(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator
) -> None:
    cluster.create_namespaces("a", "b")
    submit(backend, TFJOB, namespace="a")
    submit(backend, SEED_PYTORCHJOB, namespace="b")
    operator.create_pods("pytorchjobs", "b", "ddp")
    operator.pod_status("b", "ddp-master-0", running("pytorch", ip="10.0.0.9"))
    before = len(cluster.client_calls())

    every = backend.list()

    calls = cluster.client_calls()[before:]
    assert [(v.namespace, v.name, v.kind) for v in every] == [
        ("a", "mnist", "TFJob"),
        ("b", "ddp", "PyTorchJob"),
    ]
    assert [c.path for c in calls] == [
        "/apis",  # discovery: which upstream groups to list too (none served here)
        "/apis/kubemill.dev/v1/tfjobs",
        "/apis/kubemill.dev/v1/pytorchjobs",
        "/apis/kubemill.dev/v1/mpijobs",
        "/apis/kubemill.dev/v1/sparkapplications",
        "/apis/kubemill.dev/v1/marsclusters",
        "/apis/kubemill.dev/v1/jaxjobs",
        "/apis/kubemill.dev/v1/xgboostjobs",
        "/apis/kubemill.dev/v1/paddlejobs",
        "/apis/kubemill.dev/v1/trainjobs",
        "/apis/kubemill.dev/v1/rayclusters",
        "/apis/kubemill.dev/v1/rayjobs",
        "/apis/kubemill.dev/v1/scheduledsparkapplications",
        "/api/v1/pods",
    ]
    ddp = next(v for v in every if v.name == "ddp")
    assert [(r.name, r.phase) for r in ddp.replicas] == [
        ("ddp-master-0", "Running"),
        ("ddp-worker-0", "Pending"),
    ]
    assert [v.name for v in backend.list("b")] == ["ddp"]
    assert backend.list("empty") == []


# --- events --------------------------------------------------------------------------------


def _event(name: str, job: dict[str, Any], *, reason: str, at: str, **extra: Any) -> dict:
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": "kubemill.dev/v1",
            "kind": job["kind"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "type": "Normal",
        "reason": reason,
        "message": f"{reason} happened",
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
        **extra,
    }


def test_events_are_the_jobs_own_oldest_first(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    submit(backend, TFJOB)
    submit(backend, SEED_PYTORCHJOB)
    job = cluster.get("/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist")
    other = cluster.get("/apis/kubemill.dev/v1/namespaces/default/pytorchjobs/ddp")
    path = "/api/v1/namespaces/default/events"
    cluster.create(path, _event("e2", job, reason="SuccessfulCreatePod", at="2026-01-01T00:00:05Z"))
    cluster.create(
        path,
        _event(
            "e1",
            job,
            reason="ExitedWithCode",
            at="2026-01-01T00:00:09Z",
            type="Warning",
            count=3,
        ),
    )
    cluster.create(path, _event("e0", job, reason="Created", at="2026-01-01T00:00:01Z"))
    cluster.create(path, _event("x", other, reason="NotMine", at="2026-01-01T00:00:02Z"))
    stale = {**job, "metadata": {**job["metadata"], "uid": "an-earlier-mnist"}}
    cluster.create(path, _event("y", stale, reason="Earlier", at="2026-01-01T00:00:03Z"))

    events = backend.events("mnist")

    assert [(e.reason, e.type, e.count) for e in events] == [
        ("Created", "Normal", 1),
        ("SuccessfulCreatePod", "Normal", 1),
        ("ExitedWithCode", "Warning", 3),
    ]
    assert events[0].message == "Created happened"
    assert events[0].time.isoformat() == "2026-01-01T00:00:01+00:00"


# --- delete --------------------------------------------------------------------------------


def test_delete_removes_the_job_and_its_children_go_by_owner_references(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator
) -> None:
    submit(backend, TFJOB)
    operator.create_pods("tfjobs", "default", "mnist")
    uid = cluster.get("/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist")["metadata"]["uid"]

    backend.delete("mnist")

    delete = next(c for c in cluster.client_calls() if c.method == "DELETE")
    assert delete.path == "/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist"
    assert delete.body["propagationPolicy"] == "Background"
    assert delete.body["preconditions"] == {"uid": uid}
    assert cluster.get_or_none("/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist") is None
    # The emulator's garbage collector stands in for the cluster's: the pods went with it.
    assert cluster.list("/api/v1/namespaces/default/pods") == []
    with pytest.raises(JobNotFound):
        backend.get("mnist")
    with pytest.raises(JobNotFound):
        backend.delete("mnist")


def test_interrupt_sets_the_stop_annotation_and_force_deletes_its_pods(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator
) -> None:
    submit(backend, TFJOB)
    operator.create_pods("tfjobs", "default", "mnist")
    operator.set_conditions("tfjobs", "default", "mnist", ("Running", "TFJobRunning", "x"))

    view = backend.interrupt("mnist", force=True, why="Ctrl-C in kubemill run")

    # The same request as on the local substrate: a stop annotation, merge-patched; the
    # operator's core fails the job as Interrupted. Nothing in the spec changes.
    patches = [c for c in cluster.client_calls() if c.method == "PATCH"]
    assert [(c.path, c.body) for c in patches] == [
        (
            "/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist",
            {"metadata": {"annotations": {STOP_ANNOTATION: "Ctrl-C in kubemill run"}}},
        )
    ]
    stored = cluster.get("/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist")
    assert stored["metadata"]["annotations"][STOP_ANNOTATION] == "Ctrl-C in kubemill run"
    assert stored["spec"] == load_one(TFJOB).to_wire()["spec"]
    assert cluster.list("/api/v1/namespaces/default/pods") == []
    assert view.job.metadata.annotations[STOP_ANNOTATION] == "Ctrl-C in kubemill run"
    pod_deletes = [c for c in cluster.client_calls() if c.method == "DELETE"]
    assert {c.body["gracePeriodSeconds"] for c in pod_deletes} == {0}


@pytest.mark.parametrize(("verb", "value"), [("suspend", True), ("resume", False)])
def test_suspend_and_resume_merge_patch_run_policy_suspend(
    cluster: ClientClusterThread,
    backend: KubernetesBackend,
    operator: Operator,
    verb: str,
    value: bool,
) -> None:
    submit(backend, TFJOB)
    operator.set_conditions("tfjobs", "default", "mnist", ("Running", "TFJobRunning", "x"))

    view = getattr(backend, verb)("mnist")

    patches = [c for c in cluster.client_calls() if c.method == "PATCH"]
    assert [(c.path, c.body) for c in patches] == [
        (
            "/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist",
            {"spec": {"runPolicy": {"suspend": value}}},
        )
    ]
    stored = cluster.get("/apis/kubemill.dev/v1/namespaces/default/tfjobs/mnist")
    submitted = load_one(TFJOB).to_wire()["spec"]["runPolicy"]
    assert stored["spec"]["runPolicy"] == {**submitted, "suspend": value}
    assert view.job.run_policy.suspend is value


SPARK_APP = """
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata: {name: pi}
spec:
  type: Python
  sparkVersion: "4.0.0"
  image: spark:4.0.0
  mainApplicationFile: local:///opt/spark/examples/src/main/python/pi.py
"""


@pytest.mark.parametrize(("verb", "value"), [("suspend", True), ("resume", False)])
def test_a_spark_application_is_suspended_by_its_own_spec_suspend(
    cluster: ClientClusterThread, backend: KubernetesBackend, verb: str, value: bool
) -> None:
    # A SparkApplication has no runPolicy: the spark-operator's field is spec.suspend.
    submit(backend, SPARK_APP)

    view = getattr(backend, verb)("pi")

    patches = [c for c in cluster.client_calls() if c.method == "PATCH"]
    assert [(c.path, c.body) for c in patches] == [
        (
            "/apis/kubemill.dev/v1/namespaces/default/sparkapplications/pi",
            {"spec": {"suspend": value}},
        )
    ]
    stored = cluster.get("/apis/kubemill.dev/v1/namespaces/default/sparkapplications/pi")
    assert stored["spec"]["suspend"] is value
    assert "runPolicy" not in stored["spec"]
    assert view.job.run_policy.suspend is value


def test_a_suspended_job_reads_suspended(backend: KubernetesBackend, operator: Operator) -> None:
    submit(backend, TFJOB)
    backend.suspend("mnist")
    # What the operator's core writes once it has deleted the pods.
    operator.set_conditions("tfjobs", "default", "mnist", ("Suspended", "TFJobSuspended", "x"))
    assert backend.get("mnist").phase == "Suspended"


@pytest.mark.parametrize("verb", ["suspend", "resume"])
def test_suspend_and_resume_refuse_a_finished_job(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator, verb: str
) -> None:
    submit(backend, TFJOB)
    operator.set_conditions("tfjobs", "default", "mnist", ("Failed", "TFJobFailed", "x"))
    with pytest.raises(SubstrateError, match="already finished"):
        getattr(backend, verb)("mnist")
    assert not [c for c in cluster.client_calls() if c.method == "PATCH"]


def test_interrupt_leaves_a_finished_job_alone(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator
) -> None:
    submit(backend, TFJOB)
    operator.set_conditions("tfjobs", "default", "mnist", ("Succeeded", "TFJobSucceeded", "x"))
    assert backend.interrupt("mnist").phase == "Succeeded"
    assert not [c for c in cluster.client_calls() if c.method == "PATCH"]
