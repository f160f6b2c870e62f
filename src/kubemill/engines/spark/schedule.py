"""The ScheduledSparkApplication controller's decisions, as a pure function.

One implementation of :class:`kubemill.core.controller.ControllerRules`
(:data:`SCHEDULED_SPARK`), which the registry names for the kind.

:func:`decide` takes the schedule (with its status), the runs it owns as last seen, the
time zone its schedule is read in and ``now``, and returns what to do: create the run that
is due, delete runs (the active ones under ``Replace``, finished ones beyond the history
limits), the new status, and when to look again. The substrate resolves the time zone (the
zone database is files, which the core does not read) and carries the actions out; nothing
else writes the schedule's status.

Upstream semantics (kubeflow/spark-operator's controller), and where kubemill differs:

- **Names.** A run is named ``<name>-<unix nanoseconds>``, as upstream, but of the time it
  was *due* (``status.nextRun``), not of the moment the controller got round to it: a pass
  repeated after a lost status write then asks for the same name, which already exists,
  instead of starting the run twice. ``lastRun`` is that due time too, so it and the
  name's digits always agree.
- **Concurrency.** ``Allow`` starts the run regardless; ``Forbid`` skips a due run while
  another is active (``nextRun`` moves on to the next time, with a ``RunSkipped`` event;
  upstream kept the stale ``nextRun`` and started late once the active run ended);
  ``Replace`` deletes every active run and starts the new one in the same pass.
- **Missed times.** However many times were missed (the operator was down), at most one
  late run starts: the one due at the earliest missed time (``status.nextRun``); the others
  are skipped and ``nextRun`` becomes the first time after ``now``. Upstream behaves the
  same (one run, then ``Next(now)``). ``@every`` keeps its cadence from the due time
  (upstream's drifted by the controller's latency).
- **History.** Finished runs beyond ``successfulRunHistoryLimit`` / ``failedRunHistoryLimit``
  (newest kept) are deleted on every pass, not only when a new run starts, and
  ``pastSuccessfulRunNames`` / ``pastFailedRunNames`` list the ones kept, newest first.
- **Suspend.** No new runs; runs already started go on and their history is kept as
  always. ``nextRun`` is cleared, and on resume it is the first time after that moment:
  times that passed while suspended are not made up (upstream started one late run).
- **Validation.** A schedule or time zone that does not parse sets ``scheduleState:
  FailedValidation`` with the reason; once fixed, the schedule is in force again (upstream
  stayed FailedValidation for good). A schedule whose ``nextRun`` no longer fits an edited
  cron expression or time zone is rescheduled from ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from kubemill.api import CronError, CronSchedule, Job, JobStatus, parse_cron
from kubemill.core.controller import (
    ControllerAction,
    ControllerContext,
    ControllerResult,
    CreateRun,
    DeleteRun,
    ObservedRun,
    RunOutcome,
    SampleRun,
)
from kubemill.core.model import RecordEvent
from kubemill.engines.spark.api.scheduled import (
    SCHEDULED_APP_LABEL,
    ConcurrencyPolicy,
    ScheduledSparkApplication,
    ScheduledSparkApplicationStatus,
    ScheduleState,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

ScheduleAction = ControllerAction
ScheduleResult = ControllerResult[ScheduledSparkApplicationStatus]
"""One pass's decisions for a schedule (:class:`~kubemill.core.controller.ControllerResult`)."""


def unix_nanos(moment: datetime) -> int:
    """``moment`` as whole nanoseconds since the epoch (exact: no float on the way)."""
    delta = moment.astimezone(UTC) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def invalid(status: ScheduledSparkApplicationStatus, reason: str) -> ScheduleResult:
    """The schedule cannot be in force (its schedule, time zone or template is wrong):
    ``FailedValidation`` with ``reason``; nothing more until the spec changes."""
    new = status.model_copy(deep=True)
    new.schedule_state = ScheduleState.FAILED_VALIDATION
    new.reason = reason
    new.next_run = None
    events: tuple[ScheduleAction, ...] = ()
    if (status.schedule_state, status.reason) != (new.schedule_state, reason):
        events = (RecordEvent("Warning", "FailedValidation", reason),)
    return ScheduleResult(events, new, None, refusal=reason)


def fire_after(cron: CronSchedule, zone: tzinfo, after: datetime) -> datetime:
    """The first time after ``after`` that ``cron`` fires, read in ``zone``, in UTC."""
    return cron.next_after(after.astimezone(zone)).astimezone(UTC)


def next_due(cron: CronSchedule, zone: tzinfo, due: datetime, now: datetime) -> datetime:
    """The first time after ``now`` the schedule fires, given that it was due at ``due``
    (``@every`` keeps its cadence from ``due``; a cron schedule has its own)."""
    if cron.every_seconds is None:
        return fire_after(cron, zone, now)
    step = timedelta(seconds=cron.every_seconds)
    missed = (now - due) // step if now >= due else -1
    return due + step * (missed + 1)


def _fits(cron: CronSchedule, zone: tzinfo, when: datetime) -> bool:
    """Whether ``when`` is a time the schedule fires at (always, for ``@every``: any
    moment can be one of its times)."""
    if cron.every_seconds is not None:
        return True
    local = when.astimezone(zone)
    return local.second == 0 and local.microsecond == 0 and cron.matches(local)


def _utc(moment: datetime | None) -> datetime | None:
    # Aware datetimes of one tzinfo compare by wall clock; in UTC they compare by instant.
    if moment is None:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def decide(
    app: ScheduledSparkApplication,
    runs: Sequence[ObservedRun],
    *,
    zone: tzinfo,
    now: datetime,
) -> ScheduleResult:
    """One pass over ``app``: see the module's docstring for the rules.

    ``runs`` are the SparkApplications the schedule owns (the substrate checks the owner);
    ``zone`` is its ``spec.timeZone`` resolved (the operator's zone when unset or
    ``Local``); ``now`` is an aware datetime.
    """
    now = _utc(now) or now
    try:
        cron = parse_cron(app.spec.schedule)
    except CronError as exc:
        return invalid(app.status, f"invalid schedule {app.spec.schedule!r}: {exc}")
    status = app.status.model_copy(deep=True)
    status.schedule_state = ScheduleState.SCHEDULED
    status.reason = None
    actions: list[ScheduleAction] = []
    live = [r for r in runs if not r.deleting]
    next_run = _utc(status.next_run)

    if app.spec.suspend:
        next_run = None
    elif next_run is None or not _fits(cron, zone, next_run):
        # New, resumed, or rescheduled by an edit of the schedule or its zone.
        next_run = fire_after(cron, zone, now)
    elif next_run <= now:
        due = next_run
        actions += _start(app, live, due, now)
        next_run = next_due(cron, zone, due, now)
        if any(isinstance(a, CreateRun) for a in actions) or _exists(app, live, due):
            status.last_run = due
            status.last_run_name = app.run_name(unix_nanos(due))
    else:
        # The schedule may fire sooner after an edit (upstream's rule too).
        next_run = min(next_run, fire_after(cron, zone, now))
    status.next_run = next_run

    started = {a.name for a in actions if isinstance(a, CreateRun)}
    replaced = {a.name for a in actions if isinstance(a, DeleteRun)}
    finished = [r for r in live if r.name not in replaced and r.name not in started]
    kept_ok, gone_ok = _history(finished, "succeeded", app.spec.successful_run_history_limit)
    kept_bad, gone_bad = _history(finished, "failed", app.spec.failed_run_history_limit)
    for run in (*gone_ok, *gone_bad):
        actions.append(DeleteRun(run.name, run.uid, "history"))
        actions.append(
            RecordEvent(
                "Normal", "RunDeleted", f"deleted run {run.name}: beyond the run history limit"
            )
        )
    status.past_successful_run_names = [r.name for r in kept_ok]
    status.past_failed_run_names = [r.name for r in kept_bad]

    requeue = None if next_run is None else max(next_run - now, timedelta(0))
    return ScheduleResult(tuple(actions), status, requeue, wake_at=next_run)


def _exists(app: ScheduledSparkApplication, runs: Iterable[ObservedRun], due: datetime) -> bool:
    name = app.run_name(unix_nanos(due))
    return any(r.name == name for r in runs)


def _start(
    app: ScheduledSparkApplication, runs: Sequence[ObservedRun], due: datetime, now: datetime
) -> list[ScheduleAction]:
    """The actions that start the run due at ``due`` under the concurrency policy."""
    nanos = unix_nanos(due)
    name = app.run_name(nanos)
    if _exists(app, runs, due):
        return []  # started by a pass whose status write was lost
    active = [r for r in runs if r.outcome == "active"]
    late = "" if now - due < timedelta(seconds=1) else f" (late: it was due at {_stamp(due)})"
    policy = app.spec.concurrency_policy
    actions: list[ScheduleAction] = []
    if active and policy is ConcurrencyPolicy.FORBID:
        names = ", ".join(r.name for r in active)
        return [
            RecordEvent(
                "Normal",
                "RunSkipped",
                f"skipped the run due at {_stamp(due)}: concurrencyPolicy Forbid and {names} "
                "still running",
            )
        ]
    if active and policy is ConcurrencyPolicy.REPLACE:
        for run in active:
            actions.append(DeleteRun(run.name, run.uid, "replace"))
            actions.append(
                RecordEvent(
                    "Normal",
                    "RunReplaced",
                    f"deleted run {run.name}: concurrencyPolicy Replace and {name} is due",
                )
            )
    actions.append(CreateRun(name, due, app.run(nanos)))
    actions.append(RecordEvent("Normal", "RunStarted", f"created run {name}{late}"))
    return actions


def _history(
    runs: Iterable[ObservedRun], outcome: RunOutcome, limit: int
) -> tuple[list[ObservedRun], list[ObservedRun]]:
    """Finished runs with ``outcome``, newest first: (kept, beyond the limit)."""
    chosen = sorted((r for r in runs if r.outcome == outcome), key=_age_key, reverse=True)
    return chosen[:limit], chosen[limit:]


def _age_key(run: ObservedRun) -> tuple[int, datetime, str]:
    # The due time in the name orders runs as they were scheduled; creation time and name
    # order anything else (a run renamed by hand) deterministically.
    _, _, digits = run.name.rpartition("-")
    nanos = int(digits) if digits.isdigit() else -1
    created = _utc(run.created) or EPOCH
    return nanos, created, run.name


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class ScheduledSparkRules:
    """The ScheduledSparkApplication's :class:`~kubemill.core.controller.ControllerRules`:
    its runs carry the spark-operator's ``scheduled-app-name`` label; its time zone comes
    from the substrate (:attr:`ControllerContext.zone_of`)."""

    run_label: str = SCHEDULED_APP_LABEL

    def decide(
        self,
        job: Job,
        runs: Sequence[ObservedRun],
        *,
        now: datetime,
        context: ControllerContext,
    ) -> ControllerResult[JobStatus]:
        if not isinstance(job, ScheduledSparkApplication):
            raise TypeError(f"{job.KIND} {job.name} is not a ScheduledSparkApplication")
        zone = context.zone_of(job.spec.time_zone)
        if isinstance(zone, str):
            return invalid(job.status, zone)
        return decide(job, runs, zone=zone, now=now)

    def refuse(self, status: Mapping[str, Any], reason: str) -> ControllerResult[JobStatus]:
        try:
            found = ScheduledSparkApplicationStatus.model_validate(status)
        except ValueError:
            found = ScheduledSparkApplicationStatus()
        return invalid(found, reason)

    def sample_run(self, job: Job) -> SampleRun | None:
        if not isinstance(job, ScheduledSparkApplication):
            return None
        return SampleRun(job.run(0), "spec.template")


SCHEDULED_SPARK = ScheduledSparkRules()
"""The schedule's rules, as the registry names them."""


__all__ = [
    "SCHEDULED_SPARK",
    "CreateRun",
    "DeleteRun",
    "ObservedRun",
    "ScheduleAction",
    "ScheduleResult",
    "ScheduledSparkRules",
    "decide",
    "fire_after",
    "invalid",
    "next_due",
    "unix_nanos",
]
