"""The core's verdict on a service cluster (a MarsCluster): objects, Ready, the endpoint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from kubemill.api import ConditionType
from kubemill.core import (
    SERVICE_CLUSTER,
    CreateObject,
    Observed,
    ObservedChild,
    ObservedPod,
    RecordEvent,
    UpdateObject,
)
from kubemill.core import reconcile as core_reconcile
from kubemill.engines.mars.api import MarsCluster
from kubemill.engines.mars.framework import Mars, object_names
from kubemill.frameworks import Plan

NOW = datetime(2026, 1, 1, tzinfo=UTC)
reconcile = partial(core_reconcile, lifecycle=SERVICE_CLUSTER)
"""The core as a substrate calls it for a MarsCluster: with its engine's lifecycle."""
NAMES = object_names("m")


class _NoNetwork:
    def endpoint(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("a Mars cluster needs no addresses")

    replica_host = files_path = host_name = endpoint


def cluster(**spec: object) -> tuple[MarsCluster, Plan]:
    job = MarsCluster.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ns", "uid": "u-1"},
            "spec": {"workerNum": 3, "workerCpu": 1, "workerMem": "1g", **spec},
        }
    )
    return job, Mars().plan(job, _NoNetwork())  # type: ignore[arg-type]


def everything_created(**more: object) -> Observed:
    children = tuple(
        ObservedChild(kind, NAMES[key])  # type: ignore[arg-type]
        for kind, key in (
            ("Role", "Role"),
            ("RoleBinding", "RoleBinding"),
            ("Deployment", "Supervisor"),
            ("Deployment", "Worker"),
        )
    )
    return Observed(children=children, services=frozenset({NAMES["Service"]}), **more)  # type: ignore[arg-type]


def pod(
    rtype: str, n: int, *, ready: bool = True, host: str = "10.0.0.1", **kw: object
) -> ObservedPod:
    return ObservedPod(
        name=f"m-{rtype.lower()}-abc-{n}",
        replica_type=rtype,
        index=-1,
        phase="Running",
        ready=ready,
        host_ip=host,
        **kw,  # type: ignore[arg-type]
    )


def test_the_first_pass_creates_every_object_in_the_plans_order() -> None:
    job, plan = cluster()
    result = reconcile(job, plan, Observed(), NOW)
    creates = [a for a in result.actions if isinstance(a, CreateObject)]
    assert [(a.kind, a.name) for a in creates] == [
        ("Role", NAMES["Role"]),
        ("RoleBinding", NAMES["RoleBinding"]),
        ("Deployment", NAMES["Supervisor"]),
        ("Deployment", NAMES["Worker"]),
        ("Service", NAMES["Service"]),
    ]
    assert result.status.is_true(ConditionType.CREATED)
    ready = result.status.condition(ConditionType.READY)
    assert ready is not None and ready.status == "False"


def test_ready_with_the_endpoint_once_enough_pods_are_and_never_succeeded() -> None:
    job, plan = cluster(minWorkerNum=2)
    pods = (pod("Supervisor", 0, host="10.0.0.7"), pod("Worker", 0), pod("Worker", 1))
    observed = everything_created(pods=pods, node_ports=((NAMES["Service"], 30001),))
    result = reconcile(job, plan, observed, NOW)
    assert not [a for a in result.actions if isinstance(a, CreateObject)]
    assert result.status.is_true(ConditionType.READY)
    assert result.status.endpoint == "http://10.0.0.7:30001"
    assert result.status.ready_replicas == {"Supervisor": 1, "Worker": 2}
    assert not result.status.is_true(ConditionType.SUCCEEDED)
    # The same world again: nothing to do, not even an event.
    again = reconcile(job.model_copy(update={"status": result.status}), plan, observed, NOW)
    assert again.actions == ()
    assert again.status == result.status


@pytest.mark.parametrize(
    ("pods", "ports", "why"),
    [
        pytest.param(
            (pod("Supervisor", 0), pod("Worker", 0), pod("Worker", 1, ready=False)),
            ((NAMES["Service"], 30001),),
            "1 of 2 Worker replica(s) needed are ready",
            id="too-few-workers",
        ),
        pytest.param(
            (pod("Supervisor", 0, ready=False), pod("Worker", 0), pod("Worker", 1)),
            ((NAMES["Service"], 30001),),
            "0 of 1 Supervisor replica(s) needed are ready",
            id="no-supervisor",
        ),
        pytest.param(
            (pod("Supervisor", 0), pod("Worker", 0), pod("Worker", 1, deleting=True)),
            ((NAMES["Service"], 30001),),
            "1 of 2 Worker",
            id="a-deleting-pod-does-not-count",
        ),
        pytest.param(
            (pod("Supervisor", 0), pod("Worker", 0), pod("Worker", 1)),
            (),
            "has no node port yet",
            id="no-node-port",
        ),
    ],
)
def test_not_ready_says_what_is_missing(
    pods: tuple[ObservedPod, ...], ports: tuple[tuple[str, int], ...], why: str
) -> None:
    job, plan = cluster(minWorkerNum=2)
    result = reconcile(job, plan, everything_created(pods=pods, node_ports=ports), NOW)
    ready = result.status.condition(ConditionType.READY)
    assert ready is not None and ready.status == "False" and why in ready.message
    assert result.status.endpoint is None


def test_a_changed_spec_rewrites_the_objects_whose_body_changed() -> None:
    job, plan = cluster()
    created = {
        (a.kind, a.name): a.digest
        for a in reconcile(job, plan, Observed(), NOW).actions
        if isinstance(a, CreateObject)
    }
    recorded = tuple(
        ObservedChild(kind, name, digest)  # type: ignore[arg-type]
        for (kind, name), digest in created.items()
        if kind != "Service"
    )
    observed = Observed(children=recorded, services=frozenset({NAMES["Service"]}))
    same = reconcile(job, plan, observed, NOW)
    assert not [a for a in same.actions if isinstance(a, CreateObject | UpdateObject)]
    bigger, plan = cluster(workerNum=5)
    updates = [
        a for a in reconcile(bigger, plan, observed, NOW).actions if isinstance(a, UpdateObject)
    ]
    assert [(a.kind, a.name) for a in updates] == [("Deployment", NAMES["Worker"])]
    assert updates[0].digest != created["Deployment", NAMES["Worker"]]


def test_a_stop_request_fails_the_cluster_and_scales_it_to_nothing_once() -> None:
    job, plan = cluster(minWorkerNum=2)
    created = {
        (a.kind, a.name): a.digest
        for a in reconcile(job, plan, Observed(), NOW).actions
        if isinstance(a, CreateObject)
    }
    recorded = tuple(
        ObservedChild(kind, name, digest)  # type: ignore[arg-type]
        for (kind, name), digest in created.items()
        if kind != "Service"
    )
    pods = (pod("Supervisor", 0), pod("Worker", 0), pod("Worker", 1))
    observed = Observed(
        children=recorded,
        services=frozenset({NAMES["Service"]}),
        pods=pods,
        node_ports=((NAMES["Service"], 30001),),
    )
    ready = reconcile(job, plan, observed, NOW).status
    assert ready.is_true(ConditionType.READY)
    job = job.model_copy(update={"status": ready})
    job.metadata.annotations["kubemill.dev/stop"] = "me"
    result = reconcile(job, plan, observed, NOW)
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "Interrupted" and "me" in failed.message
    assert not result.status.is_true(ConditionType.READY) and result.status.endpoint is None
    scaled = [a for a in result.actions if isinstance(a, UpdateObject)]
    assert {(a.kind, a.name, a.stopped) for a in scaled} == {
        ("Deployment", NAMES["Supervisor"], True),
        ("Deployment", NAMES["Worker"], True),
    }
    # Once scaled (the digests recorded), nothing more, and nothing is ever created again.
    after = Observed(
        children=tuple(
            ObservedChild(
                c.kind, c.name, next((a.digest for a in scaled if a.name == c.name), c.digest)
            )
            for c in recorded
        )
    )
    job = job.model_copy(update={"status": result.status})
    assert reconcile(job, plan, after, NOW).actions == ()


def test_losing_readiness_turns_ready_false_and_the_counts_stay_current() -> None:
    job, plan = cluster(minWorkerNum=2)
    ports = ((NAMES["Service"], 30001),)
    up = (pod("Supervisor", 0), pod("Worker", 0), pod("Worker", 1))
    first = reconcile(job, plan, everything_created(pods=up, node_ports=ports), NOW)
    job = job.model_copy(update={"status": first.status})
    down = reconcile(job, plan, everything_created(pods=up[:2], node_ports=ports), NOW)
    ready = down.status.condition(ConditionType.READY)
    assert ready is not None and ready.status == "False" and "1 of 2 Worker" in ready.message
    assert [a.reason for a in down.actions if isinstance(a, RecordEvent)] == ["MarsClusterNotReady"]
    job = job.model_copy(update={"status": down.status})
    later = NOW + timedelta(seconds=5)
    none = reconcile(job, plan, everything_created(pods=up[:1], node_ports=ports), later)
    ready = none.status.condition(ConditionType.READY)
    assert ready is not None and "0 of 2 Worker" in ready.message
    assert (
        ready.last_transition_time
        == down.status.condition(ConditionType.READY).last_transition_time
    )  # type: ignore[union-attr]
    assert not [a for a in none.actions if isinstance(a, RecordEvent)]  # a count, no turn
