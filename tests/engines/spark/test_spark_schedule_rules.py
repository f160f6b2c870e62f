"""The ScheduledSparkApplication controller's decisions (:func:`kubemill.core.decide`), with
fixed clocks: when runs are due and how they are named, every concurrency policy, missed
times, history limits, time zones, suspend, and schedules that cannot be in force.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubemill.api import ApplicationStateType, KindTable
from kubemill.api.loader import load_one
from kubemill.core import CreateRun, DeleteRun, ObservedRun, RecordEvent
from kubemill.engines.spark.api.application import SPARKAPPLICATION, SparkApplicationStatus
from kubemill.engines.spark.api.scheduled import (
    SCHEDULEDSPARKAPPLICATION,
    ScheduledSparkApplication,
    ScheduleState,
)
from kubemill.engines.spark.schedule import ScheduleResult, decide, invalid, unix_nanos

KINDS = KindTable([SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION])
NOW = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)

BASE: dict[str, Any] = {
    "apiVersion": "sparkoperator.k8s.io/v1beta2",
    "kind": "ScheduledSparkApplication",
    "metadata": {"name": "pi", "namespace": "ns", "uid": "u-1", "labels": {"team": "a"}},
    "spec": {
        "schedule": "*/5 * * * *",
        "template": {
            "type": "Python",
            "sparkVersion": "4.0.0",
            "image": "spark:4.0.0",
            "mainApplicationFile": "local:///opt/pi.py",
        },
    },
}


def scheduled(status: dict[str, Any] | None = None, **spec: Any) -> ScheduledSparkApplication:
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec)
    if status is not None:
        doc["status"] = status
    job = load_one(doc, kinds=KINDS)
    assert isinstance(job, ScheduledSparkApplication)
    return job


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def due_at(moment: datetime, **spec: Any) -> ScheduledSparkApplication:
    """A schedule in force whose next run is due at ``moment``."""
    return scheduled({"scheduleState": "Scheduled", "nextRun": stamp(moment)}, **spec)


def run(
    name: str, state: ApplicationStateType | str = "RUNNING", *, deleting: bool = False
) -> ObservedRun:
    status = SparkApplicationStatus.model_validate({"applicationState": {"state": str(state)}})
    return ObservedRun(name=name, uid=f"uid-{name}", status=status, deleting=deleting)


def nanos_name(moment: datetime) -> str:
    return f"pi-{unix_nanos(moment)}"


def creates(result: ScheduleResult) -> list[CreateRun]:
    return [a for a in result.actions if isinstance(a, CreateRun)]


def deletes(result: ScheduleResult) -> list[tuple[str, str]]:
    return [(a.name, a.why) for a in result.actions if isinstance(a, DeleteRun)]


def events(result: ScheduleResult) -> list[str]:
    return [a.reason for a in result.actions if isinstance(a, RecordEvent)]


DUE = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
"""A time ``*/5 * * * *`` fires at, 30 s before :data:`NOW`."""


# --- names and times -------------------------------------------------------------------------


def test_unix_nanos_is_exact() -> None:
    assert unix_nanos(datetime(1970, 1, 1, tzinfo=UTC)) == 0
    assert unix_nanos(datetime(2026, 12, 1, 10, 0, tzinfo=UTC)) == 1_796_119_200_000_000_000
    assert unix_nanos(datetime(2026, 12, 1, 10, 0, 0, 1, tzinfo=UTC)) == 1_796_119_200_000_001_000
    # The same instant in another zone has the same number.
    paris = datetime(2026, 12, 1, 11, 0, tzinfo=ZoneInfo("Europe/Paris"))
    assert unix_nanos(paris) == 1_796_119_200_000_000_000


def test_a_new_schedule_is_scheduled_for_its_first_time() -> None:
    result = decide(scheduled(), [], zone=UTC, now=NOW)
    assert result.actions == ()
    assert result.status.schedule_state is ScheduleState.SCHEDULED
    assert result.status.next_run == datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
    assert result.status.last_run is None
    assert result.requeue_after == timedelta(minutes=4, seconds=30)


def test_nothing_happens_before_the_run_is_due() -> None:
    later = datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
    result = decide(due_at(later), [], zone=UTC, now=NOW)
    assert result.actions == ()
    assert result.status.next_run == later
    assert result.requeue_after == later - NOW


def test_a_due_run_is_the_template_named_by_its_due_time() -> None:
    result = decide(due_at(DUE), [], zone=UTC, now=NOW)
    (create,) = creates(result)
    assert create.name == nanos_name(DUE) == "pi-1796119200000000000"
    assert create.due == DUE
    assert create.run.name == create.name and create.run.namespace == "ns"
    assert create.run.metadata.labels == {
        "team": "a",
        "sparkoperator.k8s.io/scheduled-app-name": "pi",
    }
    (owner,) = create.run.metadata.owner_references or []
    assert (owner.kind, owner.name, owner.uid) == ("ScheduledSparkApplication", "pi", "u-1")
    assert create.run.spec == scheduled().spec.template
    assert events(result) == ["RunStarted"]
    status = result.status
    assert (status.last_run, status.last_run_name) == (DUE, create.name)
    assert status.next_run == datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
    assert result.requeue_after == timedelta(minutes=4, seconds=30)


def test_a_pass_after_a_lost_status_write_does_not_start_the_run_twice() -> None:
    # The run exists (created by the pass whose status write failed): only the status.
    result = decide(due_at(DUE), [run(nanos_name(DUE))], zone=UTC, now=NOW)
    assert creates(result) == [] and deletes(result) == []
    assert result.status.last_run_name == nanos_name(DUE)
    assert result.status.next_run == datetime(2026, 12, 1, 10, 5, tzinfo=UTC)


# --- concurrency policies --------------------------------------------------------------------

EARLIER = nanos_name(DUE - timedelta(minutes=5))


@pytest.mark.parametrize(
    ("policy", "earlier_state", "started", "deleted", "reasons"),
    [
        ("Allow", "RUNNING", True, [], ["RunStarted"]),
        ("Allow", "COMPLETED", True, [], ["RunStarted"]),
        ("Forbid", "RUNNING", False, [], ["RunSkipped"]),
        ("Forbid", "SUBMITTED", False, [], ["RunSkipped"]),
        ("Forbid", "", False, [], ["RunSkipped"]),
        ("Forbid", "COMPLETED", True, [], ["RunStarted"]),
        ("Forbid", "FAILED", True, [], ["RunStarted"]),
        ("Replace", "RUNNING", True, [(EARLIER, "replace")], ["RunReplaced", "RunStarted"]),
        ("Replace", "PENDING_RERUN", True, [(EARLIER, "replace")], ["RunReplaced", "RunStarted"]),
        ("Replace", "COMPLETED", True, [], ["RunStarted"]),
        ("Replace", "FAILED", True, [], ["RunStarted"]),
    ],
)
def test_concurrency_policies(
    policy: str, earlier_state: str, started: bool, deleted: list[Any], reasons: list[str]
) -> None:
    app = due_at(DUE, concurrencyPolicy=policy)
    result = decide(app, [run(EARLIER, earlier_state)], zone=UTC, now=NOW)
    assert [c.name for c in creates(result)] == ([nanos_name(DUE)] if started else [])
    assert deletes(result) == deleted
    assert events(result) == reasons
    # A skipped run is skipped for good: the next time is the next one.
    assert result.status.next_run == datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
    assert result.status.last_run_name == (nanos_name(DUE) if started else None)
    # The replaced run is neither history nor counted as running: it is going.
    if deleted:
        assert result.status.past_successful_run_names == []


def test_replace_deletes_every_active_run_and_keeps_the_finished() -> None:
    runs = [run("pi-1", "RUNNING"), run("pi-2", "SUBMITTED"), run("pi-3", "COMPLETED")]
    result = decide(due_at(DUE, concurrencyPolicy="Replace"), runs, zone=UTC, now=NOW)
    assert deletes(result) == [("pi-1", "replace"), ("pi-2", "replace")]
    # The delete of the running one comes before the new run is created.
    kinds = [type(a).__name__ for a in result.actions if not isinstance(a, RecordEvent)]
    assert kinds == ["DeleteRun", "DeleteRun", "CreateRun"]
    assert result.status.past_successful_run_names == ["pi-3"]


def test_a_run_being_deleted_does_not_forbid_the_next() -> None:
    result = decide(
        due_at(DUE, concurrencyPolicy="Forbid"), [run(EARLIER, deleting=True)], zone=UTC, now=NOW
    )
    assert [c.name for c in creates(result)] == [nanos_name(DUE)]


def test_a_failed_condition_ends_a_run_whose_state_has_not_caught_up() -> None:
    status = SparkApplicationStatus.model_validate(
        {
            "applicationState": {"state": "RUNNING"},
            "conditions": [{"type": "Failed", "status": "True"}],
        }
    )
    ended = ObservedRun(name=EARLIER, uid="x", status=status)
    assert ended.outcome == "failed"
    result = decide(due_at(DUE, concurrencyPolicy="Forbid"), [ended], zone=UTC, now=NOW)
    assert len(creates(result)) == 1
    assert result.status.past_failed_run_names == [EARLIER]


# --- missed times ----------------------------------------------------------------------------


def test_after_missed_times_one_late_run_starts() -> None:
    # The operator was down from 09:00 to 10:00:30: twelve times were missed.
    first_missed = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    result = decide(due_at(first_missed), [], zone=UTC, now=NOW)
    (create,) = creates(result)
    assert create.name == nanos_name(first_missed)
    assert result.status.last_run == first_missed
    assert result.status.next_run == datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
    (event,) = [a for a in result.actions if isinstance(a, RecordEvent)]
    assert "late: it was due at 2026-12-01T09:00:00Z" in event.message


@pytest.mark.parametrize(
    ("now", "next_run"),
    [
        # Due at 10:00:00 every 7 s: the next time keeps the cadence, whatever was missed.
        (datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC), datetime(2026, 12, 1, 10, 0, 7, tzinfo=UTC)),
        (datetime(2026, 12, 1, 10, 0, 3, tzinfo=UTC), datetime(2026, 12, 1, 10, 0, 7, tzinfo=UTC)),
        (datetime(2026, 12, 1, 10, 0, 7, tzinfo=UTC), datetime(2026, 12, 1, 10, 0, 14, tzinfo=UTC)),
        (datetime(2026, 12, 1, 10, 1, 0, tzinfo=UTC), datetime(2026, 12, 1, 10, 1, 3, tzinfo=UTC)),
    ],
)
def test_every_keeps_its_cadence_from_the_due_time(now: datetime, next_run: datetime) -> None:
    result = decide(due_at(DUE, schedule="@every 7s"), [], zone=UTC, now=now)
    assert [c.name for c in creates(result)] == [nanos_name(DUE)]
    assert result.status.next_run == next_run
    assert result.requeue_after == next_run - now


def test_every_first_runs_one_interval_after_it_is_scheduled() -> None:
    result = decide(scheduled(schedule="@every 1m30s"), [], zone=UTC, now=NOW)
    assert result.status.next_run == NOW + timedelta(seconds=90)


# --- history limits --------------------------------------------------------------------------


def names(prefix: str, count: int, start: int) -> list[str]:
    return [f"pi-{start + i}" for i in range(count)] if prefix else []


@pytest.mark.parametrize(
    ("succeeded", "failed", "ok_limit", "bad_limit", "kept_ok", "kept_bad", "deleted"),
    [
        # Defaults (1 and 1): the newest of each kept.
        (3, 2, None, None, ["pi-12"], ["pi-21"], ["pi-11", "pi-10", "pi-20"]),
        (3, 2, 5, 5, ["pi-12", "pi-11", "pi-10"], ["pi-21", "pi-20"], []),
        (3, 2, 2, 1, ["pi-12", "pi-11"], ["pi-21"], ["pi-10", "pi-20"]),
        (3, 2, 0, 0, [], [], ["pi-12", "pi-11", "pi-10", "pi-21", "pi-20"]),
        (0, 0, 0, 0, [], [], []),
    ],
)
def test_history_limits(
    succeeded: int,
    failed: int,
    ok_limit: int | None,
    bad_limit: int | None,
    kept_ok: list[str],
    kept_bad: list[str],
    deleted: list[str],
) -> None:
    spec: dict[str, Any] = {}
    if ok_limit is not None:
        spec["successfulRunHistoryLimit"] = ok_limit
    if bad_limit is not None:
        spec["failedRunHistoryLimit"] = bad_limit
    later = datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
    runs = [run(f"pi-{10 + i}", "COMPLETED") for i in range(succeeded)]
    runs += [run(f"pi-{20 + i}", "FAILED") for i in range(failed)]
    runs.append(run("pi-99", "RUNNING"))  # an active run is never history
    result = decide(due_at(later, **spec), list(reversed(runs)), zone=UTC, now=NOW)
    assert result.status.past_successful_run_names == kept_ok
    assert result.status.past_failed_run_names == kept_bad
    assert sorted(deletes(result)) == sorted((name, "history") for name in deleted)
    assert events(result) == ["RunDeleted"] * len(deleted)


def test_history_orders_runs_by_their_due_time_not_their_names() -> None:
    older = nanos_name(datetime(2000, 1, 1, tzinfo=UTC))  # 18 digits
    newer = nanos_name(DUE)
    assert older > newer  # as text "pi-9..." sorts after "pi-1...": not what newer means
    runs = [run(older, "COMPLETED"), run(newer, "COMPLETED")]
    result = decide(due_at(DUE + timedelta(minutes=5)), runs, zone=UTC, now=NOW)
    assert result.status.past_successful_run_names == [newer]
    assert deletes(result) == [(older, "history")]


# --- time zones ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "now", "next_run"),
    [
        # 02:00 every day, read in each zone.
        (UTC, datetime(2026, 12, 1, 10, 0, tzinfo=UTC), datetime(2026, 12, 2, 2, 0, tzinfo=UTC)),
        (
            timezone(timedelta(hours=5)),
            datetime(2026, 12, 1, 10, 0, tzinfo=UTC),
            datetime(2026, 12, 1, 21, 0, tzinfo=UTC),
        ),
        (
            ZoneInfo("America/New_York"),
            datetime(2026, 12, 1, 10, 0, tzinfo=UTC),
            datetime(2026, 12, 2, 7, 0, tzinfo=UTC),
        ),
        (  # summer time: UTC-4
            ZoneInfo("America/New_York"),
            datetime(2026, 7, 1, 10, 0, tzinfo=UTC),
            datetime(2026, 7, 2, 6, 0, tzinfo=UTC),
        ),
        (  # 2026-03-08 has no 02:00 in New York: the run comes at the shifted wall time
            ZoneInfo("America/New_York"),
            datetime(2026, 3, 7, 12, 0, tzinfo=UTC),
            datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
        ),
    ],
)
def test_the_schedule_is_read_in_its_time_zone(
    zone: Any, now: datetime, next_run: datetime
) -> None:
    result = decide(scheduled(schedule="0 2 * * *"), [], zone=zone, now=now)
    assert result.status.next_run == next_run
    assert result.requeue_after == next_run - now


def test_a_new_time_zone_reschedules() -> None:
    # Scheduled for 02:00 UTC; the zone becomes UTC+5 (the same spec, read elsewhere).
    app = due_at(datetime(2026, 12, 2, 2, 0, tzinfo=UTC), schedule="0 2 * * *")
    result = decide(app, [], zone=timezone(timedelta(hours=5)), now=NOW)
    assert creates(result) == []
    assert result.status.next_run == datetime(2026, 12, 1, 21, 0, tzinfo=UTC)


def test_an_edited_schedule_reschedules() -> None:
    # nextRun was computed for "0 * * * *" (11:00); the schedule is now every 5 minutes.
    app = due_at(datetime(2026, 12, 1, 11, 0, tzinfo=UTC), schedule="*/5 * * * *")
    assert decide(app, [], zone=UTC, now=NOW).status.next_run == datetime(
        2026, 12, 1, 10, 5, tzinfo=UTC
    )
    # ... and a time that no longer fits is never run: here 10:00 under "7 * * * *".
    stale = due_at(DUE, schedule="7 * * * *")
    result = decide(stale, [], zone=UTC, now=NOW)
    assert creates(result) == []
    assert result.status.next_run == datetime(2026, 12, 1, 10, 7, tzinfo=UTC)


# --- suspend ---------------------------------------------------------------------------------


def test_a_suspended_schedule_starts_nothing_and_keeps_its_history() -> None:
    runs = [run("pi-1", "COMPLETED"), run("pi-2", "COMPLETED"), run("pi-3", "RUNNING")]
    result = decide(due_at(DUE, suspend=True), runs, zone=UTC, now=NOW)
    assert creates(result) == []
    assert deletes(result) == [("pi-1", "history")]  # the running one goes on
    assert result.status.next_run is None
    assert result.requeue_after is None
    assert result.status.schedule_state is ScheduleState.SCHEDULED


def test_a_resumed_schedule_does_not_make_up_for_the_suspended_time() -> None:
    suspended = decide(due_at(DUE, suspend=True), [], zone=UTC, now=NOW)
    wire = scheduled().to_wire()
    wire["status"] = suspended.status.to_wire()
    resumed_at = NOW + timedelta(hours=3)
    resumed = load_one(wire, kinds=KINDS)
    assert isinstance(resumed, ScheduledSparkApplication)
    result = decide(resumed, [], zone=UTC, now=resumed_at)
    assert creates(result) == []
    assert result.status.next_run == datetime(2026, 12, 1, 13, 5, tzinfo=UTC)


# --- validation ------------------------------------------------------------------------------


def test_a_schedule_that_does_not_parse_fails_validation_until_fixed() -> None:
    app = due_at(DUE)
    app.spec.schedule = "61 * * * *"  # written past the API's check (no webhook upstream)
    result = decide(app, [run("pi-1", "COMPLETED")], zone=UTC, now=NOW)
    assert result.status.schedule_state is ScheduleState.FAILED_VALIDATION
    assert result.status.reason is not None
    assert "invalid schedule '61 * * * *'" in result.status.reason
    assert "the minute field '61': 61 is out of range" in result.status.reason
    assert result.status.next_run is None and result.requeue_after is None
    assert creates(result) == [] and deletes(result) == []
    assert events(result) == ["FailedValidation"]

    wire = app.to_wire()
    wire["status"] = result.status.to_wire()
    wire["spec"]["schedule"] = "*/5 * * * *"
    fixed = load_one(wire, kinds=KINDS)
    assert isinstance(fixed, ScheduledSparkApplication)
    again = decide(fixed, [], zone=UTC, now=NOW)
    assert again.status.schedule_state is ScheduleState.SCHEDULED
    assert again.status.reason is None
    assert again.status.next_run == datetime(2026, 12, 1, 10, 5, tzinfo=UTC)


def test_an_unknown_time_zone_fails_validation_once() -> None:
    app = scheduled(timeZone="Mars/Olympus_Mons")
    reason = "invalid timeZone 'Mars/Olympus_Mons': no such zone"
    first = invalid(app.status, reason)
    assert first.status.schedule_state is ScheduleState.FAILED_VALIDATION
    assert first.status.reason == reason
    assert [a.message for a in first.actions if isinstance(a, RecordEvent)] == [reason]
    # The same verdict again says nothing new.
    assert invalid(first.status, reason).actions == ()


# --- a controller driven over time -----------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(["Allow", "Forbid", "Replace"]),
    ok_limit=st.integers(0, 3),
    bad_limit=st.integers(0, 3),
    steps=st.lists(
        st.tuples(st.integers(1, 400), st.sampled_from(["none", "succeed", "fail"])),
        min_size=1,
        max_size=40,
    ),
)
def test_a_simulated_controller_keeps_its_promises(
    policy: str, ok_limit: int, bad_limit: int, steps: list[tuple[int, str]]
) -> None:
    """Passes at random moments (the clock moves 1-400 s between them; the oldest active
    run may end): every run is named by a distinct time the schedule fires at, never
    created twice, Forbid and Replace leave at most one run active, and the history stays
    within its limits."""
    app = scheduled(
        schedule="*/2 * * * *",
        concurrencyPolicy=policy,
        successfulRunHistoryLimit=ok_limit,
        failedRunHistoryLimit=bad_limit,
    )
    cron = app.cron
    world: dict[str, ObservedRun] = {}
    ever: list[str] = []
    now = NOW
    for advance, ending in steps:
        now += timedelta(seconds=advance)
        active = sorted(n for n, r in world.items() if r.outcome == "active")
        if active and ending != "none":
            state = "COMPLETED" if ending == "succeed" else "FAILED"
            world[active[0]] = run(active[0], state)
        result = decide(app, list(world.values()), zone=UTC, now=now)
        for action in result.actions:
            if isinstance(action, DeleteRun):
                del world[action.name]
            elif isinstance(action, CreateRun):
                assert action.name not in ever, "a run was created twice"
                assert action.due <= now and cron.matches(action.due)
                assert action.name == nanos_name(action.due)
                ever.append(action.name)
                world[action.name] = run(action.name, "SUBMITTED")
        if policy != "Allow":
            assert sum(r.outcome == "active" for r in world.values()) <= 1
        assert len([r for r in world.values() if r.outcome == "succeeded"]) <= ok_limit
        assert len([r for r in world.values() if r.outcome == "failed"]) <= bad_limit
        status = result.status
        assert status.next_run is not None and status.next_run > now
        assert cron.matches(status.next_run)
        wire = app.to_wire()
        wire["status"] = status.to_wire()
        loaded = load_one(wire, kinds=KINDS)
        assert isinstance(loaded, ScheduledSparkApplication)
        app = loaded
    # Due times only move forward.
    assert ever == sorted(ever)
