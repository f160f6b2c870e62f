"""The spark-operator's state machine in the core (``Plan.reruns``, core/application.py).

Two levels: every transition of :func:`kubemill.core.application.step` as a table with a
fixed ``now``; then whole lifecycles through :func:`kubemill.core.reconcile` with a
SparkApplication whose hand-built Plan declares the Spark kind's reruns and status
extension, against the fake substrate (submission, retries and their requeue intervals, the
TTL, refusals, suspension, a spec change, executors counted and never deleted).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest
import yaml
from corekit import (
    T0,
    FakeSubstrate,
    at,
    events,
    non_events,
    plan_for,
    step,
    tfjob,
    with_status,
)

from kubemill.api import ApplicationStateType as S
from kubemill.api import ConditionType, Job
from kubemill.core import (
    RERUN,
    CreatePod,
    DeleteJob,
    DeletePod,
    Observed,
    ObservedPod,
    Refusal,
    reconcile,
)
from kubemill.core.application import DRIVER_GRACE, Facts, Step
from kubemill.core.application import step as machine
from kubemill.engines.spark.api.application import ExecutorState, SparkApplication
from kubemill.engines.spark.framework.planner import recorded_run, reruns, spark_status
from kubemill.frameworks import (
    ForeignPods,
    Plan,
    RerunPolicy,
    RunRecord,
    decided_by,
    submission_id,
    submitted_spec,
)
from kubemill.kinds import load_one

NOW = at(100)
DRIVER = "app-driver-0"
DIGEST = "d1d1d1d1d1d1"


def policy(**changes: Any) -> RerunPolicy:
    base = RerunPolicy(
        recorded=recorded_run,
        on_failure_retries=0,
        on_failure_interval=timedelta(seconds=5),
        on_submission_failure_retries=0,
        on_submission_failure_interval=timedelta(seconds=7),
        spec_digest=DIGEST,
    )
    return replace(base, **changes)


def driver(phase: Any = "Running", **changes: Any) -> ObservedPod:
    return ObservedPod(name=DRIVER, replica_type="Driver", index=0, phase=phase, **changes)


def rec(state: S, **changes: Any) -> RunRecord:
    base = RunRecord(
        state=state,
        submission_attempts=1,
        execution_attempts=1,
        last_submission=at(90),
        submission_id="sub",
        spec_digest=DIGEST,
    )
    return replace(base, **changes)


@dataclass(frozen=True)
class Row:
    """One transition: the record and what is observed -> the state and what is done."""

    name: str
    record: RunRecord
    then: S
    facts: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    submit: bool = False
    stops: bool = False
    requeue: float | None = None
    delete_job: bool = False
    check: dict[str, Any] = field(default_factory=dict)
    """Fields of the new record that must have these values."""


SUBMITTED = rec(S.SUBMITTED)
RUNNING = rec(S.RUNNING)
FAILING = rec(S.FAILING, terminated=at(98), error="boom")
ROWS = [
    # NEW: submitted at once; a driver left by an unrecorded pass is adopted, not made twice.
    Row(
        "new submits",
        RunRecord(),
        S.SUBMITTED,
        submit=True,
        check={"submission_attempts": 1, "execution_attempts": 1, "last_submission": NOW},
    ),
    Row("new adopts a driver", RunRecord(), S.SUBMITTED, facts={"driver": driver("Pending")}),
    # SUBMITTED: the driver's pod decides.
    Row("pending stays", SUBMITTED, S.SUBMITTED, facts={"driver": driver("Pending")}),
    Row("running", SUBMITTED, S.RUNNING, facts={"driver": driver("Running")}),
    Row("unknown", RUNNING, S.UNKNOWN, facts={"driver": driver("Unknown")}),
    Row("unknown recovers", rec(S.UNKNOWN), S.RUNNING, facts={"driver": driver("Running")}),
    Row(
        "succeeded",
        RUNNING,
        S.SUCCEEDING,
        facts={"driver": driver("Succeeded", exit_code=0, finished=at(99))},
        requeue=0,
        check={"terminated": at(99)},
    ),
    Row(
        "failed",
        RUNNING,
        S.FAILING,
        facts={"driver": driver("Failed", exit_code=1, reason="Error", finished=at(99))},
        requeue=0,
        check={
            "terminated": at(99),
            "error": "driver container failed with ExitCode: 1, Reason: Error",
        },
    ),
    Row(
        "evicted",
        RUNNING,
        S.FAILING,
        facts={"driver": driver("Failed", reason="Evicted")},
        requeue=0,
        check={"terminated": NOW, "error": "driver pod failed: Evicted"},
    ),
    *(
        Row(
            f"image: {reason}",
            SUBMITTED,
            S.FAILING,
            facts={"driver": driver("Pending", reason=reason)},
            stops=True,
            requeue=0,
            check={"error": f"the driver's image cannot be pulled ({reason})"},
        )
        for reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
    ),
    Row(
        "pending for another reason is not a failure",
        SUBMITTED,
        S.SUBMITTED,
        facts={"driver": driver("Pending", reason="Unschedulable")},
    ),
    # A missing driver: not a failure within the grace after the submission.
    Row(
        "missing within grace",
        rec(S.SUBMITTED, last_submission=at(95)),
        S.SUBMITTED,
        requeue=5,
    ),
    Row(
        "missing as the grace ends",
        rec(S.SUBMITTED, last_submission=at(90)),
        S.FAILING,
        requeue=0,
    ),
    Row(
        "missing after grace",
        rec(S.SUBMITTED, last_submission=at(80)),
        S.FAILING,
        requeue=0,
        check={"error": f"driver pod {DRIVER} not found"},
    ),
    Row("missing while running", RUNNING, S.FAILING, requeue=0),
    Row("someone deletes it", RUNNING, S.RUNNING, facts={"driver_going": True}),
    Row(
        "refused",
        SUBMITTED,
        S.SUBMISSION_FAILED,
        facts={"refused": "Pod app-driver-0: forbidden"},
        requeue=0,
        check={"error": "Pod app-driver-0: forbidden", "execution_attempts": 0},
    ),
    Row(
        "refused in part: the driver goes too",
        SUBMITTED,
        S.SUBMISSION_FAILED,
        facts={"driver": driver("Pending"), "refused": "ConfigMap app-spark-conf: quota"},
        stops=True,
        requeue=0,
        check={"execution_attempts": 1},
    ),
    Row(
        "a refusal while running is no submission failure",
        RUNNING,
        S.RUNNING,
        facts={"driver": driver("Running"), "refused": "Service app-ui-svc: quota"},
    ),
    # SUCCEEDING: completed, or run again under Always (at once, as upstream).
    Row("completes", rec(S.SUCCEEDING, terminated=at(99)), S.COMPLETED),
    Row(
        "always re-runs a success",
        rec(S.SUCCEEDING, terminated=at(99)),
        S.PENDING_RERUN,
        facts={"driver": driver("Succeeded", exit_code=0)},
        policy={"after_success": True},
        stops=True,
        requeue=0,
        check={"submission_attempts": 0},
    ),
    # FAILING: re-run after the interval from the termination while retries are left.
    Row("never re-runs", FAILING, S.FAILED, check={"error": "boom"}),
    Row(
        "retry waits for the interval",
        FAILING,
        S.FAILING,
        policy={"on_failure_retries": 1},
        requeue=3,
    ),
    Row(
        "retry is due",
        rec(S.FAILING, terminated=at(95)),
        S.PENDING_RERUN,
        facts={"driver": driver("Failed", exit_code=1)},
        policy={"on_failure_retries": 1},
        stops=True,
        requeue=0,
    ),
    Row(
        "retries used up",
        rec(S.FAILING, terminated=at(50), execution_attempts=2),
        S.FAILED,
        policy={"on_failure_retries": 1},
    ),
    Row(
        "always retries without limit",
        rec(S.FAILING, terminated=at(50), execution_attempts=40),
        S.PENDING_RERUN,
        policy={"on_failure_retries": None},
        requeue=0,
    ),
    # PENDING_RERUN: the old driver goes (never judged), then a new submission.
    Row(
        "rerun waits for the driver to go",
        rec(S.PENDING_RERUN),
        S.PENDING_RERUN,
        facts={"driver_going": True},
    ),
    Row(
        "rerun stops a driver, exit 143 not judged",
        rec(S.PENDING_RERUN),
        S.PENDING_RERUN,
        facts={"driver": driver("Failed", exit_code=143)},
        stops=True,
    ),
    Row(
        "rerun submits",
        rec(S.PENDING_RERUN, submission_attempts=0, terminated=at(95)),
        S.SUBMITTED,
        submit=True,
        check={"execution_attempts": 2, "submission_attempts": 1, "terminated": None},
    ),
    # SUBMISSION_FAILED: submitted again after its interval while retries are left.
    Row(
        "submission never retried",
        rec(S.SUBMISSION_FAILED, error="forbidden"),
        S.FAILED,
        check={"terminated": NOW},
    ),
    Row(
        "submission retry waits",
        rec(S.SUBMISSION_FAILED, last_submission=at(95)),
        S.SUBMISSION_FAILED,
        policy={"on_submission_failure_retries": 1},
        requeue=2,
    ),
    Row(
        "submission retry is due",
        rec(S.SUBMISSION_FAILED, execution_attempts=0),
        S.SUBMITTED,
        facts={"refused": "old refusal"},
        policy={"on_submission_failure_retries": 1},
        submit=True,
        check={"submission_attempts": 2, "execution_attempts": 1},
    ),
    Row(
        "submission retries used up",
        rec(S.SUBMISSION_FAILED, submission_attempts=2),
        S.FAILED,
        policy={"on_submission_failure_retries": 1},
    ),
    # Terminal: only the TTL, from the termination.
    Row("completed stays", rec(S.COMPLETED, terminated=at(99)), S.COMPLETED),
    Row(
        "ttl pending",
        rec(S.COMPLETED, terminated=at(99)),
        S.COMPLETED,
        policy={"time_to_live": timedelta(seconds=30)},
        requeue=29,
    ),
    Row(
        "ttl starts at the end",
        rec(S.SUCCEEDING, terminated=at(99)),
        S.COMPLETED,
        policy={"time_to_live": timedelta(seconds=30)},
        requeue=29,
    ),
    Row(
        "ttl already passed at the end",
        rec(S.FAILING, terminated=at(50)),
        S.FAILED,
        policy={"time_to_live": timedelta(seconds=30)},
        delete_job=True,
    ),
    Row(
        "ttl passed",
        rec(S.FAILED, terminated=at(70)),
        S.FAILED,
        policy={"time_to_live": timedelta(seconds=30)},
        delete_job=True,
    ),
    # A spec change re-runs the application from any state, counts reset.
    Row(
        "spec change while running",
        RUNNING,
        S.INVALIDATING,
        facts={"driver": driver("Running")},
        policy={"spec_digest": "d2d2d2d2d2d2"},
        stops=True,
        requeue=0,
        check={"execution_attempts": 0, "submission_attempts": 0, "last_submission": None},
    ),
    Row(
        "spec change after completion",
        rec(S.COMPLETED, terminated=at(50)),
        S.INVALIDATING,
        policy={"spec_digest": "d2d2d2d2d2d2"},
        requeue=0,
        check={"terminated": None},
    ),
    Row(
        "invalidating waits",
        rec(S.INVALIDATING),
        S.INVALIDATING,
        facts={"driver_going": True},
        policy={"spec_digest": "d2d2d2d2d2d2"},
    ),
    Row(
        "invalidating submits the new spec",
        rec(S.INVALIDATING, submission_attempts=0, execution_attempts=0),
        S.SUBMITTED,
        policy={"spec_digest": "d2d2d2d2d2d2"},
        submit=True,
        check={"spec_digest": "d2d2d2d2d2d2", "execution_attempts": 1},
    ),
    # Suspension: from any state but a terminal one; the driver is stopped, not judged.
    Row(
        "suspend a running app",
        RUNNING,
        S.SUSPENDING,
        facts={"driver": driver("Running"), "suspend": True},
        stops=True,
    ),
    Row(
        "suspending, exit 143 not judged",
        rec(S.SUSPENDING),
        S.SUSPENDING,
        facts={"driver": driver("Failed", exit_code=143), "suspend": True},
        stops=True,
    ),
    Row("suspended", rec(S.SUSPENDING), S.SUSPENDED, facts={"suspend": True}),
    Row("suspend a new app", RunRecord(), S.SUSPENDED, facts={"suspend": True}),
    Row(
        "a completed app is not suspended",
        rec(S.COMPLETED),
        S.COMPLETED,
        facts={"suspend": True},
    ),
    Row("resume", rec(S.SUSPENDED), S.RESUMING, requeue=0),
    Row(
        "resuming waits for the old driver",
        rec(S.RESUMING),
        S.RESUMING,
        facts={"driver_going": True},
    ),
    Row(
        "resuming submits",
        rec(S.RESUMING),
        S.SUBMITTED,
        submit=True,
        check={"execution_attempts": 2},
    ),
    Row(
        "a spec change while suspended is taken by the resumed run",
        rec(S.SUSPENDED),
        S.RESUMING,
        policy={"spec_digest": "d2d2d2d2d2d2"},
        requeue=0,
    ),
    # Stopping for good (interrupt, halted substrate): FAILED, the driver stopped.
    Row(
        "interrupt",
        RUNNING,
        S.FAILED,
        facts={"driver": driver("Running"), "stop": ("Interrupted", "stopped on request")},
        stops=True,
        check={"error": "stopped on request", "terminated": NOW},
    ),
    Row(
        "no interrupt after the end",
        rec(S.COMPLETED, terminated=at(50)),
        S.COMPLETED,
        facts={"stop": ("Interrupted", "stopped on request")},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_every_transition(row: Row) -> None:
    facts = Facts(driver_name=DRIVER, driver=None, uid="uid-1")
    facts = replace(facts, **row.facts)
    decided = machine(row.record, policy(**row.policy), facts, NOW)
    assert decided.state == row.then
    assert decided.submit == row.submit
    assert bool(decided.stop_driver) == row.stops
    assert decided.delete_job == row.delete_job
    expected = None if row.requeue is None else timedelta(seconds=row.requeue)
    assert decided.requeue == expected
    for name, value in row.check.items():
        assert getattr(decided.record, name) == value, name


def test_every_state_is_reached_by_some_transition() -> None:
    reached = {row.then for row in ROWS}
    assert reached == set(S) - {S.NEW}


def test_a_step_on_its_own_result_changes_nothing_where_it_waits() -> None:
    """Waiting states are fixed points: the same observation gives the same record."""
    for row in ROWS:
        facts = replace(Facts(driver_name=DRIVER, driver=None, uid="u"), **row.facts)
        first = machine(row.record, policy(**row.policy), facts, NOW)
        if first.record.state != row.record.state or first.submit or first.stop_driver:
            continue
        again = machine(first.record, policy(**row.policy), facts, NOW)
        assert again.record == first.record, row.name


def test_submission_ids_are_derived_distinct_and_carry_the_spec() -> None:
    record = RunRecord()
    one = submission_id("uid", T0, record, "0123456789ab")
    assert one == submission_id("uid", T0, record, "0123456789ab")
    assert len(one) == 36 and one.count("-") == 4
    assert submitted_spec(one) == "0123456789ab"
    others = {
        submission_id("uid2", T0, record, "0123456789ab"),
        submission_id("uid", at(1), record, "0123456789ab"),
        submission_id("uid", T0, replace(record, execution_attempts=1), "0123456789ab"),
    }
    assert one not in others and len(others) == 3
    # A digest that is not 12 hex digits is not carried; an upstream uuid carries none.
    assert submitted_spec(submission_id("uid", T0, record, "not-a-digest")) != "not-a-digest"
    assert submitted_spec("not an id") == ""


def test_the_grace_is_a_documented_constant() -> None:
    assert timedelta(seconds=10) == DRIVER_GRACE
    assert isinstance(machine(SUBMITTED, policy(), Facts(DRIVER, None), NOW), Step)


# --- through the reconciler -----------------------------------------------------------------


def spark_app(**spec: Any) -> SparkApplication:
    doc = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "app", "namespace": "default", "uid": "0123-uid"},
        "spec": {
            "type": "Python",
            "sparkVersion": "4.0.0",
            "image": "spark:4.0.0",
            "mainApplicationFile": "local:///opt/app.py",
            **spec,
        },
    }
    job = load_one(yaml.safe_dump(doc))
    assert isinstance(job, SparkApplication)
    return job


def spark_plan(job: SparkApplication) -> Plan:
    """The driver only (the executors are foreign), with the Spark kind's reruns and status."""
    plan = plan_for(
        job,
        outcome=decided_by("Driver"),
        services=False,
        status_extension=spark_status,
        reruns=reruns(job),
    )
    return replace(
        plan,
        replicas=plan.of_type("Driver"),
        foreign=(ForeignPods("Executor", owner_type="Driver"),),
    )


def on_failure(**fields: int) -> dict[str, Any]:
    """An OnFailure restartPolicy with these counts and intervals."""
    return {"type": "OnFailure", **fields}


def state(job: Job) -> S:
    assert isinstance(job, SparkApplication)
    return job.status.application_state.state


class Run:
    """A SparkApplication driven pass by pass against the fake substrate."""

    def __init__(self, job: SparkApplication) -> None:
        self.job: Job = job
        self.plan = spark_plan(job)
        self.substrate = FakeSubstrate(self.plan)
        self.results: list[Any] = []

    def pass_(self, t: float) -> Any:
        self.job, result = step(self.job, self.plan, self.substrate, at(t))
        self.results.append(result)
        return result

    def driver(self, phase: Any, **changes: Any) -> None:
        self.substrate.set_phase("driver-0", phase, **changes)

    @property
    def status(self) -> Any:
        return self.job.status


def test_a_run_completes_and_its_ttl_deletes_it() -> None:
    run = Run(spark_app(timeToLiveSeconds=60))
    first = run.pass_(0)
    assert CreatePod(DRIVER) in first.actions
    assert state(run.job) == S.SUBMITTED
    assert run.status.submission_attempts == 1 and run.status.execution_attempts == 1
    assert run.status.last_submission_attempt_time == at(0)
    assert run.status.submission_id
    # Unchanged world: nothing to do, not even an event.
    assert run.pass_(1).actions == ()
    run.driver("Running")
    run.pass_(2)
    assert state(run.job) == S.RUNNING and run.status.is_true(ConditionType.RUNNING)
    run.driver("Succeeded", exit_code=0, finished=at(10))
    assert run.pass_(11).requeue_after == timedelta(0)
    assert state(run.job) == S.SUCCEEDING and not run.status.finished
    ttl = run.pass_(11)
    assert state(run.job) == S.COMPLETED
    assert run.status.is_true(ConditionType.SUCCEEDED)
    assert run.status.termination_time == at(10)
    assert run.status.completion_time == at(10)
    assert ttl.requeue_after == timedelta(seconds=59)
    assert DeleteJob() not in ttl.actions
    done = run.pass_(70)
    assert DeleteJob() in done.actions
    assert any(e.reason == "TTLExpired" for e in events(done.actions))


def test_on_failure_re_runs_exactly_the_retries_after_the_interval() -> None:
    run = Run(spark_app(restartPolicy=on_failure(onFailureRetries=1, onFailureRetryInterval=20)))
    run.pass_(0)
    run.driver("Running")
    run.pass_(1)
    assert run.status.is_true(ConditionType.RUNNING)
    run.driver("Failed", exit_code=1, reason="Error", finished=at(30))
    run.pass_(31)
    assert state(run.job) == S.FAILING and run.status.termination_time == at(30)
    assert not run.status.is_true(ConditionType.RUNNING)
    waiting = run.pass_(31)
    # Measured from the termination, as a requeue: 30 + 20 - 31.
    assert waiting.requeue_after == timedelta(seconds=19)
    assert state(run.job) == S.FAILING and non_events(waiting.actions) == []
    assert not run.status.finished
    rerun = run.pass_(50)
    assert state(run.job) == S.PENDING_RERUN
    assert DeletePod(DRIVER, reason="the application runs again") in rerun.actions
    assert run.status.is_true(ConditionType.RESTARTING)
    second = run.pass_(50)
    assert CreatePod(DRIVER) in second.actions and state(run.job) == S.SUBMITTED
    assert run.status.execution_attempts == 2 and run.status.submission_attempts == 1
    run.driver("Failed", exit_code=1, reason="Error", finished=at(60))
    run.pass_(61)
    final = run.pass_(61)
    assert state(run.job) == S.FAILED and run.status.is_true(ConditionType.FAILED)
    assert not any(isinstance(a, CreatePod | DeletePod) for a in final.actions)
    assert run.status.application_state.error_message == (
        "driver container failed with ExitCode: 1, Reason: Error"
    )
    creates = [a for r in run.results for a in r.actions if isinstance(a, CreatePod)]
    assert len(creates) == 2


def test_always_re_runs_a_success() -> None:
    run = Run(spark_app(restartPolicy={"type": "Always"}))
    run.pass_(0)
    run.driver("Succeeded", exit_code=0, finished=at(5))
    run.pass_(6)
    run.pass_(6)
    assert state(run.job) == S.PENDING_RERUN and not run.status.finished
    run.pass_(7)
    assert state(run.job) == S.SUBMITTED and run.status.execution_attempts == 2


def test_an_image_that_cannot_be_pulled_fails_the_application() -> None:
    run = Run(spark_app())
    run.pass_(0)
    run.driver("Pending", reason="ImagePullBackOff")
    failing = run.pass_(3)
    assert state(run.job) == S.FAILING
    assert DeletePod(DRIVER, reason="its image cannot be pulled") in failing.actions
    run.pass_(3)
    assert state(run.job) == S.FAILED
    assert "ImagePullBackOff" in (run.status.application_state.error_message or "")


def test_a_refused_submission_is_retried_then_fails() -> None:
    policy = on_failure(onSubmissionFailureRetries=1, onSubmissionFailureRetryInterval=10)
    run = Run(spark_app(restartPolicy=policy))
    run.pass_(0)
    run.substrate.pods.clear()  # the API refused the driver
    refusal = (Refusal("Pod", DRIVER, "pods is forbidden: exceeded quota"),)

    def refused_pass(t: float) -> Any:
        observed = replace(run.substrate.observed(), refused=refusal)
        result = reconcile(run.job, run.plan, observed, at(t), lifecycle=RERUN)
        run.substrate.apply(result.actions)
        run.job = with_status(run.job, result.status)
        return result

    refused_pass(1)
    assert state(run.job) == S.SUBMISSION_FAILED
    assert run.status.execution_attempts == 0 and run.status.submission_attempts == 1
    assert "exceeded quota" in (run.status.application_state.error_message or "")
    assert refused_pass(2).requeue_after == timedelta(seconds=8)
    retry = refused_pass(10)
    assert CreatePod(DRIVER) in retry.actions and state(run.job) == S.SUBMITTED
    assert run.status.submission_attempts == 2
    run.substrate.pods.clear()
    refused_pass(11)
    refused_pass(30)
    assert state(run.job) == S.FAILED and run.status.is_true(ConditionType.FAILED)
    assert run.status.condition(ConditionType.FAILED).reason == "SubmissionFailed"


def test_suspend_and_resume_never_judge_the_stopped_driver() -> None:
    app = spark_app()
    run = Run(app)
    run.pass_(0)
    run.driver("Running")
    run.pass_(1)
    run.job = run.job.model_copy(update={"spec": app.spec.model_copy(update={"suspend": True})})
    # The driver exits 143 as it is stopped; the pass sees it before its deletion.
    run.driver("Failed", exit_code=143)
    suspending = run.pass_(2)
    assert state(run.job) == S.SUSPENDING
    assert DeletePod(DRIVER, reason="the application is suspended") in suspending.actions
    run.pass_(3)
    assert state(run.job) == S.SUSPENDED and run.status.is_true(ConditionType.SUSPENDED)
    assert not run.status.condition(ConditionType.FAILED)
    run.job = run.job.model_copy(update={"spec": app.spec.model_copy(update={"suspend": False})})
    run.pass_(4)
    assert state(run.job) == S.RESUMING
    assert not run.status.is_true(ConditionType.SUSPENDED)
    resumed = run.pass_(4)
    assert CreatePod(DRIVER) in resumed.actions and state(run.job) == S.SUBMITTED


def test_a_spec_change_re_runs_a_completed_application() -> None:
    app = spark_app()
    run = Run(app)
    run.pass_(0)
    run.driver("Succeeded", exit_code=0, finished=at(5))
    run.pass_(6)
    run.pass_(6)
    assert state(run.job) == S.COMPLETED and run.status.finished
    assert run.pass_(7).actions == ()
    changed = app.spec.model_copy(update={"arguments": ["20"]})
    run.job = run.job.model_copy(update={"spec": changed})
    run.plan = spark_plan(run.job)  # type: ignore[arg-type]
    run.substrate.plan = run.plan
    invalidating = run.pass_(8)
    assert state(run.job) == S.INVALIDATING
    assert DeletePod(DRIVER, reason="the application's spec changed") in invalidating.actions
    assert not run.status.finished and run.status.completion_time is None
    assert run.status.execution_attempts == 0
    again = run.pass_(9)
    assert CreatePod(DRIVER) in again.actions and state(run.job) == S.SUBMITTED
    assert run.status.execution_attempts == 1


def test_suspend_and_ttl_do_not_invalidate() -> None:
    app = spark_app()
    digest = reruns(app).spec_digest
    assert reruns(spark_app(timeToLiveSeconds=5, suspend=True)).spec_digest == digest
    assert reruns(spark_app(arguments=["1"])).spec_digest != digest


def test_executors_are_counted_and_never_deleted() -> None:
    run = Run(spark_app(restartPolicy=on_failure(onFailureRetries=1, onFailureRetryInterval=1)))
    run.pass_(0)
    run.driver("Running")
    executor = ObservedPod(
        name="app-exec-1", replica_type="Executor", index=1, phase="Running", owner=DRIVER
    )
    run.substrate.pods[executor.name] = executor
    run.pass_(1)
    assert run.status.replica_statuses["Executor"].active == 1
    assert run.status.executor_state == {"app-exec-1": ExecutorState.RUNNING}
    run.driver("Failed", exit_code=1, finished=at(2))
    run.pass_(3)
    run.pass_(4)  # PENDING_RERUN: the driver goes, its executor with it (not by the core)
    deletes = [a for r in run.results for a in r.actions if isinstance(a, DeletePod)]
    assert [d.name for d in deletes] == [DRIVER]
    run.substrate.pods.pop(executor.name)
    run.pass_(5)
    # A new submission starts a new list of executors.
    assert state(run.job) == S.SUBMITTED and run.status.executor_state == {}


def test_other_kinds_get_no_application_state() -> None:
    job = tfjob()
    plan = plan_for(job)
    assert plan.reruns is None
    result = reconcile(job, plan, Observed(), NOW)
    assert CreatePod("x-worker-0") in result.actions


def test_a_pass_where_the_application_waits_changes_nothing() -> None:
    """Level-triggered: wherever the machine waits (for the driver, an interval, the TTL,
    a resume), a second pass on what the first left behind has no actions at all."""
    policy = on_failure(onFailureRetries=1, onFailureRetryInterval=30)
    run = Run(spark_app(restartPolicy=policy, timeToLiveSeconds=300))

    def settled(t: float) -> None:
        # Passes until nothing is due at once (SUCCEEDING, FAILING, ... move on next pass).
        for _ in range(5):
            if run.pass_(t).requeue_after != timedelta(0):
                break
        again = run.pass_(t)
        assert again.actions == (), (state(run.job), again.actions)

    settled(0)  # SUBMITTED, the driver pending
    run.driver("Running")
    settled(1)  # RUNNING
    run.driver("Failed", exit_code=1, finished=at(2))
    settled(3)  # FAILING, waiting for the interval
    assert state(run.job) == S.FAILING
    settled(40)  # PENDING_RERUN done: SUBMITTED again
    assert state(run.job) == S.SUBMITTED
    run.driver("Succeeded", exit_code=0, finished=at(50))
    settled(51)  # COMPLETED, waiting for the TTL
    assert state(run.job) == S.COMPLETED


def test_replicas_the_driver_needs_first_come_up_before_it_and_serve_every_run() -> None:
    # Locally a standalone Spark cluster: a Master (stage 0) the driver (stage 1) connects
    # to. The state machine submits the driver only once the Master runs, and a re-run
    # keeps the Master.
    run = Run(spark_app(restartPolicy=on_failure(onFailureRetries=1, onFailureRetryInterval=1)))
    (driver_rep,) = run.plan.replicas
    master = replace(driver_rep, replica_type="Master", name="app-master-0", stage=0)
    run.plan = replace(run.plan, replicas=(master, replace(driver_rep, stage=1)))
    run.substrate.plan = run.plan
    first = run.pass_(0)
    assert CreatePod("app-master-0") in first.actions
    assert CreatePod(DRIVER) not in first.actions
    assert state(run.job) == S.NEW and run.status.submission_attempts == 0
    assert CreatePod(DRIVER) not in run.pass_(1).actions  # the Master is still Pending
    run.substrate.set_phase("master-0", "Running")
    submitted = run.pass_(2)
    assert CreatePod(DRIVER) in submitted.actions
    assert state(run.job) == S.SUBMITTED
    run.driver("Failed", exit_code=1, finished=at(3))
    for t in (4, 5, 6, 7, 8):
        result = run.pass_(t)
        assert not any(
            isinstance(a, (CreatePod, DeletePod)) and a.name == "app-master-0"
            for a in result.actions
        ), result.actions
    assert run.status.execution_attempts == 2, state(run.job)


def test_suspending_stops_the_replicas_the_driver_needs_and_resuming_starts_them_first() -> None:
    app = spark_app()
    run = Run(app)
    (driver_rep,) = run.plan.replicas
    master = replace(driver_rep, replica_type="Master", name="app-master-0", stage=0)
    run.plan = replace(run.plan, replicas=(master, replace(driver_rep, stage=1)))
    run.substrate.plan = run.plan
    run.pass_(0)
    run.substrate.set_phase("master-0", "Running")
    run.pass_(1)
    run.driver("Running")
    run.pass_(2)
    run.job = run.job.model_copy(update={"spec": app.spec.model_copy(update={"suspend": True})})
    suspending = run.pass_(3)
    assert DeletePod(DRIVER, reason="the application is suspended") in suspending.actions
    assert DeletePod("app-master-0", reason="Suspended") in suspending.actions
    run.pass_(4)
    assert state(run.job) == S.SUSPENDED
    run.job = run.job.model_copy(update={"spec": app.spec.model_copy(update={"suspend": False})})
    creates = [a for t in (5, 6, 7) for a in run.pass_(t).actions if isinstance(a, CreatePod)]
    assert creates == [CreatePod("app-master-0")]  # the driver waits for the Master
    run.substrate.set_phase("master-0", "Running")
    assert CreatePod(DRIVER) in run.pass_(8).actions
