"""The state machine of a job that runs again as a whole (``Plan.reruns``).

A Spark application is one application: its driver pod. The spark-operator moves it through
NEW, SUBMITTED, RUNNING, SUCCEEDING/FAILING, COMPLETED/FAILED, re-runs it (PENDING_RERUN)
after a failure, a refused submission (SUBMISSION_FAILED) or a spec change (INVALIDATING),
suspends and resumes it (SUSPENDING, SUSPENDED, RESUMING), and says UNKNOWN while its
driver's node is unreachable. :func:`step` is that machine as one pure function:

    (the record of the last pass, the policy, what is observed now, now) -> Step

A :class:`Step` is the new record plus what to do: submit (create the driver), stop the
driver (delete its pod; its executors go with it by ownerReference), delete the job (TTL),
and when to look again. :mod:`kubemill.core.reconcile` carries it out with the same
helpers every kind uses (children, services, counts, conditions, events).

One transition per pass, except a submission, which happens in the pass that decides it.
A state that waits (a retry interval, the driver's grace, a pod still terminating) asks
for a requeue and otherwise stays, so a pass on unchanged inputs changes nothing.

Where kubemill deviates from the spark-operator, and why:

- **A driver pod missing right after submission is not a failure** for
  :data:`DRIVER_GRACE` after the submission: a watch may show the new pod late. Upstream
  has the same grace as an option, off by default (an application then fails at once).
  A driver that is missing while RUNNING fails the run, as upstream.
- **A driver whose image cannot be pulled fails the run** (:data:`IMAGE_PULL_FAILURES`,
  the waiting reason of its Pending pod) with that reason, and its pod is deleted: it would
  never start. Upstream leaves the application SUBMITTED for ever.
- **A driver stopped on request is not judged.** Suspending, invalidating and re-running
  delete the driver pod; Spark's driver then exits 143 (SIGTERM). In those states the
  driver's exit is not looked at, so that exit never fails the application (upstream can
  record it as a failure when it sees the pod before the state change).
- **The failure retry interval is measured from the run's termination** (``terminated``),
  not from the submission with a linear backoff as upstream: a run that took an hour would
  otherwise be re-run at once. The submission retry interval is measured from the refused
  submission. Both are fixed, neither grows.
- **The submission ID is derived, not random** (the core is pure): a UUID-shaped digest of
  the job's uid, the submission time and the attempt counts.
- **A spec change is noticed by digest** (:attr:`RerunPolicy.spec_digest` against the one
  recorded at the submission), not by comparing the old and the new object of an update
  event, so an operator that was down during the change still sees it. A change while
  suspended is simply taken up by the resumed run. The digest (12 hex digits) is the last
  group of the submission ID, so it survives a status schema that keeps only the
  spark-operator's fields (its own CRD, under ``--serve-upstream-groups``).

Retry budgets, as upstream counts them: ``onFailureRetries: N`` re-runs a failed
application while ``executionAttempts <= N`` (exactly N re-runs); ``Always`` without
limit, after a success too. ``onSubmissionFailureRetries: N`` submits again while
``submissionAttempts <= N``; a re-run starts with ``submissionAttempts`` at 0, a spec
change with both counts at 0. A resumed run counts as an execution, as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from kubemill.api.runstates import ApplicationStateType as State
from kubemill.core.model import ObservedPod
from kubemill.frameworks.plan import RerunPolicy, RunRecord, submission_id

DRIVER_GRACE = timedelta(seconds=10)
"""How long after a submission a missing driver pod is not yet a failure: the pod was
created, but the substrate's view (a watch) may show it a little later."""

IMAGE_PULL_FAILURES = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
"""Waiting reasons of a Pending driver that mean its image will not be pulled."""

TERMINAL = frozenset({State.COMPLETED, State.FAILED})
ACTIVE = frozenset({State.SUBMITTED, State.RUNNING, State.UNKNOWN})
"""A run is under way: the driver's pod is judged."""
GOING = frozenset({State.PENDING_RERUN, State.INVALIDATING, State.RESUMING})
"""The old driver goes (if any), then the application is submitted again."""


@dataclass(frozen=True)
class Facts:
    """What one pass observed of the application."""

    driver_name: str
    driver: ObservedPod | None
    """The driver's pod, unless it is gone or being deleted."""
    driver_going: bool = False
    """The driver's pod is being deleted (a deletion the core asked for, or anyone's)."""
    refused: str = ""
    """The API's message when it refused a creation of the last submission."""
    suspend: bool = False
    stop: tuple[str, str] | None = None
    """(reason, message): the job must stop for good (an interrupt, a halted substrate)."""
    uid: str = ""


@dataclass(frozen=True)
class Step:
    """What one pass decided: the new record and what to do."""

    record: RunRecord
    submit: bool = False
    """Create the driver (and what it needs): a new submission, already in ``record``."""
    stop_driver: str = ""
    """Delete the driver's pod, for this reason ("" keeps it)."""
    delete_job: bool = False
    """The TTL after the final termination has passed."""
    requeue: timedelta | None = None
    reason: str = ""
    """The Failed condition's reason when ``record`` is FAILED ("": the kind's own)."""

    @property
    def state(self) -> State:
        return self.record.state


def _retries_left(limit: int | None, used: int) -> bool:
    return limit is None or used <= limit


def step(record: RunRecord, policy: RerunPolicy, facts: Facts, now: datetime) -> Step:
    """The next state of the application and what to do now (see the module doc)."""
    decided = _next(record, policy, facts, now)
    if decided.state in TERMINAL and record.state not in TERMINAL:
        # The time to live starts now: look again when it ends.
        expiry = _terminated(decided.record, policy, now)
        return replace(decided, requeue=expiry.requeue, delete_job=expiry.delete_job)
    return decided


def _next(record: RunRecord, policy: RerunPolicy, facts: Facts, now: datetime) -> Step:
    state = record.state
    if facts.stop is not None and state not in TERMINAL:
        reason, message = facts.stop
        return Step(
            replace(record, state=State.FAILED, error=message, terminated=record.terminated or now),
            stop_driver=f"stopped: {reason}" if facts.driver is not None else "",
            reason=reason,
        )
    if facts.suspend and state not in TERMINAL:
        return _suspend(record, facts)
    if state in (State.SUSPENDING, State.SUSPENDED):
        # Resumed: the run starts afresh once the stopped driver is gone.
        return Step(replace(record, state=State.RESUMING, error=""), requeue=timedelta(0))
    changed = bool(record.spec_digest) and record.spec_digest != policy.spec_digest
    if changed and state not in GOING:
        return _invalidate(record, facts)
    if state in TERMINAL:
        return _terminated(record, policy, now)
    if state == State.NEW or state in GOING:
        return _resubmit(record, policy, facts, now)
    if state == State.SUBMISSION_FAILED:
        return _after_refusal(record, policy, facts, now)
    if state == State.SUCCEEDING:
        if policy.after_success:
            return _rerun(record, facts)
        return Step(replace(record, state=State.COMPLETED))
    if state == State.FAILING:
        return _after_failure(record, policy, facts, now)
    assert state in ACTIVE, state
    return _judge_driver(record, facts, now)


def _suspend(record: RunRecord, facts: Facts) -> Step:
    stop = "the application is suspended" if facts.driver is not None else ""
    still_there = facts.driver is not None or facts.driver_going
    state = State.SUSPENDING if still_there else State.SUSPENDED
    return Step(replace(record, state=state), stop_driver=stop)


def _invalidate(record: RunRecord, facts: Facts) -> Step:
    """The spec changed: stop the run and start afresh, counts and times reset."""
    fresh = RunRecord(
        state=State.INVALIDATING,
        submission_id=record.submission_id,
        spec_digest=record.spec_digest,
    )
    stop = "the application's spec changed" if facts.driver is not None else ""
    return Step(fresh, stop_driver=stop, requeue=timedelta(0))


def _rerun(record: RunRecord, facts: Facts) -> Step:
    """Run again: the old driver goes, the new run's submissions count from 0."""
    stop = "the application runs again" if facts.driver is not None else ""
    return Step(
        replace(record, state=State.PENDING_RERUN, submission_attempts=0),
        stop_driver=stop,
        requeue=timedelta(0),
    )


def _resubmit(record: RunRecord, policy: RerunPolicy, facts: Facts, now: datetime) -> Step:
    """NEW, or a run that starts again once the old driver is gone."""
    if record.state == State.NEW and facts.driver is not None:
        # Submitted by a pass whose status was never written: adopt that driver.
        return replace(_submit(record, policy, facts, now), submit=False)
    if facts.driver is not None:
        # A driver of the run being replaced: stopped, never judged (its exit 143 included).
        return Step(record, stop_driver="the application runs again")
    if facts.driver_going:
        return Step(record)
    return _submit(record, policy, facts, now)


def _submit(record: RunRecord, policy: RerunPolicy, facts: Facts, now: datetime) -> Step:
    attempts = replace(
        record,
        submission_attempts=record.submission_attempts + 1,
        execution_attempts=record.execution_attempts + 1,
    )
    return Step(
        replace(
            attempts,
            state=State.SUBMITTED,
            error="",
            last_submission=now,
            terminated=None,
            submission_id=submission_id(facts.uid, now, attempts, policy.spec_digest),
            spec_digest=policy.spec_digest,
        ),
        submit=True,
    )


def _after_refusal(record: RunRecord, policy: RerunPolicy, facts: Facts, now: datetime) -> Step:
    if not _retries_left(policy.on_submission_failure_retries, record.submission_attempts):
        return Step(
            replace(record, state=State.FAILED, terminated=record.terminated or now),
            reason="SubmissionFailed",
        )
    due = (record.last_submission or now) + policy.on_submission_failure_interval
    if now < due:
        return Step(record, requeue=due - now)
    if facts.driver is not None or facts.driver_going:
        # Part of the refused submission got through: it goes before the next one.
        return Step(record, stop_driver="resubmitting" if facts.driver is not None else "")
    return _submit(record, policy, facts, now)


def _after_failure(record: RunRecord, policy: RerunPolicy, facts: Facts, now: datetime) -> Step:
    if not _retries_left(policy.on_failure_retries, record.execution_attempts):
        return Step(replace(record, state=State.FAILED))
    due = (record.terminated or now) + policy.on_failure_interval
    if now < due:
        return Step(record, requeue=due - now)
    return _rerun(record, facts)


def _terminated(record: RunRecord, policy: RerunPolicy, now: datetime) -> Step:
    ttl = policy.time_to_live
    if ttl is None or record.terminated is None:
        return Step(record)
    expiry = record.terminated + ttl
    if now >= expiry:
        return Step(record, delete_job=True)
    return Step(record, requeue=expiry - now)


def _judge_driver(record: RunRecord, facts: Facts, now: datetime) -> Step:
    """SUBMITTED, RUNNING or UNKNOWN: the driver's pod says what happens."""
    pod = facts.driver
    if facts.refused and record.state == State.SUBMITTED:
        # The API refused part of the submission (the driver, its ConfigMap, its
        # services, ...): a driver without them would not run, so it goes too. A run whose
        # driver the API never accepted is no execution.
        executed = record.execution_attempts - (1 if pod is None else 0)
        return Step(
            replace(
                record,
                state=State.SUBMISSION_FAILED,
                error=facts.refused,
                execution_attempts=max(executed, 0),
            ),
            stop_driver="its submission was refused" if pod is not None else "",
            requeue=timedelta(0),
        )
    if pod is None:
        if facts.driver_going:
            return Step(record)  # someone deletes it; judged once it is gone
        grace_end = (record.last_submission or now) + DRIVER_GRACE
        if record.state == State.SUBMITTED and now < grace_end:
            return Step(record, requeue=grace_end - now)
        return _failing(record, f"driver pod {facts.driver_name} not found", now)
    if pod.phase == "Pending":
        if pod.reason in IMAGE_PULL_FAILURES:
            failing = _failing(
                record, f"the driver's image cannot be pulled ({pod.reason})", now, pod=pod
            )
            return replace(failing, stop_driver="its image cannot be pulled")
        return Step(replace(record, state=State.SUBMITTED))
    if pod.phase == "Running":
        return Step(replace(record, state=State.RUNNING))
    if pod.phase == "Unknown":
        return Step(replace(record, state=State.UNKNOWN))
    if pod.phase == "Succeeded":
        ended = pod.finished or now
        return Step(
            replace(record, state=State.SUCCEEDING, terminated=ended, error=""),
            requeue=timedelta(0),
        )
    return _failing(record, _driver_failure(pod), now, pod=pod)


def _failing(
    record: RunRecord, error: str, now: datetime, *, pod: ObservedPod | None = None
) -> Step:
    ended = (pod.finished if pod is not None else None) or now
    return Step(
        replace(record, state=State.FAILING, error=error, terminated=ended),
        requeue=timedelta(0),
    )


def _driver_failure(pod: ObservedPod) -> str:
    """The driver's failure as the spark-operator words it, with kubemill's reason, then
    the driver's termination message (its last log lines, ``FallbackToLogsOnError``): the
    exception a user looks for, which upstream leaves in the pod."""
    if pod.exit_code is not None:
        text = f"driver container failed with ExitCode: {pod.exit_code}"
        text = f"{text}, Reason: {pod.reason}" if pod.reason else text
    else:
        text = f"driver pod failed: {pod.reason}" if pod.reason else "driver pod failed"
    message = pod.message.strip()
    return f"{text}: {message}" if message else text


__all__ = [
    "DRIVER_GRACE",
    "IMAGE_PULL_FAILURES",
    "Facts",
    "Step",
    "step",
]
