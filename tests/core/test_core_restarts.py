"""Restart accounting along histories: in-place restarts, recreations and deletions mixed.

Each case drives one job through a list of beats. A beat changes the world (a replica
restarts in place, is evicted, vanishes, the job is suspended or resumed), then the job is
reconciled until nothing is left to do, and the beat states the total restarts, the retired
part and the job's state it expects. The fake substrate applies the core's deletions at
once, so a deleted pod is simply gone at the next pass (the contract allows that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from corekit import FakeSubstrate, at, non_events, plan_for, pod, tfjob, with_status

from kubemill.api import ConditionType, Job, JobStatus, ReplicaStatus
from kubemill.core import DeletePod, DeleteService, Observed, ReconcileResult, reconcile
from kubemill.frameworks.plan import Plan, replica_name

Change = Callable[[FakeSubstrate, Job], Job]


def restart_in_place(short: str, times: int = 1) -> Change:
    """The kubelet restarted the replica's container ``times`` more times."""

    def change(world: FakeSubstrate, job: Job) -> Job:
        name = replica_name(world.plan.name, *_split(short))
        current = world.pods[name]
        world.pods[name] = replace(
            current, restart_count=current.restart_count + times, exit_code=1
        )
        return job

    return change


def evict(short: str) -> Change:
    """The pod ended Failed without an exit code of its own (evicted): it is recreated."""

    def change(world: FakeSubstrate, job: Job) -> Job:
        world.set_phase(short, "Failed", reason="Evicted")
        return job

    return change


def vanish(short: str) -> Change:
    """The pod was deleted behind the core's back (kubectl delete pod, a lost node)."""

    def change(world: FakeSubstrate, job: Job) -> Job:
        del world.pods[replica_name(world.plan.name, *_split(short))]
        return job

    return change


def suspend(value: bool) -> Change:
    def change(world: FakeSubstrate, job: Job) -> Job:
        job = job.model_copy(deep=True)
        job.run_policy.suspend = value
        return job

    return change


def nothing(world: FakeSubstrate, job: Job) -> Job:
    return job


def _split(short: str) -> tuple[str, int]:
    rtype, _, index = short.rpartition("-")
    return rtype, int(index)


@dataclass(frozen=True)
class Beat:
    change: Change
    restarts: int
    """Worker restarts after the beat (what ``backoffLimit`` is checked against)."""
    retired: int
    """The part of them whose pods are gone."""
    state: str
    """``Running``, ``Suspended`` or the reason of the Failed condition."""


def settle(job: Job, plan: Plan, world: FakeSubstrate, now: float) -> Job:
    """Reconcile until a pass has nothing to do, then check that one more changes nothing.

    (The pass that finds nothing to do may still recount: a pod created just before is
    there now.)
    """
    for _ in range(5):
        result = reconcile(job, plan, world.observed(), at(now))
        world.apply(result.actions)
        job = with_status(job, result.status)
        if not result.actions:
            again = reconcile(job, plan, world.observed(), at(now))
            assert again.actions == ()
            assert again.status == job.status
            return job
    raise AssertionError(f"no fixpoint: {result.actions}")


def state(status: JobStatus) -> str:
    failed = status.condition(ConditionType.FAILED)
    if failed is not None and failed.status == "True":
        return failed.reason
    for kind in (ConditionType.SUSPENDED, ConditionType.RUNNING, ConditionType.RESTARTING):
        if status.is_true(kind):
            return kind.value
    return "Pending"


HISTORIES = [
    pytest.param(
        4,
        [
            Beat(restart_in_place("worker-0", 2), restarts=2, retired=0, state="Running"),
            Beat(evict("worker-0"), restarts=3, retired=3, state="Running"),
            # The recreated pod restarts in place: counted at once, on top of the 3.
            Beat(restart_in_place("worker-0"), restarts=4, retired=3, state="Running"),
            Beat(restart_in_place("worker-0"), restarts=5, retired=5, state="BackoffLimitExceeded"),
        ],
        id="in-place-then-recreation-then-in-place-reaches-limit-4-exactly",
    ),
    pytest.param(
        3,
        [
            Beat(restart_in_place("worker-0", 2), restarts=2, retired=0, state="Running"),
            Beat(evict("worker-0"), restarts=3, retired=3, state="Running"),
            # Once counted as max(3, 1) = 3, which let the job run on past its limit.
            Beat(restart_in_place("worker-0"), restarts=4, retired=4, state="BackoffLimitExceeded"),
        ],
        id="in-place-restart-of-a-recreated-pod-exceeds-limit-3",
    ),
    pytest.param(
        3,
        [
            Beat(restart_in_place("worker-1"), restarts=1, retired=0, state="Running"),
            Beat(evict("worker-0"), restarts=2, retired=1, state="Running"),
            Beat(restart_in_place("worker-0"), restarts=3, retired=1, state="Running"),
            # worker-1's restart is still live; the evicted worker-0 would be a 4th restart.
            Beat(evict("worker-0"), restarts=3, retired=2, state="BackoffLimitExceeded"),
        ],
        id="recreation-refused-at-the-limit-is-not-counted",
    ),
    pytest.param(
        3,
        [
            Beat(restart_in_place("worker-0", 2), restarts=2, retired=0, state="Running"),
            Beat(suspend(True), restarts=2, retired=2, state="Suspended"),
            Beat(suspend(False), restarts=2, retired=2, state="Running"),
            Beat(restart_in_place("worker-1"), restarts=3, retired=2, state="Running"),
            Beat(restart_in_place("worker-1"), restarts=4, retired=4, state="BackoffLimitExceeded"),
        ],
        id="suspend-and-resume-keep-the-count",
    ),
    pytest.param(
        3,
        [
            Beat(restart_in_place("worker-0", 2), restarts=2, retired=0, state="Running"),
            Beat(vanish("worker-0"), restarts=2, retired=2, state="Running"),
            Beat(nothing, restarts=2, retired=2, state="Running"),
            Beat(restart_in_place("worker-0"), restarts=3, retired=2, state="Running"),
        ],
        id="a-pod-deleted-behind-the-cores-back-keeps-its-restarts",
    ),
    pytest.param(
        None,
        [
            Beat(restart_in_place("worker-0", 3), restarts=3, retired=0, state="Running"),
            Beat(evict("worker-0"), restarts=4, retired=4, state="Running"),
            Beat(evict("worker-0"), restarts=5, retired=5, state="Running"),
            Beat(restart_in_place("worker-1", 2), restarts=7, retired=5, state="Running"),
        ],
        id="no-limit-counts-everything",
    ),
]


@pytest.mark.parametrize(("limit", "beats"), HISTORIES)
def test_restart_histories(limit: int | None, beats: list[Beat]) -> None:
    run_policy = {} if limit is None else {"backoffLimit": limit}
    job = tfjob(restart="OnFailure", run_policy=run_policy)
    plan = plan_for(job)
    world = FakeSubstrate(plan, start_phase="Running")
    job = settle(job, plan, world, now=0)
    assert state(job.status) == "Running"
    for number, beat in enumerate(beats, start=1):
        job = settle(beat.change(world, job), plan, world, now=number)
        worker = job.status.replica_statuses["Worker"]
        seen = (worker.restarts, worker.retired_restarts, state(job.status))
        assert seen == (beat.restarts, beat.retired, beat.state), f"beat {number}"


# --- every deletion keeps the deleted pod's restarts ------------------------------------------


DELETION_CASES = [
    pytest.param(
        {"suspend": True},
        ("worker-0:Running::2", "worker-1:Pending::1"),
        ["worker-0", "worker-1"],
        (3, 3),
        id="suspend",
    ),
    pytest.param(
        {"activeDeadlineSeconds": 1},
        ("worker-0:Running::2", "worker-1:Failed:1:1"),
        ["worker-0"],
        # worker-1 ended before the deadline and is kept (cleanPodPolicy None); its restart
        # stays in the live part and would have been recreated, but the deadline came first.
        (3, 2),
        id="deadline-stops-the-active-pods",
    ),
    pytest.param(
        {"backoffLimit": 2},
        ("worker-0:Running::2", "worker-1:Running::1"),
        ["worker-0", "worker-1"],
        (3, 3),
        id="backoff-stops-the-active-pods",
    ),
    pytest.param(
        {},
        ("worker-0:Running::2", "worker-1:Running", "worker-2:Running::4"),
        ["worker-2"],
        (6, 4),
        id="a-stray-from-a-scale-down",
    ),
    pytest.param(
        {},
        ("worker-0:Failed:1:2", "worker-1:Running"),
        ["worker-0"],
        (3, 3),
        id="recreation-adds-one",
    ),
]


@pytest.mark.parametrize(("run_policy", "pods", "deleted", "restarts"), DELETION_CASES)
def test_every_deletion_retires_the_pods_restarts(
    run_policy: dict[str, object],
    pods: tuple[str, ...],
    deleted: list[str],
    restarts: tuple[int, int],
) -> None:
    """One pass deletes pods for some reason; the next, seeing them deleting, agrees."""
    job = tfjob(restart="OnFailure", run_policy=run_policy)
    plan = plan_for(job)
    prior = reconcile(job, plan, Observed(), at(0)).status
    # The status the last pass left for the pods as they are (their restarts all live).
    live = _observe(plan, pods)
    prior.replica_statuses["Worker"] = ReplicaStatus(
        restarts=sum(p.restart_count for p in live.pods)
    )
    job = with_status(job, prior)
    first = reconcile(job, plan, live, at(5))
    gone = [a.name for a in non_events(first.actions) if isinstance(a, DeletePod)]
    assert gone == [f"{plan.name}-{short}" for short in deleted]
    _assert_restarts(first, restarts)

    # The substrate reports what it was asked to delete as deleting: nothing more to do,
    # and the count stays where it is.
    unserved = {a.name for a in first.actions if isinstance(a, DeleteService)}
    after = Observed(
        pods=tuple(replace(p, deleting=True) if p.name in gone else p for p in live.pods),
        services=live.services - unserved,
    )
    again = reconcile(with_status(job, first.status), plan, after, at(5))
    assert non_events(again.actions) == []
    assert again.status == first.status
    # And once they are gone for good, too.
    later = Observed(pods=tuple(p for p in live.pods if p.name not in gone))
    _assert_restarts(reconcile(with_status(job, again.status), plan, later, at(5)), restarts)


def _observe(plan: Plan, pods: tuple[str, ...]) -> Observed:
    observed = []
    for spec in pods:
        short, phase, code, count = (spec + ":::").split(":")[:4]
        observed.append(
            pod(
                plan,
                short,
                phase,  # type: ignore[arg-type]
                exit_code=int(code) if code else None,
                restart_count=int(count or 0),
            )
        )
    return Observed(pods=tuple(observed), services=frozenset(r.name for r in plan.replicas))


def _assert_restarts(result: ReconcileResult, expected: tuple[int, int]) -> None:
    worker = result.status.replica_statuses["Worker"]
    assert (worker.restarts, worker.retired_restarts) == expected
