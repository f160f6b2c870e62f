"""Hypothesis properties of the reconciler, checked along random job histories.

A history starts from a fresh job and alternates reconciles (whose actions a fake substrate
applies) with random changes of the world: pods start, finish, fail with any exit code,
restart in place, get lost; time moves on. After every reconcile:

1. a finished job stays finished with the same verdict and gets no new children;
2. reconciling again with nothing else changed converges (a recreation needs one more
   pass to create the pod it deleted) and, once converged, yields no actions and the
   same status;
3. Running and Restarting are never both present;
4. recorded restarts never go down; each type's restarts are its retired restarts plus the
   in-place restarts of its pods left alive; they equal the restarts that really happened
   (in place, counted as the perturbation makes them, plus recreations) unless a pod that
   had restarted vanished behind the core's back, and never exceed them; while the job is
   neither finished nor suspended they are within backoffLimit, and for policies that never
   restart in place they are within it always;
5. no pod is created twice and every condition type appears once; completionTime is set
   exactly when the job is finished; a suspended job has no pods once settled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from corekit import FakeSubstrate, at, non_events, plan_for, tfjob, with_status
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kubemill.api import ConditionType, Job, JobStatus
from kubemill.core import (
    Action,
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeletePod,
    ReconcileOptions,
    reconcile,
)

POLICIES = ("Never", "OnFailure", "Always", "ExitCode")
EXIT_CODES = (1, 2, 3, 127, 128, 137, 143, 255)
# Weighted so that histories often get all replicas running and some succeed.
CHANGES = ("keep",) * 3 + ("start",) * 4 + ("succeed",) * 2 + ("fail", "restart", "lose", "drop")


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    run_policy: dict[str, Any] = {}
    if draw(st.booleans()):
        run_policy["backoffLimit"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        run_policy["activeDeadlineSeconds"] = draw(st.integers(5, 120))
    if draw(st.booleans()):
        run_policy["ttlSecondsAfterFinished"] = draw(st.integers(0, 60))
    run_policy["cleanPodPolicy"] = draw(st.sampled_from(("None", "Running", "All")))
    return tfjob(
        chief=draw(st.integers(0, 1)),
        ps=draw(st.integers(0, 1)),
        workers=draw(st.integers(1, 3)),
        restart=draw(st.sampled_from(POLICIES)),
        run_policy=run_policy,
    )


def terminal(status: JobStatus) -> tuple[str, str] | None:
    for kind in (ConditionType.FAILED, ConditionType.SUCCEEDED):
        cond = status.condition(kind)
        if cond is not None and cond.status == "True":
            return kind.value, cond.reason
    return None


@dataclass
class Truth:
    """The restarts that really happened, per replica type, kept beside the core's count."""

    restarts: dict[str, int] = field(default_factory=dict)
    exact: bool = True
    """False once a pod that had restarted vanished behind the core's back: the core may
    then miss its restarts (see the module docstring of kubemill.core.reconcile)."""

    ways: set[tuple[str, str]] = field(default_factory=set)
    """(type, "in place" or "recreated"): for the statistics only."""

    def count(self, rtype: str, way: str) -> None:
        self.restarts[rtype] = self.restarts.get(rtype, 0) + 1
        self.ways.add((rtype, way))
        if {(rtype, "in place"), (rtype, "recreated")} <= self.ways:
            event("a type restarted both in place and by recreation")


def apply(substrate: FakeSubstrate, actions: Iterable[Action], truth: Truth) -> None:
    """Apply the core's actions, counting the deletions made to recreate a pod."""
    actions = tuple(actions)
    for action in actions:
        if isinstance(action, DeletePod) and action.reason.startswith("restarting"):
            truth.count(substrate.pods[action.name].replica_type, "recreated")
    substrate.apply(actions)


def perturb(data: st.DataObject, substrate: FakeSubstrate, truth: Truth) -> None:
    """One random change of the world, as a kubelet or a local supervisor would report."""
    for name in sorted(substrate.pods):
        pod = substrate.pods[name]
        choice = data.draw(st.sampled_from(CHANGES))
        if choice == "start" and pod.phase == "Pending":
            substrate.pods[name] = replace(pod, phase="Running")
        elif choice == "succeed" and pod.phase == "Running":
            substrate.pods[name] = replace(pod, phase="Succeeded", exit_code=0)
        elif choice == "fail" and pod.phase in ("Running", "Pending"):
            code = data.draw(st.sampled_from(EXIT_CODES))
            substrate.pods[name] = replace(pod, phase="Failed", exit_code=code)
        elif choice == "restart" and pod.phase == "Running":
            rep = substrate.plan.replica(name)
            if rep.restart_policy.value in ("OnFailure", "Always"):
                substrate.pods[name] = replace(
                    pod, restart_count=pod.restart_count + 1, exit_code=1
                )
                truth.count(pod.replica_type, "in place")
        elif choice == "lose" and pod.phase == "Running":
            substrate.pods[name] = replace(pod, phase="Unknown", reason="supervisor died")
        elif choice == "drop":
            # Deleted behind the core's back (kubectl delete pod, node gone).
            del substrate.pods[name]
            truth.exact = truth.exact and pod.restart_count == 0


def check_fixpoint(
    job: Job, substrate: FakeSubstrate, now: Any, options: ReconcileOptions, truth: Truth
) -> Job:
    """Property 2: with the world frozen, a few passes settle and then nothing happens."""
    plan = substrate.plan
    for _ in range(4):
        result = reconcile(job, plan, substrate.observed(), now, options=options)
        if not result.actions:
            assert result.status == job.status, "a pass with no actions still changed the status"
            return job
        apply(substrate, result.actions, truth)
        job = with_status(job, result.status)
        if substrate.deleted:
            return job
    raise AssertionError(f"no fixpoint after 4 passes: {result.actions}")


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    job=jobs(),
    data=st.data(),
    gang=st.sampled_from((None, "volcano", "scheduler-plugins")),
    staged=st.booleans(),
    services=st.booleans(),
)
def test_random_histories_keep_the_invariants(
    job: Job, data: st.DataObject, gang: str | None, staged: bool, services: bool
) -> None:
    plan = plan_for(job, stages={"Worker": 1} if staged else None, services=services)
    options = ReconcileOptions(gang_scheduler=gang)
    substrate = FakeSubstrate(plan)
    limit = job.run_policy.backoff_limit
    in_place = any(r.restart_policy.value in ("OnFailure", "Always") for r in plan.replicas)
    truth = Truth()
    seconds = 0.0
    verdict: tuple[str, str] | None = None
    restarts: dict[str, int] = {}
    for _ in range(data.draw(st.integers(1, 14), label="steps")):
        now = at(seconds)
        existing = {n for n, p in substrate.pods.items() if not p.deleting}
        result = reconcile(job, plan, substrate.observed(), now, options=options)
        status = result.status
        changes = non_events(result.actions)

        # 1. terminal is final
        if verdict is not None:
            assert terminal(status) == verdict
            assert not any(
                isinstance(a, CreatePod | CreateService | CreatePodGroup) for a in changes
            )
        verdict = terminal(status)
        # 3. Running and Restarting exclude each other
        kinds = [c.type for c in status.conditions]
        assert not (ConditionType.RUNNING in kinds and ConditionType.RESTARTING in kinds)
        # 5. bookkeeping
        assert len(kinds) == len(set(kinds))
        assert (status.completion_time is not None) == status.finished
        created = [a.name for a in changes if isinstance(a, CreatePod)]
        assert len(created) == len(set(created)) and not set(created) & existing
        # 4. restarts
        now_restarts = {t: rs.restarts for t, rs in status.replica_statuses.items()}
        for rtype, count in restarts.items():
            assert now_restarts.get(rtype, 0) >= count, "restarts went down"
        restarts = now_restarts
        if limit is not None and (not in_place or not (status.finished or job.run_policy.suspend)):
            assert sum(restarts.values()) <= limit

        for kind in kinds:
            event(f"condition {kind.value}")
        if verdict is not None:
            event(f"verdict {verdict[1]}")
        apply(substrate, result.actions, truth)
        for rtype, rs in status.replica_statuses.items():
            alive = [p for p in substrate.pods.values() if p.replica_type == rtype]
            assert rs.restarts == rs.retired_restarts + sum(p.restart_count for p in alive)
        for rtype, rs in status.replica_statuses.items():
            happened = truth.restarts.get(rtype, 0)
            assert rs.restarts == happened if truth.exact else rs.restarts <= happened
        event("exact restarts" if truth.exact else "restarts lost with a vanished pod")
        job = with_status(job, status)
        if substrate.deleted:
            assert status.finished
            event("deleted by TTL")
            return
        # 2. converges with nothing else changed
        job = check_fixpoint(job, substrate, now, options, truth)
        if substrate.deleted:
            return
        if status.is_true(ConditionType.SUSPENDED) and not status.finished:
            assert not [p for p in substrate.pods.values() if not p.deleting]
            event("suspended")
        perturb(data, substrate, truth)
        if data.draw(st.integers(0, 7), label="toggle suspend") == 0:
            job = job.model_copy(deep=True)
            job.run_policy.suspend = not job.run_policy.suspend
        seconds += data.draw(st.sampled_from((0.0, 1.0, 7.0, 30.0)), label="wait")


@settings(max_examples=60, deadline=None)
@given(
    job=jobs(),
    verdict=st.sampled_from(("Failed", "Succeeded")),
    phases=st.lists(
        st.sampled_from(("Pending", "Running", "Succeeded", "Failed", "Unknown")), max_size=4
    ),
    code=st.sampled_from((None, 0, *EXIT_CODES)),
    suspend=st.booleans(),
    later=st.integers(0, 500),
)
def test_a_terminal_job_never_leaves_its_state(
    job: Job, verdict: str, phases: list[str], code: int | None, suspend: bool, later: int
) -> None:
    plan = plan_for(job)
    finished = reconcile(job, plan, FakeSubstrate(plan).observed(), at(0)).status
    finished.conditions.append(
        finished.conditions[0].model_copy(
            update={"type": ConditionType(verdict), "reason": f"TFJob{verdict}"}
        )
    )
    finished.completion_time = at(0)
    job.run_policy.suspend = suspend
    job = with_status(job, finished)
    substrate = FakeSubstrate(plan)
    substrate.apply(CreatePod(r.name) for r in plan.replicas[: len(phases)])
    for rep, phase in zip(plan.replicas, phases, strict=False):
        substrate.pods[rep.name] = replace(
            substrate.pods[rep.name],
            phase=phase,
            exit_code=code,  # type: ignore[arg-type]
        )
    result = reconcile(job, plan, substrate.observed(), at(later))
    assert terminal(result.status) == (verdict, f"TFJob{verdict}")
    assert result.status.conditions == finished.conditions
    assert not any(
        isinstance(a, CreatePod | CreateService | CreatePodGroup) for a in result.actions
    )
    if result.requeue_after is not None:
        assert result.requeue_after > timedelta(0)
