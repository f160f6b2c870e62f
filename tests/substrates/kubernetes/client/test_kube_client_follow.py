"""Waiting for a job and reading (and following) its replicas' logs on the kmock cluster.

The test writes pod statuses and log lines as the kubelet would, from its own thread,
while the backend waits or follows; it never asserts how long anything took.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kubemill.kinds import load_one
from kubemill.substrates import base
from kubemill.substrates.kubernetes.client import KubernetesBackend
from kubemill.substrates.kubernetes.client import logs as logs_module
from support.kube_client_support import (
    ClientClusterThread,
    LogBook,
    Operator,
    later,
    running,
    status_body,
    terminated,
)
from support.waiting import eventually

JOB = """
apiVersion: kubemill.dev/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  pytorchReplicaSpecs:
    Master:
      template:
        spec:
          containers: [{name: pytorch, image: trainer:1, command: [python, ddp.py]}]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - {name: pytorch, image: trainer:1, command: [python, ddp.py]}
            - {name: sidecar, image: proxy:1}
"""
NS = "default"
PLURAL = "pytorchjobs"


@pytest.fixture
def job(backend: KubernetesBackend, operator: Operator) -> None:
    """The job submitted, its pods created, the master and worker-0 running, worker-1 not."""
    backend.submit(load_one(JOB), base.SubmitOptions())
    operator.create_pods(PLURAL, NS, "ddp")
    operator.set_conditions(PLURAL, NS, "ddp", ("Created", "PyTorchJobCreated", "created"))
    operator.pod_status(NS, "ddp-master-0", running("pytorch", ip="10.0.0.1"))
    operator.pod_status(NS, "ddp-worker-0", running("pytorch", ip="10.0.0.2"))


class Collector:
    """Consumes an iterator of log lines in a thread, so the test can act meanwhile."""

    def __init__(self, lines: Iterator[base.LogLine]) -> None:
        self.lines: list[base.LogLine] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(lines,), daemon=True)
        self._thread.start()

    def _run(self, lines: Iterator[base.LogLine]) -> None:
        try:
            for line in lines:
                self.lines.append(line)
        except BaseException as exc:
            self.error = exc

    def texts(self, replica: str) -> list[str]:
        return [line.text for line in self.lines if line.replica == replica]

    def join(self) -> None:
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "following the logs did not end"
        if self.error is not None:
            raise self.error


# --- wait ----------------------------------------------------------------------------------


def test_wait_returns_when_the_job_succeeds(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator, job: None
) -> None:
    def succeed() -> None:
        operator.pod_status(NS, "ddp-master-0", terminated("pytorch", exit_code=0, ip="10.0.0.1"))
        operator.set_conditions(
            PLURAL,
            NS,
            "ddp",
            ("Created", "PyTorchJobCreated", "created"),
            ("Succeeded", "PyTorchJobSucceeded", "PyTorchJob ddp is successfully completed."),
        )

    with later(0.3, succeed):
        view = backend.wait("ddp", timeout=30)

    assert view.finished
    assert view.phase == "Succeeded"
    assert view.replicas[0].exit_code == 0
    watches = [c for c in cluster.client_calls() if c.watch]
    assert watches, "wait watches the job rather than polling it"
    assert {c.params["fieldSelector"] for c in watches} == {"metadata.name=ddp"}


def test_wait_starts_over_when_its_watch_is_too_old(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator, job: None
) -> None:
    gone = cluster.answer(
        "GET",
        r"/pytorchjobs$",
        410,
        status_body(410, "Expired", "too old resource version: 1 (42)"),
        times=2,
    )
    succeed = ("Succeeded", "PyTorchJobSucceeded", "done")

    def succeed_once_both_watches_were_refused() -> None:
        # Not after a fixed delay: on a loaded machine the job would finish before the
        # second watch, and wait would rightly end with one refusal seen.
        eventually(lambda: gone.hits == 2, "both watches refused")
        operator.set_conditions(PLURAL, NS, "ddp", succeed)

    with later(0, succeed_once_both_watches_were_refused):
        assert backend.wait("ddp", timeout=30).phase == "Succeeded"
    assert gone.hits == 2


def test_wait_returns_the_unfinished_job_after_the_timeout(
    backend: KubernetesBackend, job: None
) -> None:
    view = backend.wait("ddp", timeout=0.3)
    assert not view.finished
    assert view.phase == "Created"


def test_wait_on_a_job_deleted_meanwhile_is_job_not_found(
    cluster: ClientClusterThread, backend: KubernetesBackend, job: None
) -> None:
    with (
        later(0.3, lambda: cluster.delete(f"/apis/kubemill.dev/v1/namespaces/{NS}/{PLURAL}/ddp")),
        pytest.raises(base.JobNotFound, match="was deleted while we waited"),
    ):
        backend.wait("ddp", timeout=30)


# --- logs ----------------------------------------------------------------------------------


def test_logs_are_read_replica_after_replica_from_the_main_container(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator, job: None
) -> None:
    operator.start_log(NS, "ddp-master-0", "pytorch").write("master up", "epoch 1")
    operator.start_log(NS, "ddp-worker-0", "pytorch").write("worker up")
    # worker-1's container has not started: no log yet, which is no error.

    lines = list(backend.logs("ddp"))

    assert [(line.replica, line.text) for line in lines] == [
        ("ddp-master-0", "master up"),
        ("ddp-master-0", "epoch 1"),
        ("ddp-worker-0", "worker up"),
    ]
    assert all(line.time is not None for line in lines)
    log_calls = [c for c in cluster.client_calls() if c.path.endswith("/log")]
    assert {c.params["container"] for c in log_calls} == {"pytorch"}  # not the sidecar
    assert {c.params["timestamps"] for c in log_calls} == {"true"}
    assert not any("follow" in c.params for c in log_calls)


@pytest.mark.parametrize("wanted", ["worker-0", "Worker-0", "ddp-worker-0"])
def test_logs_of_one_replica(
    backend: KubernetesBackend, operator: Operator, job: None, wanted: str
) -> None:
    operator.start_log(NS, "ddp-master-0", "pytorch").write("master")
    operator.start_log(NS, "ddp-worker-0", "pytorch").write("worker")
    assert [line.text for line in backend.logs("ddp", replica=wanted)] == ["worker"]


def test_logs_of_an_unknown_replica_lists_the_replicas(
    backend: KubernetesBackend, job: None
) -> None:
    with pytest.raises(
        base.SubstrateError,
        match=r"job ddp has no replica 'worker-9' \(its replicas: master-0, worker-0, worker-1\)",
    ):
        backend.logs("ddp", replica="worker-9")


def test_follow_streams_every_replica_until_the_job_has_finished(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator, job: None
) -> None:
    master = operator.start_log(NS, "ddp-master-0", "pytorch")
    worker = operator.start_log(NS, "ddp-worker-0", "pytorch")
    master.write("m1")
    collector = Collector(backend.logs("ddp", follow=True))
    eventually(lambda: collector.texts("ddp-master-0") == ["m1"], "the first line")

    # Lines arrive while followed; worker-1 starts late and is picked up.
    master.write("m2")
    worker.write("w0-a")
    late = operator.start_log(NS, "ddp-worker-1", "pytorch")
    late.write("w1-a")
    operator.pod_status(NS, "ddp-worker-1", running("pytorch", ip="10.0.0.3"))
    eventually(lambda: collector.texts("ddp-worker-1") == ["w1-a"], "the late worker's line")

    # worker-0 exits and the kubelet restarts its container: a new instance, a new log.
    worker.write("w0-b")
    worker.end()
    eventually(lambda: collector.texts("ddp-worker-0") == ["w0-a", "w0-b"], "worker-0 ended")
    restarted = operator.start_log(NS, "ddp-worker-0", "pytorch")
    restarted.write("w0-after-restart")
    operator.pod_status(
        NS, "ddp-worker-0", running("pytorch", ip="10.0.0.2", restarts=1, last_exit=1)
    )
    eventually(lambda: "w0-after-restart" in collector.texts("ddp-worker-0"), "the restart")

    # Everything ends: containers exit, the operator marks the job Succeeded.
    master.write("m3")
    for name, book in (("ddp-master-0", master), ("ddp-worker-1", late)):
        book.end()
        operator.pod_status(NS, name, terminated("pytorch", exit_code=0))
    restarted.end()
    operator.pod_status(NS, "ddp-worker-0", terminated("pytorch", exit_code=0, restarts=1))
    operator.set_conditions(PLURAL, NS, "ddp", ("Succeeded", "PyTorchJobSucceeded", "done"))
    collector.join()

    assert collector.texts("ddp-master-0") == ["m1", "m2", "m3"]
    assert collector.texts("ddp-worker-0") == ["w0-a", "w0-b", "w0-after-restart"]
    assert collector.texts("ddp-worker-1") == ["w1-a"]
    follows = [c for c in cluster.client_calls() if c.path.endswith("/log")]
    assert {c.params.get("follow") for c in follows} == {"true"}


def test_follow_resumes_a_cut_stream_without_repeating_lines(
    backend: KubernetesBackend, operator: Operator, job: None
) -> None:
    master = operator.start_log(NS, "ddp-master-0", "pytorch")
    master.write("before-1", "before-2")
    collector = Collector(backend.logs("ddp", replica="master-0", follow=True))
    eventually(lambda: len(collector.texts("ddp-master-0")) == 2, "the first lines")

    master.cut()  # the connection drops; the container runs on
    eventually(lambda: master.follows >= 2, "a resumed stream")
    master.write("after-1")
    master.end()
    operator.pod_status(NS, "ddp-master-0", terminated("pytorch", exit_code=0))
    operator.set_conditions(PLURAL, NS, "ddp", ("Succeeded", "PyTorchJobSucceeded", "done"))
    collector.join()

    assert collector.texts("ddp-master-0") == ["before-1", "before-2", "after-1"]


def test_follow_gives_a_restarted_containers_lines_once_though_its_status_came_late(
    backend: KubernetesBackend, operator: Operator, job: None
) -> None:
    """The container exits and the kubelet restarts it before the pod's status says so: the
    follower resumes what it takes for a cut stream, and the API serves it the new
    instance's log; once the status shows the restart, the new instance's own stream must
    not give those lines again."""
    worker = operator.start_log(NS, "ddp-worker-0", "pytorch")
    worker.write("w0-a")
    collector = Collector(backend.logs("ddp", replica="worker-0", follow=True))
    eventually(lambda: collector.texts("ddp-worker-0") == ["w0-a"], "the first line")

    worker.end()  # the pod's status still says running, restartCount 0
    restarted = operator.start_log(NS, "ddp-worker-0", "pytorch")
    restarted.write("w0-after-restart")
    eventually(lambda: restarted.follows >= 1, "the cut stream resumed on the new instance")
    eventually(lambda: "w0-after-restart" in collector.texts("ddp-worker-0"), "its line")

    operator.pod_status(
        NS, "ddp-worker-0", running("pytorch", ip="10.0.0.2", restarts=1, last_exit=1)
    )
    eventually(lambda: restarted.follows >= 2, "the new instance's own stream")
    restarted.write("w0-later")
    restarted.end()
    for name in ("ddp-master-0", "ddp-worker-1"):
        operator.pod_status(NS, name, terminated("pytorch", exit_code=0))
    operator.pod_status(NS, "ddp-worker-0", terminated("pytorch", exit_code=0, restarts=1))
    operator.set_conditions(PLURAL, NS, "ddp", ("Succeeded", "PyTorchJobSucceeded", "done"))
    collector.join()

    assert collector.texts("ddp-worker-0") == ["w0-a", "w0-after-restart", "w0-later"]


def test_follow_lets_go_of_pods_left_running_after_the_job_finished(
    backend: KubernetesBackend,
    operator: Operator,
    job: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(logs_module, "FINISH_GRACE", 0.2)
    # cleanPodPolicy None: a worker keeps running after the job succeeded.
    operator.start_log(NS, "ddp-worker-0", "pytorch").write("serving")
    operator.set_conditions(PLURAL, NS, "ddp", ("Succeeded", "PyTorchJobSucceeded", "done"))
    collector = Collector(backend.logs("ddp", follow=True))
    collector.join()
    assert collector.texts("ddp-worker-0") == ["serving"]


def test_follow_ends_when_the_job_is_deleted(
    cluster: ClientClusterThread, backend: KubernetesBackend, operator: Operator, job: None
) -> None:
    book: LogBook = operator.start_log(NS, "ddp-master-0", "pytorch")
    book.write("working")
    collector = Collector(backend.logs("ddp", follow=True))
    eventually(lambda: collector.texts("ddp-master-0") == ["working"], "the line")
    backend.delete("ddp")  # the pods go with it (garbage collection), their streams end
    collector.join()
    pods: list[Any] = cluster.list(f"/api/v1/namespaces/{NS}/pods")
    assert pods == []


def test_follow_says_when_no_operator_acts(cluster: ClientClusterThread, kubeconfig: Any) -> None:
    backend = KubernetesBackend(kubeconfig=kubeconfig, operator_timeout=0.3, poll_interval=0.05)
    backend.submit(load_one(JOB), base.SubmitOptions())
    from kubemill.substrates.kubernetes.client.errors import OperatorNotActing

    with pytest.raises(OperatorNotActing, match="has not been picked up"):
        list(backend.logs("ddp", follow=True))
