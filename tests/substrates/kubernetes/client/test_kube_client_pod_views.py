"""``kubemill get`` and the operator read a pod the same way, tricky pods included.

The operator turns its cached pod snapshots into the core's ``ObservedPod``
(:func:`kubemill.substrates.kubernetes.observe.observe`); the client's replica views
(:func:`kubemill.substrates.kubernetes.client.replica_views`) must say the same of the same
pod: phase, exit code, restarts, times and reason. Each row is a pod status as a kubelet
reports it in one of the cases where a second parser used to drift (evicted, OOMKilled,
image pull back-off, Terminating, restarted in place, a failing init container, a lost
node, ...), with what both sides must make of it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubemill.core import ObservedPod
from kubemill.kinds import load_one
from kubemill.substrates.base import ReplicaView, SubmitOptions
from kubemill.substrates.kubernetes.client import KubernetesBackend, replica_views
from kubemill.substrates.kubernetes.observe import PodSnapshot, observe
from kubemill.substrates.kubernetes.render import plan_on_kubernetes
from support.kube_client_support import Operator

UID = "job-uid-1"
JOB = load_one(
    {
        "apiVersion": "kubemill.dev/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "default", "uid": UID},
        "spec": {
            "tfReplicaSpecs": {
                "PS": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "tensorflow", "image": "trainer:1"},
                            ]
                        }
                    },
                },
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "sidecar", "image": "proxy:1"},
                                {"name": "tensorflow", "image": "trainer:1"},
                            ]
                        }
                    },
                },
            }
        },
    }
)

T0, T1, T2, T3 = (
    "2026-01-02T03:04:00Z",
    "2026-01-02T03:04:05Z",
    "2026-01-02T03:05:06Z",
    "2026-01-02T03:06:07Z",
)


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp).astimezone(UTC)


def container(
    name: str = "tensorflow",
    *,
    state: dict[str, Any],
    last: dict[str, Any] | None = None,
    restarts: int = 0,
) -> dict[str, Any]:
    """A container status with every field a kubelet fills in."""
    return {
        "name": name,
        "image": "trainer:1",
        "imageID": "",
        "ready": "running" in state,
        "restartCount": restarts,
        "state": state,
        "lastState": last or {},
    }


RUNNING = {"running": {"startedAt": T1}}


def pod(
    name: str = "mnist-worker-0",
    *,
    phase: str = "Running",
    main: dict[str, Any] | None = None,
    sidecar: dict[str, Any] | None = None,
    init: list[dict[str, Any]] | None = None,
    reason: str | None = None,
    message: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
    deleting: bool = False,
    start_time: str | None = T0,
) -> dict[str, Any]:
    """A pod of the job as the operator creates it, with the status a kubelet reports."""
    rtype, index = name.split("-")[1:]
    status: dict[str, Any] = {"phase": phase, "podIP": "10.1.0.7"}
    if start_time:
        status["startTime"] = start_time
    statuses = [s for s in (sidecar, main) if s is not None]
    if statuses:
        status["containerStatuses"] = statuses
    if init is not None:
        status["initContainerStatuses"] = init
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    ready = phase == "Running" and main is not None and "running" in main["state"]
    status["conditions"] = conditions or [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True" if ready else "False"},
    ]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "creationTimestamp": T0,
        "labels": {
            "kubemill.dev/job-name": "mnist",
            "kubemill.dev/replica-type": rtype,
            "kubemill.dev/replica-index": index,
        },
        "ownerReferences": [
            {
                "apiVersion": "kubemill.dev/v1",
                "kind": "TFJob",
                "name": "mnist",
                "uid": UID,
                "controller": True,
            }
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = T3
        meta["deletionGracePeriodSeconds"] = 30
    containers = [{"name": "tensorflow", "ports": [{"name": "tfjob-port", "containerPort": 2222}]}]
    return {"metadata": meta, "spec": {"containers": containers}, "status": status}


def terminated(code: int, reason: str, *, started: str = T1, finished: str = T2) -> dict:
    return {
        "terminated": {
            "exitCode": code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": finished,
        }
    }


CASES = [
    pytest.param(
        pod(main=container(state=RUNNING)),
        {"phase": "Running", "exit_code": None, "started": at(T1), "finished": None, "reason": ""},
        "",
        id="running",
    ),
    pytest.param(
        pod(
            phase="Failed",
            reason="Evicted",
            message="The node was low on resource: memory.",
            main=container(state=terminated(137, "ContainerStatusUnknown")),
        ),
        {"phase": "Failed", "exit_code": 137, "reason": "Evicted", "finished": at(T2)},
        "The node was low on resource: memory.",
        id="evicted",
    ),
    pytest.param(
        pod(phase="Failed", reason="Evicted", message="low on memory", main=None),
        {"phase": "Failed", "exit_code": None, "reason": "Evicted", "started": at(T0)},
        "low on memory",
        id="evicted-before-its-container-reported",
    ),
    pytest.param(
        pod("mnist-ps-0", phase="Failed", main=container(state=terminated(137, "OOMKilled"))),
        {
            "phase": "Failed",
            "exit_code": 137,
            "reason": "OOMKilled",
            "replica_type": "PS",
            "started": at(T1),
            "finished": at(T2),
        },
        "",
        id="oom-killed",
    ),
    pytest.param(
        pod(
            main=container(
                state={
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": "back-off 10s restarting failed container",
                    }
                },
                last=terminated(137, "OOMKilled"),
                restarts=1,
            )
        ),
        {
            "phase": "Running",
            "exit_code": 137,
            "restart_count": 1,
            "reason": "CrashLoopBackOff",
            "finished": at(T2),
            "ready": False,
        },
        "back-off 10s restarting failed container",
        id="oom-killed-waiting-to-restart-in-place",
    ),
    pytest.param(
        pod(
            main=container(
                state={"running": {"startedAt": T3}},
                last=terminated(1, "Error"),
                restarts=3,
            )
        ),
        {
            "phase": "Running",
            "exit_code": None,
            "restart_count": 3,
            "started": at(T3),
            "finished": None,
            "ready": True,
        },
        "",
        id="restarted-in-place-and-running-again",
    ),
    pytest.param(
        pod(
            phase="Pending",
            main=container(
                state={
                    "waiting": {
                        "reason": "ImagePullBackOff",
                        "message": 'Back-off pulling image "trainer:1"',
                    }
                }
            ),
        ),
        {"phase": "Pending", "exit_code": None, "reason": "ImagePullBackOff", "started": at(T0)},
        'Back-off pulling image "trainer:1"',
        id="image-pull-back-off",
    ),
    pytest.param(
        pod(main=container(state=RUNNING), deleting=True),
        {"phase": "Running", "deleting": True, "exit_code": None},
        "the pod is being deleted",
        id="terminating",
    ),
    pytest.param(
        pod(
            phase="Failed",
            init=[
                container("fetch-data", state=terminated(2, "Error")),
            ],
            main=container(state={"waiting": {"reason": "PodInitializing"}}),
        ),
        {"phase": "Failed", "exit_code": None, "reason": "Init:Error"},
        "",
        id="init-container-failed",
    ),
    pytest.param(
        pod(
            phase="Pending",
            init=[
                container("ok", state=terminated(0, "Completed")),
                container(
                    "fetch-data",
                    state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
                    last=terminated(1, "Error"),
                    restarts=2,
                ),
            ],
            main=container(state={"waiting": {"reason": "PodInitializing"}}),
        ),
        {
            "phase": "Pending",
            "exit_code": None,
            "restart_count": 0,
            "reason": "Init:CrashLoopBackOff",
        },
        "back-off 20s",
        id="init-container-crash-looping",
    ),
    pytest.param(
        pod(
            phase="Pending",
            init=[container("fetch-data", state={"running": {"startedAt": T1}})],
            main=container(state={"waiting": {"reason": "PodInitializing"}}),
        ),
        {"phase": "Pending", "exit_code": None, "reason": "PodInitializing"},
        "",
        id="init-container-still-running",
    ),
    pytest.param(
        pod(
            phase="Unknown",
            reason="NodeLost",
            message="Node n1 which was running pod mnist-worker-0 is unresponsive",
            main=container(state=RUNNING),
        ),
        {"phase": "Unknown", "exit_code": None, "reason": "NodeLost"},
        "Node n1 which was running pod mnist-worker-0 is unresponsive",
        id="lost-node",
    ),
    pytest.param(
        pod(
            phase="Pending",
            start_time=None,
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu.",
                }
            ],
        ),
        {"phase": "Pending", "reason": "Unschedulable", "started": None, "restart_count": 0},
        "0/3 nodes are available: 3 Insufficient cpu.",
        id="unschedulable",
    ),
    pytest.param(
        pod(phase="Bogus", main=container(state=RUNNING)),
        {"phase": "Unknown"},
        "",
        id="a-phase-no-kubelet-reports",
    ),
    pytest.param(
        pod(
            sidecar=container("sidecar", state=terminated(2, "Error"), restarts=9),
            main=container(state=RUNNING),
        ),
        {"phase": "Running", "exit_code": None, "restart_count": 0, "reason": ""},
        "",
        id="failed-sidecar-is-not-the-replica",
    ),
    pytest.param(
        pod("mnist-worker-5", phase="Succeeded", main=container(state=terminated(0, "Completed"))),
        {"replica_type": "Worker", "index": 5, "exit_code": 0, "reason": "Completed"},
        "",
        id="stray-scaled-down-typed-by-its-labels",
    ),
]


def agree(view: ReplicaView, seen: ObservedPod) -> None:
    """The view says what the core sees, field for field."""
    assert (
        view.name,
        view.replica_type,
        view.index,
        view.phase,
        view.exit_code,
        view.restarts,
        view.started,
        view.finished,
        view.reason,
    ) == (
        seen.name,
        seen.replica_type,
        seen.index,
        seen.phase,
        seen.exit_code,
        seen.restart_count,
        seen.started,
        seen.finished,
        seen.reason,
    )


@pytest.mark.parametrize(("body", "expected", "message"), CASES)
def test_get_shows_what_the_operator_observes(
    body: dict[str, Any], expected: dict[str, Any], message: str
) -> None:
    plan = plan_on_kubernetes(JOB)
    (seen,) = observe(JOB, plan, pods=[PodSnapshot.of(body)], services=[], pod_group=None).pods
    assert {key: getattr(seen, key) for key in expected} == expected

    views = {v.name: v for v in replica_views(JOB, [body])}
    view = views[body["metadata"]["name"]]
    agree(view, seen)
    assert view.message == message
    assert view.address == "10.1.0.7:2222"
    # The replicas without a pod are still listed, and only once each.
    assert sorted(views) == sorted(
        {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1", body["metadata"]["name"]}
    )


def test_a_pod_read_back_from_the_cluster_is_shown_as_the_operator_observes_it(
    backend: KubernetesBackend, operator: Operator
) -> None:
    """The same over HTTP: pods written to the API server, read by ``get`` and compared
    with what the operator's observation makes of the pods as the server returns them."""
    job = load_one({**JOB.to_wire(), "metadata": {"name": "mnist"}})
    backend.submit(job, SubmitOptions(detach=True))
    operator.create_pods("tfjobs", "default", "mnist")
    statuses = {
        "mnist-ps-0": CASES[1].values[0]["status"],  # evicted
        "mnist-worker-0": CASES[4].values[0]["status"],  # OOMKilled, waiting to restart
        "mnist-worker-1": CASES[8].values[0]["status"],  # init container failed
    }
    for name, status in statuses.items():
        operator.pod_status("default", name, status)

    view = backend.get("mnist")

    stored = operator.job("tfjobs", "default", "mnist")
    pods = operator.cluster.list("/api/v1/namespaces/default/pods")
    observed = observe(
        stored,
        plan_on_kubernetes(stored),
        pods=[PodSnapshot.of(p) for p in pods],
        services=[],
        pod_group=None,
    )
    by_name = {p.name: p for p in observed.pods}
    assert [r.name for r in view.replicas] == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    for replica in view.replicas:
        agree(replica, by_name[replica.name])
    assert [(r.reason, r.exit_code) for r in view.replicas] == [
        ("Evicted", 137),
        ("CrashLoopBackOff", 137),
        ("Init:Error", None),
    ]
