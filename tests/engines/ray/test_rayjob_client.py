"""The SDK/CLI on Kubernetes reads a RayJob's submitter from its batch/v1 Job: ``get`` shows
the replica as the operator's core judges it from the Job's status (Running from a ready
pod, Failed from the Job's Failed condition), at the address of the Job's newest pod; the
Job's pods are no rows of their own; ``logs --replica submitter-0`` (and ``-f``) reads the
Job's newest pod under the replica's name. Against kmock, with the test as operator, Job
controller and kubelet: it creates the Job as the operator builds it and the Job's pods
with their owner reference to the Job, as the Job controller does.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import Job
from kubemill.core import controlled_pod
from kubemill.frameworks import Plan
from kubemill.kinds import load_one
from kubemill.substrates import base
from kubemill.substrates.kubernetes.build import Owner, build_pod
from kubemill.substrates.kubernetes.client import KubernetesBackend
from kubemill.substrates.kubernetes.client.views import view_of
from kubemill.substrates.kubernetes.controlled import ControllerSnapshot, build_controlled
from kubemill.substrates.kubernetes.render import plan_on_kubernetes
from support import kmock_cluster
from support.kube_client_support import ClientClusterThread, Operator, running, terminated
from support.waiting import eventually

EXAMPLE = Path(__file__).parents[3] / "examples" / "ray" / "rayjob-sum.yaml"
NS = "default"
PLURAL = "rayjobs"
NAME = "rj"
SUBMITTER = "rj-submitter-0"
CONTAINER = "ray-job-submitter"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
def client_cluster() -> Iterator[ClientClusterThread]:
    with ClientClusterThread() as thread:
        thread.install_crds()
        yield thread


@pytest.fixture
def client(tmp_path: Path, client_cluster: ClientClusterThread) -> Iterator[KubernetesBackend]:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", client_cluster.url)
    backend = KubernetesBackend(kubeconfig=kubeconfig, poll_interval=0.05)
    yield backend
    backend.close()


@pytest.fixture
def operator(client_cluster: ClientClusterThread) -> Operator:
    return Operator(client_cluster)


def manifest() -> str:
    body = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    body["apiVersion"] = "kubemill.dev/v1"
    body["metadata"]["name"] = NAME
    return yaml.safe_dump(body)


class Cluster:
    """The RayJob submitted, the pods of its cluster created as the operator builds them,
    and the submitter's Job and its pods as the operator and the Job controller make them."""

    def __init__(self, thread: ClientClusterThread, operator: Operator) -> None:
        self.thread = thread
        self.operator = operator
        self.job: Job = operator.job(PLURAL, NS, NAME)
        self.plan: Plan = plan_on_kubernetes(self.job)
        self.submitter = self.plan.replica(SUBMITTER)

    def create_cluster_pods(self) -> None:
        for replica in self.plan.replicas:
            if replica.controller is None:
                pod = build_pod(self.job, replica, owner=Owner.of(self.job))
                self.thread.create(PODS, pod)

    def create_job(self) -> dict[str, Any]:
        pod = build_pod(self.job, self.submitter, owner=Owner.of(self.job))
        created: dict[str, Any] = self.thread.create(JOBS, build_controlled(self.submitter, pod))
        return created

    def create_job_pod(self, name: str) -> dict[str, Any]:
        """A pod of the submitter's Job, as the Job controller makes it from the template."""
        job = self.thread.get(f"{JOBS}/{NAME}")
        template = job["spec"]["template"]
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        meta = {**template["metadata"], "name": name, "namespace": NS, "ownerReferences": [owner]}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
        created: dict[str, Any] = self.thread.create(PODS, body)
        return created

    def job_status(self, status: dict[str, Any]) -> None:
        self.thread.patch(f"{JOBS}/{NAME}/status", {"status": status})


@pytest.fixture
def rayjob(
    client: KubernetesBackend, client_cluster: ClientClusterThread, operator: Operator
) -> Cluster:
    client.submit(load_one(manifest()), base.SubmitOptions())
    cluster = Cluster(client_cluster, operator)
    cluster.create_cluster_pods()
    operator.set_conditions(PLURAL, NS, NAME, ("Created", "RayJobCreated", "created"))
    return cluster


def test_the_submitter_without_its_job_has_no_pod_yet(
    client: KubernetesBackend, rayjob: Cluster
) -> None:
    view = client.get(NAME)

    submitter = next(r for r in view.replicas if r.name == SUBMITTER)
    assert (submitter.phase, submitter.reason) == ("Pending", "NoPod")


def test_get_shows_the_submitter_running_from_its_job_as_the_core_reads_it(
    client: KubernetesBackend, rayjob: Cluster
) -> None:
    rayjob.create_job()
    rayjob.create_job_pod("rj-x7k2p")
    rayjob.operator.pod_status(NS, "rj-x7k2p", running(CONTAINER, ip="10.0.0.9"))
    rayjob.job_status({"active": 1, "ready": 1, "startTime": "2026-01-02T03:04:00Z"})

    view = client.get(NAME)

    # One row per replica of the Plan: the Job's pod is not a "scaled down" row.
    assert [r.name for r in view.replicas] == [r.name for r in rayjob.plan.replicas]
    submitter = next(r for r in view.replicas if r.name == SUBMITTER)
    assert (submitter.phase, submitter.replica_type, submitter.index) == ("Running", "Submitter", 0)
    assert submitter.address == "10.0.0.9"
    assert submitter.started == datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.UTC)
    # The operator's reading of the same Job, and nothing else.
    snapshot = ControllerSnapshot.of(rayjob.thread.get(f"{JOBS}/{NAME}"))
    expected = view_of(controlled_pod(rayjob.submitter, snapshot.observed_as), address="10.0.0.9")
    assert submitter == expected
    # list() reads it alike.
    (listed,) = client.list(NS)
    assert next(r for r in listed.replicas if r.name == SUBMITTER) == submitter


def test_get_shows_the_submitter_failed_when_its_job_gave_up(
    client: KubernetesBackend, rayjob: Cluster
) -> None:
    rayjob.create_job()
    rayjob.create_job_pod("rj-x7k2p")
    rayjob.operator.pod_status(NS, "rj-x7k2p", terminated(CONTAINER, exit_code=1))
    rayjob.job_status(
        {
            "failed": 3,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastTransitionTime": "2026-01-02T03:09:00Z",
                }
            ],
        }
    )

    view = client.get(NAME)

    assert [r.name for r in view.replicas] == [r.name for r in rayjob.plan.replicas]
    submitter = next(r for r in view.replicas if r.name == SUBMITTER)
    assert (submitter.phase, submitter.reason, submitter.restarts) == (
        "Failed",
        "BackoffLimitExceeded",
        3,
    )
    assert submitter.message == "Job has reached the specified backoff limit"
    assert submitter.finished == datetime.datetime(2026, 1, 2, 3, 9, tzinfo=datetime.UTC)


def test_a_namesakes_job_is_not_the_submitters(client: KubernetesBackend, rayjob: Cluster) -> None:
    created = rayjob.create_job()
    # Another owner (a deleted namesake's leftover): the job does not control it.
    rayjob.thread.patch(
        f"{JOBS}/{NAME}",
        {
            "metadata": {
                "ownerReferences": [{**created["metadata"]["ownerReferences"][0], "uid": "gone"}]
            }
        },
    )
    rayjob.job_status({"active": 1, "ready": 1})

    submitter = next(r for r in client.get(NAME).replicas if r.name == SUBMITTER)

    assert (submitter.phase, submitter.reason) == ("Pending", "NoPod")


def test_list_asks_for_jobs_only_when_a_plan_has_a_replica_run_through_one(
    client: KubernetesBackend, client_cluster: ClientClusterThread, rayjob: Cluster
) -> None:
    before = len(client_cluster.client_calls())
    client.list("other")  # no job there: no Plan, no Jobs asked for
    assert not [c for c in client_cluster.client_calls()[before:] if "/jobs" in c.path]

    before = len(client_cluster.client_calls())
    client.list(NS)
    paths = [c.path for c in client_cluster.client_calls()[before:]]
    assert paths[-1] == JOBS


def _lines(client: KubernetesBackend, **kwargs: Any) -> list[tuple[str, str]]:
    return [(line.replica, line.text) for line in client.logs(NAME, **kwargs)]


def test_logs_of_the_submitter_are_its_jobs_newest_pod(
    client: KubernetesBackend, rayjob: Cluster
) -> None:
    rayjob.create_job()
    first = rayjob.create_job_pod("rj-zzzzz")
    rayjob.operator.pod_status(NS, "rj-zzzzz", terminated(CONTAINER, exit_code=1))
    rayjob.operator.start_log(NS, "rj-zzzzz", CONTAINER).write("attempt 1 failed")
    # The Job's retry comes later (creation times have a second's resolution).
    stamp = first["metadata"]["creationTimestamp"]
    eventually(
        lambda: datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") > stamp
    )
    rayjob.create_job_pod("rj-aaaaa")
    rayjob.operator.pod_status(NS, "rj-aaaaa", running(CONTAINER, ip="10.0.0.9"))
    rayjob.operator.start_log(NS, "rj-aaaaa", CONTAINER).write("submitted", "following")
    rayjob.operator.pod_status(NS, "rj-head-0", running("ray-head", ip="10.0.0.1"))
    rayjob.operator.start_log(NS, "rj-head-0", "ray-head").write("head up")
    rayjob.job_status({"active": 1, "ready": 1, "failed": 1})

    assert _lines(client, replica="submitter-0") == [
        (SUBMITTER, "submitted"),
        (SUBMITTER, "following"),
    ]
    assert _lines(client, replica=SUBMITTER) == _lines(client, replica="submitter-0")
    assert _lines(client) == [
        ("rj-head-0", "head up"),
        (SUBMITTER, "submitted"),
        (SUBMITTER, "following"),
    ]
    submitter = next(r for r in client.get(NAME).replicas if r.name == SUBMITTER)
    assert (submitter.phase, submitter.restarts, submitter.address) == ("Running", 1, "10.0.0.9")


def test_logs_follow_reads_the_submitter_until_the_job_has_finished(
    client: KubernetesBackend, rayjob: Cluster
) -> None:
    rayjob.create_job()
    rayjob.create_job_pod("rj-x7k2p")
    rayjob.operator.pod_status(NS, "rj-x7k2p", running(CONTAINER, ip="10.0.0.9"))
    book = rayjob.operator.start_log(NS, "rj-x7k2p", CONTAINER)
    book.write("submitted")
    got: list[tuple[str, str]] = []

    def follow() -> None:
        for line in client.logs(NAME, replica="submitter-0", follow=True):
            got.append((line.replica, line.text))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    eventually(lambda: got == [(SUBMITTER, "submitted")])
    book.write("SUCCEEDED")
    book.end()
    rayjob.operator.set_conditions(PLURAL, NS, NAME, ("Succeeded", "RayJobSucceeded", "done"))
    reader.join(timeout=60)

    assert not reader.is_alive()
    assert got == [(SUBMITTER, "submitted"), (SUBMITTER, "SUCCEEDED")]


def _pod_metrics(name: str, cpu: str, memory: str) -> dict[str, Any]:
    usage = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"name": name, "namespace": NS},
        "timestamp": "2026-12-05T10:00:00Z",
        "containers": [{"name": "c", "usage": usage}],
    }


def test_resources_read_the_submitter_as_its_jobs_newest_pod(
    client: KubernetesBackend, client_cluster: ClientClusterThread, rayjob: Cluster
) -> None:
    rayjob.create_job()
    first = rayjob.create_job_pod("rj-zzzzz")
    stamp = first["metadata"]["creationTimestamp"]
    eventually(
        lambda: datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") > stamp
    )
    rayjob.create_job_pod("rj-aaaaa")  # the Job's retry: the replica now
    rayjob.operator.pod_status(NS, "rj-aaaaa", running(CONTAINER, ip="10.0.0.9"))
    client_cluster.answer(
        "GET",
        rf"/apis/metrics\.k8s\.io/v1beta1/namespaces/{NS}/pods",
        200,
        {
            "kind": "PodMetricsList",
            "items": [
                _pod_metrics("rj-head-0", "1", "1Gi"),
                _pod_metrics("rj-zzzzz", "2", "2Gi"),  # the earlier attempt: not the replica
                _pod_metrics("rj-aaaaa", "250m", "64Mi"),
                _pod_metrics("other-0", "3", "3Gi"),  # another job's
            ],
        },
    )

    report = client.resources(NAME)

    # Under the replicas' names, as get and logs show them; the submitter is its newest pod.
    assert set(report.replicas) == {"rj-head-0", SUBMITTER}
    [submitter] = report.replicas[SUBMITTER]
    assert (submitter.cpu_cores, submitter.memory_bytes) == (0.25, 64 << 20)
    [head] = report.replicas["rj-head-0"]
    assert head.cpu_cores == 1.0
