"""Table tests of the reconciler's rules: one reconcile, its actions and its status."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from corekit import (
    T0,
    all_pods,
    at,
    events,
    non_events,
    plan_for,
    pod,
    pytorchjob,
    tfjob,
    with_status,
)

from kubemill.api import Condition, ConditionType, Job, JobStatus, ReplicaStatus, RestartPolicy
from kubemill.core import (
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeleteJob,
    DeletePod,
    DeletePodGroup,
    DeleteService,
    Observed,
    ObservedPod,
    ObservedPodGroup,
    ReconcileOptions,
    is_retryable_exit_code,
    pod_restart_policy,
    reconcile,
)
from kubemill.frameworks.plan import Plan, SuccessPolicy


def cond(kind: str, status: str = "True", reason: str = "", at_s: float = 0) -> Condition:
    return Condition(
        type=ConditionType(kind),
        status=status,  # type: ignore[arg-type]
        reason=reason or f"TFJob{kind}",
        message="",
        last_update_time=at(at_s),
        last_transition_time=at(at_s),
    )


def prior(
    job: Job,
    *conditions: Condition,
    start: float | None = 0,
    completion: float | None = None,
    restarts: dict[str, int] | None = None,
) -> Job:
    """The job with a status as an earlier reconcile would have left it."""
    status = JobStatus(
        conditions=[cond("Created"), *conditions],
        start_time=at(start) if start is not None else None,
        completion_time=at(completion) if completion is not None else None,
        replica_statuses={t: ReplicaStatus(restarts=n) for t, n in (restarts or {}).items()},
    )
    return with_status(job, status)


RUNNING = cond("Running")


@dataclass
class Case:
    job: Job
    pods: tuple[str, ...] = ()
    """Observed pods as ``short:phase[:exit][:restarts][@finished]``, e.g. ``worker-1:Failed:3``
    or ``chief-0:Succeeded@0.5`` (finished 0.5 s after T0)."""
    services: tuple[str, ...] | None = None
    """Observed services (short names); default: every replica's service exists."""
    now: float = 1
    plan_options: dict[str, Any] = field(default_factory=dict)
    options: ReconcileOptions = field(default_factory=ReconcileOptions)
    pod_group: ObservedPodGroup | None = None


def observe(case: Case, plan: Plan) -> Observed:
    pods: list[ObservedPod] = []
    for raw in case.pods:
        spec, _, finished = raw.partition("@")
        short, phase, *rest = spec.split(":")
        exit_code = int(rest[0]) if rest and rest[0] else None
        restarts = int(rest[1]) if len(rest) > 1 and rest[1] else 0
        deleting = len(rest) > 2 and rest[2] == "deleting"
        pods.append(
            pod(
                plan,
                short,
                phase,  # type: ignore[arg-type]
                exit_code=exit_code,
                restart_count=restarts,
                deleting=deleting,
                finished=float(finished) if finished else None,
            )
        )
    if case.services is None:
        services = frozenset(r.name for r in plan.replicas)
    else:
        services = frozenset(full(plan, s) for s in case.services)
    return Observed(pods=tuple(pods), services=services, pod_group=case.pod_group)


def full(plan: Plan, short: str) -> str:
    return f"{plan.name}-{short}"


def run(case: Case) -> tuple[Plan, Any]:
    plan = plan_for(case.job, **case.plan_options)
    result = reconcile(case.job, plan, observe(case, plan), at(case.now), options=case.options)
    return plan, result


def brief(plan: Plan, actions: list[Any]) -> list[str]:
    """Actions as short strings: ``+pod worker-0``, ``-svc worker-1``, ``+pg``."""
    prefix = plan.name + "-"
    out: list[str] = []
    for a in actions:
        name = getattr(a, "name", "").removeprefix(prefix)
        out.append(
            {
                CreatePod: f"+pod {name}",
                DeletePod: f"-pod {name}",
                CreateService: f"+svc {name}",
                DeleteService: f"-svc {name}",
                CreatePodGroup: "+pg",
                DeletePodGroup: "-pg",
                DeleteJob: "-job",
            }[type(a)]
        )
    return out


def true_conditions(status: JobStatus) -> dict[str, str]:
    return {c.type.value: c.reason for c in status.conditions if c.status == "True"}


TF_CPW = tfjob(chief=1, ps=1, workers=2)

ACTION_CASES = [
    pytest.param(
        Case(tfjob(), services=()),
        ["+svc worker-0", "+svc worker-1", "+pod worker-0", "+pod worker-1"],
        id="fresh-job-creates-services-then-pods",
    ),
    pytest.param(
        Case(tfjob(), services=(), plan_options={"services": False}),
        ["+pod worker-0", "+pod worker-1"],
        id="no-services-when-plan-says-so",
    ),
    pytest.param(
        Case(tfjob(), pods=("worker-0:Pending",)),
        ["+pod worker-1"],
        id="only-missing-pods-created",
    ),
    pytest.param(
        Case(TF_CPW, plan_options={"stages": {"Worker": 1}}),
        ["+pod chief-0", "+pod ps-0"],
        id="stage-1-waits-for-stage-0",
    ),
    pytest.param(
        Case(
            TF_CPW, pods=("chief-0:Running", "ps-0:Pending"), plan_options={"stages": {"Worker": 1}}
        ),
        [],
        id="stage-1-waits-while-a-stage-0-pod-is-pending",
    ),
    pytest.param(
        Case(
            TF_CPW, pods=("chief-0:Running", "ps-0:Running"), plan_options={"stages": {"Worker": 1}}
        ),
        ["+pod worker-0", "+pod worker-1"],
        id="stage-1-created-once-stage-0-runs",
    ),
    pytest.param(
        Case(tfjob(), pods=("worker-0:Running", "worker-1:Failed:3")),
        [],
        id="never-failure-fails-without-deleting-under-clean-policy-none",
    ),
    pytest.param(
        Case(tfjob(restart="ExitCode"), pods=("worker-0:Running", "worker-1:Failed:137")),
        ["-pod worker-1"],
        id="exitcode-retryable-deletes-for-recreation",
    ),
    pytest.param(
        Case(tfjob(restart="ExitCode"), pods=("worker-0:Running",)),
        ["+pod worker-1"],
        id="recreated-by-a-later-reconcile",
    ),
    pytest.param(
        Case(tfjob(restart="ExitCode"), pods=("worker-0:Running", "worker-1:Failed:137::deleting")),
        [],
        id="deleting-pod-neither-judged-nor-replaced",
    ),
    pytest.param(
        Case(tfjob(restart="OnFailure"), pods=("worker-0:Running", "worker-1:Failed:1")),
        ["-pod worker-1"],
        id="onfailure-pod-that-ended-failed-is-recreated",
    ),
    pytest.param(
        Case(tfjob(restart="Never"), pods=("worker-0:Running", "worker-1:Unknown")),
        [],
        id="unknown-under-never-fails-the-job",
    ),
    pytest.param(
        Case(tfjob(restart="OnFailure"), pods=("worker-0:Running", "worker-1:Unknown")),
        ["-pod worker-1"],
        id="unknown-under-onfailure-is-recreated",
    ),
    pytest.param(
        Case(
            prior(tfjob(workers=1), RUNNING),
            pods=("worker-0:Running", "worker-1:Running"),
            services=("worker-0", "worker-1"),
        ),
        ["-pod worker-1", "-svc worker-1"],
        id="stray-pod-and-service-deleted",
    ),
    pytest.param(
        Case(tfjob(), pods=("worker-0:Running", "worker-1:Running"), services=("worker-0",)),
        ["+svc worker-1"],
        id="missing-service-recreated",
    ),
]


@pytest.mark.parametrize(("case", "expected"), ACTION_CASES)
def test_actions(case: Case, expected: list[str]) -> None:
    plan, result = run(case)
    assert brief(plan, non_events(result.actions)) == expected


CONDITION_CASES = [
    pytest.param(Case(tfjob(), services=()), {"Created": "TFJobCreated"}, id="created-first"),
    pytest.param(
        Case(prior(tfjob()), pods=("worker-0:Running", "worker-1:Running")),
        {"Created": "TFJobCreated", "Running": "TFJobRunning"},
        id="running-when-every-replica-runs",
    ),
    pytest.param(
        Case(prior(tfjob()), pods=("worker-0:Running", "worker-1:Pending")),
        {"Created": "TFJobCreated"},
        id="not-running-while-one-replica-is-pending",
    ),
    pytest.param(
        Case(
            prior(TF_CPW, RUNNING),
            pods=("chief-0:Running", "ps-0:Running", "worker-0:Succeeded", "worker-1:Running"),
        ),
        {"Created": "TFJobCreated", "Running": "TFJobRunning"},
        id="a-finished-worker-keeps-the-job-running",
    ),
    pytest.param(
        Case(prior(tfjob(), RUNNING), pods=("worker-0:Running", "worker-1:Failed:3")),
        {"Created": "TFJobCreated", "Failed": "TFJobFailed"},
        id="never-policy-failure-is-terminal",
    ),
    pytest.param(
        Case(
            prior(tfjob(restart="ExitCode"), RUNNING),
            pods=("worker-0:Running", "worker-1:Failed:2"),
        ),
        {"Created": "TFJobCreated", "Failed": "TFJobFailed"},
        id="exitcode-1-to-127-is-permanent",
    ),
    pytest.param(
        Case(
            prior(tfjob(restart="ExitCode"), RUNNING),
            pods=("worker-0:Running", "worker-1:Failed:143"),
        ),
        {"Created": "TFJobCreated", "Restarting": "TFJobRestarting"},
        id="exitcode-128-and-above-restarts",
    ),
    pytest.param(
        Case(
            prior(tfjob(restart="ExitCode"), cond("Restarting")),
            pods=("worker-0:Running", "worker-1:Running"),
        ),
        {"Created": "TFJobCreated", "Running": "TFJobRunning"},
        id="running-replaces-restarting-once-all-run-again",
    ),
    pytest.param(
        Case(
            prior(tfjob(restart="ExitCode"), cond("Restarting")),
            pods=("worker-0:Running", "worker-1:Pending"),
        ),
        {"Created": "TFJobCreated", "Restarting": "TFJobRestarting"},
        id="restarting-while-the-recreated-pod-is-pending",
    ),
    pytest.param(
        Case(
            prior(TF_CPW, RUNNING),
            pods=("chief-0:Succeeded", "ps-0:Running", "worker-0:Running", "worker-1:Failed:1"),
        ),
        {"Created": "TFJobCreated", "Failed": "TFJobFailed"},
        id="a-failure-at-an-unknown-time-ties-with-the-success-and-wins",
    ),
    pytest.param(
        Case(
            prior(TF_CPW, RUNNING),
            pods=(
                "chief-0:Succeeded@0.2",
                "ps-0:Running",
                "worker-0:Running",
                "worker-1:Failed:1@0.9",
            ),
        ),
        {"Created": "TFJobCreated", "Failed": "TFJobFailed"},
        id="a-failure-within-the-tie-window-after-the-success-wins",
    ),
    pytest.param(
        Case(
            prior(TF_CPW, RUNNING),
            pods=("chief-0:Succeeded@0.2", "ps-0:Failed:1@0.1", "worker-0:Succeeded@0.3"),
        ),
        {"Created": "TFJobCreated", "Failed": "TFJobFailed"},
        id="a-failure-before-the-success-wins",
    ),
    pytest.param(
        Case(
            prior(TF_CPW, RUNNING),
            pods=(
                "chief-0:Succeeded@0.2",
                "ps-0:Failed:137@1.5",
                "worker-0:Succeeded@0.3",
                "worker-1:Succeeded@0.3",
            ),
            now=2,
        ),
        {"Created": "TFJobCreated", "Succeeded": "TFJobSucceeded"},
        id="a-failure-after-the-tie-window-does-not-undo-the-success",
    ),
    pytest.param(
        Case(
            prior(TF_CPW, RUNNING),
            pods=("chief-0:Succeeded@0.5", "ps-0:Running", "worker-0:Running", "worker-1:Running"),
            now=2.4,
        ),
        {"Created": "TFJobCreated", "Running": "TFJobRunning"},
        id="a-success-waits-out-the-tie-window-while-others-run",
    ),
    pytest.param(
        Case(
            prior(TF_CPW, RUNNING),
            pods=("chief-0:Succeeded@0.5", "ps-0:Running", "worker-0:Running", "worker-1:Running"),
            now=2.5,  # OUTCOME_TIE + REPORT_GRACE after the chief finished
        ),
        {"Created": "TFJobCreated", "Succeeded": "TFJobSucceeded"},
        id="a-success-is-declared-once-the-tie-window-passed",
    ),
    pytest.param(
        Case(prior(tfjob(), RUNNING), pods=("worker-0:Succeeded", "worker-1:Running")),
        {"Created": "TFJobCreated", "Succeeded": "TFJobSucceeded"},
        id="tf-without-chief-succeeds-with-worker-0",
    ),
    pytest.param(
        Case(
            prior(tfjob(), RUNNING),
            pods=("worker-0:Succeeded", "worker-1:Running"),
            plan_options={"outcome": SuccessPolicy("Worker", "all")},
        ),
        {"Created": "TFJobCreated", "Running": "TFJobRunning"},
        id="all-workers-policy-waits-for-every-worker",
    ),
    pytest.param(
        Case(
            prior(tfjob(), RUNNING),
            pods=("worker-0:Succeeded", "worker-1:Succeeded"),
            plan_options={"outcome": SuccessPolicy("Worker", "all")},
        ),
        {"Created": "TFJobCreated", "Succeeded": "TFJobSucceeded"},
        id="all-workers-policy-met",
    ),
    pytest.param(
        Case(
            prior(tfjob(), RUNNING),
            pods=("worker-0:Running", "worker-1:Succeeded"),
            plan_options={"outcome": SuccessPolicy("Worker", "any")},
        ),
        {"Created": "TFJobCreated", "Succeeded": "TFJobSucceeded"},
        id="any-worker-policy-met-by-worker-1",
    ),
    pytest.param(
        Case(
            prior(tfjob(), RUNNING),
            pods=("worker-0:Running", "worker-1:Succeeded"),
        ),
        {"Created": "TFJobCreated", "Running": "TFJobRunning"},
        id="first-policy-ignores-worker-1",
    ),
]


@pytest.mark.parametrize(("case", "expected"), CONDITION_CASES)
def test_conditions(case: Case, expected: dict[str, str]) -> None:
    _, result = run(case)
    assert true_conditions(result.status) == expected
    types = [c.type for c in result.status.conditions]
    assert len(types) == len(set(types)), "a condition type appears twice"


def test_failure_message_names_the_replica_and_running_turns_false() -> None:
    case = Case(prior(tfjob(), RUNNING), pods=("worker-0:Running", "worker-1:Failed:3"), now=5)
    _, result = run(case)
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.message == (
        "TFJob default/x is failed because 1 Worker replica(s) failed: worker-1 exited with code 3."
    )
    running = result.status.condition(ConditionType.RUNNING)
    assert running is not None and running.status == "False"
    assert result.status.completion_time == at(5)
    assert result.status.replica_statuses["Worker"].failed == 1
    assert result.status.replica_statuses["Worker"].active == 1
    warnings = [e for e in events(result.actions) if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["TFJobFailed"]
    assert "worker-1 exited with code 3" in warnings[0].message


def test_pytorch_reasons_use_the_kind() -> None:
    job = prior(pytorchjob(workers=1), cond("Running", reason="PyTorchJobRunning"))
    plan = plan_for(job)
    observed = Observed(pods=(pod(plan, "master-0", "Succeeded"), pod(plan, "worker-0", "Running")))
    result = reconcile(job, plan, observed, at(3))
    succeeded = result.status.condition(ConditionType.SUCCEEDED)
    assert succeeded is not None
    assert succeeded.reason == "PyTorchJobSucceeded"
    assert succeeded.message == "PyTorchJob default/p successfully completed."
    # Upstream: replicas still active when the job succeeded are counted as succeeded.
    assert result.status.replica_statuses["Worker"].succeeded == 1
    assert result.status.replica_statuses["Worker"].active == 0


# --- restarts and backoffLimit --------------------------------------------------------------


BACKOFF_CASES = [
    pytest.param(
        "ExitCode",
        None,
        ("worker-0:Running", "worker-1:Failed:137"),
        {},
        "Restarting",
        {"Worker": (1, 1)},
        ["-pod worker-1"],
        id="no-limit-restarts-forever",
    ),
    pytest.param(
        "ExitCode",
        1,
        ("worker-0:Running", "worker-1:Failed:137"),
        {},
        "Restarting",
        {"Worker": (1, 1)},
        ["-pod worker-1"],
        id="first-recreation-within-limit-1",
    ),
    pytest.param(
        "ExitCode",
        1,
        ("worker-0:Running", "worker-1:Failed:137"),
        {"Worker": 1},
        "BackoffLimitExceeded",
        {"Worker": (1, 1)},
        ["-pod worker-0", "-svc worker-0"],
        id="second-recreation-over-limit-1-fails-and-stops-active-pods",
    ),
    pytest.param(
        "ExitCode",
        0,
        ("worker-0:Running", "worker-1:Failed:137"),
        {},
        "BackoffLimitExceeded",
        {"Worker": (0, 0)},
        ["-pod worker-0", "-svc worker-0"],
        id="limit-0-allows-no-restart",
    ),
    pytest.param(
        "OnFailure",
        3,
        ("worker-0:Running::2", "worker-1:Running"),
        {},
        "Running",
        {"Worker": (2, 0)},
        [],
        id="in-place-restarts-counted-within-limit",
    ),
    pytest.param(
        "OnFailure",
        4,
        ("worker-0:Running::2", "worker-1:Running::2"),
        {"Worker": 2},
        "Running",
        {"Worker": (4, 0)},
        [],
        id="in-place-restarts-up-to-the-limit-are-allowed",
    ),
    pytest.param(
        "OnFailure",
        3,
        ("worker-0:Running::2", "worker-1:Running::2"),
        {"Worker": 2},
        "BackoffLimitExceeded",
        # The stopped pods' restarts move to the retired part: the total stays.
        {"Worker": (4, 4)},
        ["-pod worker-0", "-pod worker-1", "-svc worker-0", "-svc worker-1"],
        id="in-place-restarts-over-limit-fail",
    ),
    pytest.param(
        "Always",
        5,
        ("worker-0:Running::1", "worker-1:Running"),
        {"Worker": 3},
        "Running",
        # A status from before retiredRestarts (or pods deleted behind the core's back):
        # the restarts the live pods no longer show are retired.
        {"Worker": (3, 2)},
        [],
        id="restarts-never-go-down",
    ),
    pytest.param(
        "OnFailure",
        5,
        ("worker-0:Failed:1:4", "worker-1:Running"),
        {"Worker": 4},
        "Restarting",
        {"Worker": (5, 5)},
        ["-pod worker-0"],
        id="recreation-adds-to-in-place-restarts",
    ),
    pytest.param(
        "OnFailure",
        4,
        ("worker-0:Failed:1:4", "worker-1:Running"),
        {"Worker": 4},
        "BackoffLimitExceeded",
        {"Worker": (4, 0)},
        ["-pod worker-1", "-svc worker-1"],
        id="recreation-after-in-place-restarts-over-limit-fails",
    ),
]


@pytest.mark.parametrize(
    ("policy", "limit", "pods", "before", "verdict", "restarts", "expected"), BACKOFF_CASES
)
def test_backoff(
    policy: str,
    limit: int | None,
    pods: tuple[str, ...],
    before: dict[str, int],
    verdict: str,
    restarts: dict[str, tuple[int, int]],
    expected: list[str],
) -> None:
    """``restarts`` maps each type to (restarts, retiredRestarts) after the pass."""
    run_policy = {} if limit is None else {"backoffLimit": limit}
    job = prior(tfjob(restart=policy, run_policy=run_policy), RUNNING, restarts=before)
    plan, result = run(Case(job, pods=pods))
    assert brief(plan, non_events(result.actions)) == expected
    conditions = true_conditions(result.status)
    reason = conditions.get("Failed") or conditions.get("Restarting") or conditions.get("Running")
    assert reason is not None and reason.endswith(verdict)
    assert {
        t: (rs.restarts, rs.retired_restarts) for t, rs in result.status.replica_statuses.items()
    } == restarts


def test_backoff_failure_names_the_replica() -> None:
    job = prior(tfjob(restart="ExitCode", run_policy={"backoffLimit": 0}), RUNNING)
    _, result = run(Case(job, pods=("worker-0:Running", "worker-1:Failed:137")))
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    assert "worker-1 exited with code 137" in failed.message
    assert "backoff limit (0 restarts)" in failed.message


def test_in_place_restart_is_announced_once() -> None:
    job = prior(tfjob(restart="OnFailure", run_policy={"backoffLimit": 9}), RUNNING)
    case = Case(job, pods=("worker-0:Running:1:2", "worker-1:Running"))
    plan, first = run(case)
    assert [e.reason for e in events(first.actions)] == ["TFJobRestarting"]
    assert (
        "worker-0 exited with code 1, restarted in place (2 restarts)" in first.actions[0].message
    )  # type: ignore[union-attr]
    again = reconcile(with_status(job, first.status), plan, observe(case, plan), at(2))
    assert again.actions == ()
    assert again.status == first.status


def test_restarting_message_and_event() -> None:
    job = prior(tfjob(restart="ExitCode"), RUNNING)
    _, result = run(Case(job, pods=("worker-0:Running", "worker-1:Failed:137")))
    restarting = result.status.condition(ConditionType.RESTARTING)
    assert restarting is not None
    assert restarting.message == (
        "TFJob default/x is restarting because 1 Worker replica(s) failed: "
        "worker-1 exited with code 137."
    )
    assert result.status.condition(ConditionType.RUNNING) is None
    assert ("Warning", "TFJobRestarting") in [(e.type, e.reason) for e in events(result.actions)]
    # The pod being recreated counts neither as active nor as failed.
    assert result.status.replica_statuses["Worker"].model_dump(
        include={"active", "failed", "restarts"}
    ) == {"active": 1, "failed": 0, "restarts": 1}


# --- activeDeadlineSeconds ------------------------------------------------------------------


def test_deadline_not_reached_requeues_for_the_rest() -> None:
    job = prior(tfjob(run_policy={"activeDeadlineSeconds": 10}), RUNNING)
    _, result = run(Case(job, pods=("worker-0:Running", "worker-1:Running"), now=4))
    assert result.actions == ()
    assert result.requeue_after == timedelta(seconds=6)


@pytest.mark.parametrize("now", [pytest.param(10, id="at-deadline"), pytest.param(11, id="past")])
def test_deadline_exceeded_fails_and_stops_active_pods(now: float) -> None:
    job = prior(tfjob(chief=1, run_policy={"activeDeadlineSeconds": 10}), RUNNING)
    plan, result = run(
        Case(job, pods=("chief-0:Running", "worker-0:Pending", "worker-1:Succeeded"), now=now)
    )
    assert brief(plan, non_events(result.actions)) == [
        "-pod chief-0",
        "-pod worker-0",
        "-svc chief-0",
        "-svc worker-0",
    ]
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "DeadlineExceeded"
    assert result.status.completion_time == at(now)
    assert all(rs.active == 0 for rs in result.status.replica_statuses.values())


def test_start_time_set_on_first_reconcile_and_kept() -> None:
    job = tfjob(run_policy={"activeDeadlineSeconds": 30})
    plan = plan_for(job)
    first = reconcile(job, plan, Observed(), at(7))
    assert first.status.start_time == at(7)
    assert first.requeue_after == timedelta(seconds=30)
    second = reconcile(with_status(job, first.status), plan, Observed(), at(9))
    assert second.status.start_time == at(7)


# --- cleanPodPolicy and TTL ------------------------------------------------------------------

PODS_AT_SUCCESS = (
    "chief-0:Succeeded@-3",
    "ps-0:Running",
    "worker-0:Pending",
    "worker-1:Failed:1@-1.5",  # after the chief finished: the success stands
)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param("None", [], id="none-keeps-everything"),
        pytest.param(
            "Running",
            ["-pod ps-0", "-pod worker-0", "-svc ps-0", "-svc worker-0"],
            id="running-removes-running-and-pending",
        ),
        pytest.param(
            "All",
            [
                "-pod chief-0",
                "-pod ps-0",
                "-pod worker-0",
                "-pod worker-1",
                "-svc chief-0",
                "-svc ps-0",
                "-svc worker-0",
                "-svc worker-1",
            ],
            id="all-removes-all",
        ),
    ],
)
def test_clean_pod_policy_on_success(policy: str, expected: list[str]) -> None:
    job = prior(tfjob(chief=1, ps=1, run_policy={"cleanPodPolicy": policy}), RUNNING)
    plan, result = run(Case(job, pods=PODS_AT_SUCCESS))
    assert result.status.is_true(ConditionType.SUCCEEDED)
    assert brief(plan, non_events(result.actions)) == expected
    # The next reconcile of the finished job, with the deletions done, has nothing to do.
    gone = {full(plan, a.split()[1]) for a in expected if a.startswith("-pod")}
    remaining = tuple(p for p in PODS_AT_SUCCESS if full(plan, p.split(":")[0]) not in gone)
    services = tuple(
        s for s in ("chief-0", "ps-0", "worker-0", "worker-1") if f"-svc {s}" not in expected
    )
    again = reconcile(
        with_status(job, result.status),
        plan,
        observe(Case(job, pods=remaining, services=services), plan),
        at(2),
    )
    assert again.actions == ()
    assert again.status == result.status


@pytest.mark.parametrize(
    ("now", "expected", "requeue"),
    [
        pytest.param(30, [], timedelta(seconds=30), id="before-ttl-requeues"),
        pytest.param(60, ["-job"], None, id="at-ttl-deletes-the-job"),
    ],
)
def test_ttl_after_finished(now: float, expected: list[str], requeue: timedelta | None) -> None:
    job = prior(
        tfjob(run_policy={"ttlSecondsAfterFinished": 60}),
        cond("Succeeded"),
        completion=0,
    )
    plan, result = run(Case(job, pods=("worker-0:Succeeded", "worker-1:Succeeded"), now=now))
    assert brief(plan, non_events(result.actions)) == expected
    assert result.requeue_after == requeue


def test_ttl_zero_deletes_in_the_pass_that_finishes() -> None:
    job = prior(tfjob(run_policy={"ttlSecondsAfterFinished": 0}), RUNNING)
    plan, result = run(Case(job, pods=("worker-0:Succeeded", "worker-1:Running"), now=3))
    assert brief(plan, non_events(result.actions)) == ["-job"]


@pytest.mark.parametrize(
    "terminal",
    [pytest.param(cond("Failed"), id="failed"), pytest.param(cond("Succeeded"), id="succeeded")],
)
def test_terminal_job_gets_no_new_pods_or_verdict(terminal: Condition) -> None:
    job = prior(tfjob(restart="ExitCode"), terminal, completion=0)
    _plan, result = run(Case(job, pods=("worker-1:Failed:137",), services=()))
    assert result.actions == ()
    assert result.status == job.status


def test_finished_job_is_not_suspended() -> None:
    job = prior(tfjob(run_policy={"suspend": True}), cond("Succeeded"), completion=0)
    _, result = run(Case(job, pods=("worker-0:Succeeded", "worker-1:Succeeded")))
    assert result.actions == ()
    assert not result.status.is_true(ConditionType.SUSPENDED)


# --- suspend and resume ----------------------------------------------------------------------


def test_suspend_deletes_everything_and_marks_the_job() -> None:
    job = prior(tfjob(run_policy={"suspend": True}), RUNNING)
    job.status.replica_statuses["Worker"] = ReplicaStatus(active=2)
    plan, result = run(
        Case(
            job,
            pods=("worker-0:Running", "worker-1:Pending"),
            pod_group=ObservedPodGroup("x", "Running"),
            options=ReconcileOptions(gang_scheduler="volcano"),
        )
    )
    assert brief(plan, non_events(result.actions)) == [
        "-pod worker-0",
        "-pod worker-1",
        "-svc worker-0",
        "-svc worker-1",
        "-pg",
    ]
    status = result.status
    assert true_conditions(status) == {"Created": "TFJobCreated", "Suspended": "TFJobSuspended"}
    running = status.condition(ConditionType.RUNNING)
    assert running is not None and (running.status, running.reason) == ("False", "TFJobSuspended")
    assert status.replica_statuses["Worker"].active == 0
    assert ("Normal", "TFJobSuspended") in [(e.type, e.reason) for e in events(result.actions)]


def test_suspended_at_creation_creates_nothing() -> None:
    job = tfjob(run_policy={"suspend": True})
    _plan, result = run(Case(job, services=()))
    assert non_events(result.actions) == []
    assert true_conditions(result.status) == {
        "Created": "TFJobCreated",
        "Suspended": "TFJobSuspended",
    }
    assert result.status.start_time is None


def test_resume_resets_start_time_and_recreates() -> None:
    job = prior(
        tfjob(run_policy={"activeDeadlineSeconds": 100}),
        cond("Suspended", reason="TFJobSuspended"),
        start=0,
    )
    plan, result = run(Case(job, services=(), now=50))
    suspended = result.status.condition(ConditionType.SUSPENDED)
    assert suspended is not None
    assert (suspended.status, suspended.reason) == ("False", "TFJobResumed")
    assert result.status.start_time == at(50)
    assert result.requeue_after == timedelta(seconds=100)
    assert brief(plan, non_events(result.actions)) == [
        "+svc worker-0",
        "+svc worker-1",
        "+pod worker-0",
        "+pod worker-1",
    ]


# --- gang scheduling -------------------------------------------------------------------------


def test_volcano_creates_the_pod_group_first_and_waits() -> None:
    _plan, result = run(
        Case(tfjob(), services=(), options=ReconcileOptions(gang_scheduler="volcano"))
    )
    assert non_events(result.actions) == [CreatePodGroup(name="x", min_member=2, queue="default")]


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        pytest.param("", [], id="no-phase-yet-waits"),
        pytest.param("Pending", [], id="pending-waits"),
        pytest.param(
            "Inqueue",
            ["+svc worker-0", "+svc worker-1", "+pod worker-0", "+pod worker-1"],
            id="inqueue-creates",
        ),
    ],
)
def test_volcano_pod_group_phase_gates_pods(phase: str, expected: list[str]) -> None:
    case = Case(
        tfjob(),
        services=(),
        pod_group=ObservedPodGroup("x", phase),
        options=ReconcileOptions(gang_scheduler="volcano"),
    )
    plan, result = run(case)
    assert brief(plan, non_events(result.actions)) == expected


def test_scheduler_plugins_creates_group_and_pods_together() -> None:
    plan, result = run(
        Case(tfjob(), services=(), options=ReconcileOptions(gang_scheduler="scheduler-plugins"))
    )
    assert brief(plan, non_events(result.actions)) == [
        "+pg",
        "+svc worker-0",
        "+svc worker-1",
        "+pod worker-0",
        "+pod worker-1",
    ]
    assert non_events(result.actions)[0] == CreatePodGroup(name="x", min_member=2, queue=None)


def test_pod_group_from_scheduling_policy() -> None:
    job = tfjob(
        workers=3,
        run_policy={
            "schedulingPolicy": {
                "minAvailable": 2,
                "queue": "research",
                "priorityClass": "high",
                "minResources": {"cpu": "4", "memory": "8Gi"},
                "scheduleTimeoutSeconds": 120,
            }
        },
    )
    _, result = run(Case(job, services=(), options=ReconcileOptions(gang_scheduler="volcano")))
    assert non_events(result.actions) == [
        CreatePodGroup(
            name="x",
            min_member=2,
            queue="research",
            priority_class="high",
            min_resources=(("cpu", "4"), ("memory", "8Gi")),
            schedule_timeout_seconds=120,
        )
    ]


def test_pod_group_min_resources_summed_from_requests() -> None:
    text = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: x}
spec:
  runPolicy: {schedulingPolicy: {minAvailable: 2}}
  tfReplicaSpecs:
    Worker:
      replicas: 3
      template:
        spec:
          containers:
          - name: tensorflow
            image: python
            command: [python]
            resources:
              requests: {cpu: 500m, memory: 1Gi}
              limits: {cpu: "1", nvidia.com/gpu: 1}
"""
    from kubemill.api import load_one

    job = load_one(text)
    _, result = run(Case(job, services=(), options=ReconcileOptions(gang_scheduler="volcano")))
    group = non_events(result.actions)[0]
    assert isinstance(group, CreatePodGroup)
    assert group.min_resources == (("cpu", "1"), ("memory", "2147483648"), ("nvidia.com/gpu", "2"))


def test_pod_group_deleted_when_the_job_finishes() -> None:
    job = prior(tfjob(), RUNNING)
    plan, result = run(
        Case(
            job,
            pods=("worker-0:Succeeded", "worker-1:Running"),
            pod_group=ObservedPodGroup("x", "Running"),
            options=ReconcileOptions(gang_scheduler="volcano"),
        )
    )
    assert brief(plan, non_events(result.actions)) == ["-pg"]


def test_unknown_gang_scheduler_is_refused_with_a_hint() -> None:
    with pytest.raises(ValueError, match="gang_scheduler: unknown scheduler 'kueue'; use one of"):
        ReconcileOptions(gang_scheduler="kueue")


# --- idempotence and conditions bookkeeping ---------------------------------------------------


def test_second_reconcile_with_nothing_changed_yields_nothing() -> None:
    job = tfjob(chief=1, workers=2)
    plan = plan_for(job)
    observed = Observed(pods=all_pods(plan), services=frozenset(r.name for r in plan.replicas))
    first = reconcile(job, plan, observed, at(1))
    assert first.status.is_true(ConditionType.RUNNING)
    second = reconcile(with_status(job, first.status), plan, observed, at(5))
    assert second.actions == ()
    assert second.status == first.status


def test_last_transition_time_moves_only_when_status_flips() -> None:
    job = prior(tfjob(restart="ExitCode"), cond("Running", at_s=0))
    _, result = run(Case(job, pods=("worker-0:Running", "worker-1:Running"), now=30))
    running = result.status.condition(ConditionType.RUNNING)
    assert running is not None and running.last_transition_time == T0
    _plan, suspended = run(
        Case(prior(tfjob(run_policy={"suspend": True}), cond("Running", at_s=0)), now=30)
    )
    stopped = suspended.status.condition(ConditionType.RUNNING)
    assert stopped is not None and stopped.last_transition_time == at(30)


# --- restart policy helpers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param(RestartPolicy.EXIT_CODE, "Never", id="exitcode-is-never"),
        pytest.param(RestartPolicy.ON_FAILURE, "OnFailure", id="onfailure"),
        pytest.param(RestartPolicy.ALWAYS, "Always", id="always"),
        pytest.param(RestartPolicy.NEVER, "Never", id="never"),
    ],
)
def test_pod_restart_policy(policy: RestartPolicy, expected: str) -> None:
    assert pod_restart_policy(policy) == expected


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        pytest.param(0, False, id="0-success"),
        pytest.param(1, False, id="1-permanent"),
        pytest.param(127, False, id="127-permanent"),
        pytest.param(128, True, id="128-retryable"),
        pytest.param(137, True, id="137-sigkill"),
        pytest.param(255, True, id="255"),
        pytest.param(-9, True, id="negative-is-a-signal"),
        pytest.param(None, True, id="no-exit-code"),
    ],
)
def test_is_retryable_exit_code(code: int | None, retryable: bool) -> None:
    assert is_retryable_exit_code(code) is retryable


@pytest.mark.parametrize(
    ("phase", "code", "reason", "expected"),
    [
        pytest.param("Failed", 3, "", "worker-1 exited with code 3", id="exit-code"),
        pytest.param(
            "Failed", 137, "OOMKilled", "worker-1 exited with code 137 (OOMKilled)", id="oom"
        ),
        pytest.param("Failed", None, "Evicted", "worker-1 failed: Evicted", id="evicted"),
        pytest.param(
            "Unknown", None, "supervisor died", "worker-1 was lost: supervisor died", id="lost"
        ),
        pytest.param("Unknown", None, "", "worker-1 was lost", id="lost-without-reason"),
    ],
)
def test_failure_is_described_by_replica(
    phase: str, code: int | None, reason: str, expected: str
) -> None:
    from kubemill.core import describe_failure

    plan = plan_for(tfjob())
    observed = pod(plan, "worker-1", phase, exit_code=code, reason=reason)  # type: ignore[arg-type]
    assert describe_failure(observed) == expected


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param(
            Case(tfjob(), services=("worker-0", "worker-1"), pods=("worker-0:Running",)),
            [
                ("Normal", "TFJobCreated", "TFJob default/x is created."),
                ("Normal", "SuccessfulCreatePod", "Created pod: x-worker-1"),
            ],
            id="created-and-pod-created",
        ),
        pytest.param(
            Case(
                prior(tfjob(restart="Never"), RUNNING),
                pods=("worker-0:Running", "worker-1:Unknown"),
            ),
            [
                (
                    "Warning",
                    "TFJobFailed",
                    "TFJob default/x is failed because 1 Worker replica(s) failed: "
                    "worker-1 was lost.",
                ),
            ],
            id="failed-event-names-the-replica",
        ),
        pytest.param(
            Case(prior(tfjob(), cond("Suspended", reason="TFJobSuspended")), services=()),
            [
                ("Normal", "TFJobResumed", "TFJob default/x is resumed."),
                ("Normal", "SuccessfulCreateService", "Created service: x-worker-0"),
                ("Normal", "SuccessfulCreateService", "Created service: x-worker-1"),
                ("Normal", "SuccessfulCreatePod", "Created pod: x-worker-0"),
                ("Normal", "SuccessfulCreatePod", "Created pod: x-worker-1"),
            ],
            id="resumed",
        ),
    ],
)
def test_events(case: Case, expected: list[tuple[str, str, str]]) -> None:
    _, result = run(case)
    assert [(e.type, e.reason, e.message) for e in events(result.actions)] == expected
