"""Outcomes that do not come from the success policy alone: races, halts, stop requests.

- A success and a permanent failure close together are judged by when the replicas
  finished, never by the order a substrate observed them in (``OUTCOME_TIE``; a failure
  wins a tie). Checked over every ordering of the observations, and every delay within
  the substrate contract (an exit is reported within ``REPORT_GRACE``).
- A substrate that can no longer run a job (``Observed.halt``) and a stop request (the
  ``kubemill.dev/stop`` annotation) end the job through the core, like every other outcome.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import datetime

import pytest
from corekit import at, non_events, plan_for, pod, pytorchjob, tfjob, with_status
from hypothesis import given, settings
from hypothesis import strategies as st

from kubemill.api import STOP_ANNOTATION, ConditionType, Job, JobStatus
from kubemill.core import (
    INTERRUPTED,
    OUTCOME_TIE,
    DeletePod,
    Halt,
    Observed,
    ObservedPod,
    reconcile,
)
from kubemill.frameworks.plan import Plan


def running(job: Job, plan: Plan, now: datetime) -> Job:
    """``job`` as recorded once every replica ran."""
    observed = Observed(
        pods=tuple(pod(plan, f"{r.replica_type.lower()}-{r.index}") for r in plan.replicas)
    )
    first = reconcile(job, plan, Observed(), now)
    second = reconcile(with_status(job, first.status), plan, observed, now)
    assert second.status.is_true(ConditionType.RUNNING)
    return with_status(job, second.status)


def verdict(status: JobStatus) -> str | None:
    for kind in (ConditionType.FAILED, ConditionType.SUCCEEDED):
        if status.is_true(kind):
            return kind.value
    return None


# --- a success and a failure close together ---------------------------------------------------


def race(master_done: float, worker_done: float, looks: list[tuple[float, bool, bool]]) -> str:
    """Replay one ordering of observations of a Master exiting 0 and a Worker exiting 1.

    ``looks`` are reconciles at a time, each seeing (or not yet seeing) each exit; after
    them, a last reconcile sees both. Returns the verdict the core reached first.
    """
    job = pytorchjob(workers=1, restart="Never")
    plan = plan_for(job)
    job = running(job, plan, at(0))
    master_run, worker_run = pod(plan, "master-0"), pod(plan, "worker-0")
    master_exit = replace(master_run, phase="Succeeded", exit_code=0, finished=at(master_done))
    worker_exit = replace(worker_run, phase="Failed", exit_code=1, finished=at(worker_done))
    last = max(master_done, worker_done) + 5
    for now, sees_master, sees_worker in [*looks, (last, True, True)]:
        pods = (
            master_exit if sees_master else master_run,
            worker_exit if sees_worker else worker_run,
        )
        result = reconcile(job, plan, Observed(pods=pods), at(now))
        job = with_status(job, result.status)
        if (found := verdict(result.status)) is not None:
            return found
    raise AssertionError("no verdict once both exits were seen")


def expected(master_done: float, worker_done: float) -> str:
    """The documented rule: a failure before, or within 1 s after, the success wins.

    Compared as the timestamps the core sees (microseconds), not as floats.
    """
    return "Failed" if at(worker_done) <= at(master_done) + OUTCOME_TIE else "Succeeded"


@st.composite
def observation_orders(draw: st.DrawFn) -> tuple[float, float, list[tuple[float, bool, bool]]]:
    master_done = draw(st.floats(1, 3))
    worker_done = master_done + draw(st.floats(-1.5, 2.5))
    worker_done = max(worker_done, 0.5)
    # Each exit becomes visible after a delay of its own, shorter than REPORT_GRACE (the
    # substrate contract): the substrate may see either first.
    master_seen = master_done + draw(st.floats(0, 0.99))
    worker_seen = worker_done + draw(st.floats(0, 0.99))
    times = sorted(draw(st.lists(st.floats(0.5, 8), min_size=1, max_size=6)))
    looks = [(t, t >= master_seen, t >= worker_seen) for t in times]
    return master_done, worker_done, looks


@settings(max_examples=300, deadline=None)
@given(observation_orders())
def test_verdict_depends_on_finish_times_not_on_observation_order(
    case: tuple[float, float, list[tuple[float, bool, bool]]],
) -> None:
    master_done, worker_done, looks = case
    assert race(master_done, worker_done, looks) == expected(master_done, worker_done)


# Every way two exits can be observed within the contract: each is reported 1 ms, 0.5 s or
# 0.99 s after it happened, so either may be seen first, or both in one pass.
DELAYS = (0.001, 0.5, 0.99)


@pytest.mark.parametrize(("master_delay", "worker_delay"), list(itertools.product(DELAYS, DELAYS)))
@pytest.mark.parametrize(
    "worker_after_master", [-0.3, 0.0, 0.05, 0.99, 1.5], ids=lambda d: f"worker{d:+}s"
)
def test_worker_crash_as_the_master_succeeds_every_ordering(
    master_delay: float, worker_delay: float, worker_after_master: float
) -> None:
    master_done = 2.0
    worker_done = master_done + worker_after_master
    master_seen, worker_seen = master_done + master_delay, worker_done + worker_delay
    looks = [(t, t >= master_seen, t >= worker_seen) for t in sorted({master_seen, worker_seen})]
    assert race(master_done, worker_done, looks) == expected(master_done, worker_done)


def test_the_issue_case_worker_exits_1_right_after_the_master_exits_0() -> None:
    """Seen in the field: master exits 0, worker 1 ms later; the master is observed first."""
    assert race(2.0, 2.001, [(2.0005, True, False), (2.002, True, True)]) == "Failed"


def test_a_waiting_success_asks_to_be_looked_at_again_when_the_window_ends() -> None:
    job = pytorchjob(workers=1, restart="Never")
    plan = plan_for(job)
    job = running(job, plan, at(0))
    pods = (
        replace(pod(plan, "master-0"), phase="Succeeded", exit_code=0, finished=at(2)),
        pod(plan, "worker-0"),
    )
    result = reconcile(job, plan, Observed(pods=pods), at(2.25))
    assert verdict(result.status) is None
    assert result.requeue_after is not None
    # OUTCOME_TIE (1 s) for a failure to tie, REPORT_GRACE (1 s) for it to be reported.
    assert result.requeue_after.total_seconds() == pytest.approx(1.75)
    assert non_events(result.actions) == []


def test_a_success_does_not_wait_for_hosts_that_run_nothing_of_their_own() -> None:
    """MPI: the launcher exits 0 while its worker hosts idle; the verdict is immediate."""
    job = pytorchjob(workers=1, restart="Never")
    plan = plan_for(job)
    hosts = tuple(
        replace(rep, host_only=True) if rep.replica_type == "Worker" else rep
        for rep in plan.replicas
    )
    plan = replace(plan, replicas=hosts)
    job = running(job, plan, at(0))
    pods = (
        replace(pod(plan, "master-0"), phase="Succeeded", exit_code=0, finished=at(2)),
        pod(plan, "worker-0"),
    )
    result = reconcile(job, plan, Observed(pods=pods), at(2.25))
    assert verdict(result.status) == "Succeeded"
    # ...while a host that was seen failing in the tie window still wins the tie.
    failed = replace(pod(plan, "worker-0"), phase="Failed", exit_code=137, finished=at(2.5))
    result = reconcile(job, plan, Observed(pods=(pods[0], failed)), at(2.75))
    assert verdict(result.status) == "Failed"


# --- a substrate that cannot go on, and stop requests -----------------------------------------


def test_halt_fails_the_job_with_the_substrates_reason_and_stops_active_pods() -> None:
    job = tfjob(workers=2)
    plan = plan_for(job)
    job = running(job, plan, at(0))
    pods = (pod(plan, "worker-0"), pod(plan, "worker-1", "Succeeded"))
    halt = Halt("SupervisorLost", "the supervisor (pid 7) is gone")
    result = reconcile(job, plan, Observed(pods=pods, halt=halt), at(3))
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.status == "True"
    assert (failed.reason, failed.message) == ("SupervisorLost", halt.message)
    assert result.status.completion_time == at(3)
    deleted = [a.name for a in result.actions if isinstance(a, DeletePod)]
    assert deleted == [plan.of_type("Worker")[0].name]
    warnings = [a for a in result.actions if getattr(a, "type", "") == "Warning"]
    assert [w.reason for w in warnings] == ["SupervisorLost"]


def test_halt_does_not_change_a_finished_job() -> None:
    job = tfjob(workers=1)
    plan = plan_for(job)
    job = running(job, plan, at(0))
    done = reconcile(job, plan, Observed(pods=(pod(plan, "worker-0", "Succeeded"),)), at(1))
    assert done.status.is_true(ConditionType.SUCCEEDED)
    job = with_status(job, done.status)
    later = reconcile(job, plan, Observed(halt=Halt("SupervisorLost", "gone")), at(2))
    assert later.status == done.status


def stop_requested(job: Job, why: str) -> Job:
    meta = job.metadata.model_copy(update={"annotations": {STOP_ANNOTATION: why}})
    return job.model_copy(update={"metadata": meta})


@pytest.mark.parametrize("why", ["Ctrl-C in kubemill run", ""])
def test_a_stop_request_fails_the_job_as_interrupted(why: str) -> None:
    job = tfjob(workers=2)
    plan = plan_for(job)
    job = stop_requested(running(job, plan, at(0)), why)
    pods: tuple[ObservedPod, ...] = (pod(plan, "worker-0"), pod(plan, "worker-1", "Pending"))
    result = reconcile(job, plan, Observed(pods=pods), at(4))
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == INTERRUPTED
    assert STOP_ANNOTATION in failed.message and why in failed.message
    assert sorted(a.name for a in result.actions if isinstance(a, DeletePod)) == sorted(
        r.name for r in plan.replicas
    )
    # Once the pods are gone the verdict stays, and nothing else happens.
    again = reconcile(with_status(job, result.status), plan, Observed(), at(5))
    assert again.status.condition(ConditionType.FAILED) == failed
    assert non_events(again.actions) == []


def test_a_stop_request_ends_a_suspended_job_too() -> None:
    job = tfjob(workers=1, run_policy={"suspend": True})
    plan = plan_for(job)
    suspended = reconcile(job, plan, Observed(), at(0))
    assert suspended.status.is_true(ConditionType.SUSPENDED)
    job = stop_requested(with_status(job, suspended.status), "no longer needed")
    result = reconcile(job, plan, Observed(), at(1))
    assert verdict(result.status) == "Failed"
