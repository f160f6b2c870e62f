"""ScheduledSparkApplication: upstream's example loads, the cron schedule and time zone are
checked with clear errors, the template is checked as a SparkApplication at its own path,
the runs it creates, and when the schedule fires next.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import API_VERSION, CronError, FieldError, KindTable, ManifestError, parse_cron
from kubemill.api.loader import load_one
from kubemill.engines.spark.api.application import SPARKAPPLICATION, SparkApplication
from kubemill.engines.spark.api.scheduled import (
    SCHEDULEDSPARKAPPLICATION,
    ConcurrencyPolicy,
    ScheduledSparkApplication,
    ScheduleState,
)

EXAMPLE = Path(__file__).parents[2] / "manifests" / "spark" / "scheduled-v1beta2.yaml"
KINDS = KindTable([SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION])


def example() -> dict[str, Any]:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def load_scheduled(source: Any) -> ScheduledSparkApplication:
    job = load_one(source, kinds=KINDS)
    assert isinstance(job, ScheduledSparkApplication)
    return job


def errors_of(source: Any) -> list[FieldError]:
    with pytest.raises(ManifestError) as caught:
        load_one(source, kinds=KINDS)
    return list(caught.value.errors)


def with_spec(**spec: Any) -> dict[str, Any]:
    doc = example()
    doc["spec"].update(spec)
    return doc


def test_upstreams_example_loads_with_its_defaults() -> None:
    app = load_scheduled(example())
    assert app.api_version == API_VERSION
    assert app.spec.schedule == "@every 3m"
    assert app.spec.concurrency_policy is ConcurrencyPolicy.ALLOW
    assert (app.spec.successful_run_history_limit, app.spec.failed_run_history_limit) == (1, 1)
    assert app.spec.time_zone is None
    assert app.cron.every_seconds == 180
    # The template is defaulted as a SparkApplication is.
    assert app.spec.template.driver.cores == 1
    assert app.spec.template.executor.instances == 1
    assert app.replica_specs == {}
    assert app.run_policy.suspend is False
    assert app.status.phase == "New"


def test_every_field_round_trips() -> None:
    doc = with_spec(
        schedule="*/10 * * * *",
        timeZone="Europe/Paris",
        suspend=True,
        concurrencyPolicy="Forbid",
        successfulRunHistoryLimit=3,
        failedRunHistoryLimit=0,
    )
    app = load_scheduled(copy.deepcopy(doc))
    wire = app.to_wire()
    for key in (
        "schedule",
        "timeZone",
        "suspend",
        "concurrencyPolicy",
        "successfulRunHistoryLimit",
        "failedRunHistoryLimit",
    ):
        assert wire["spec"][key] == doc["spec"][key]
    assert load_scheduled(wire).to_wire() == wire
    assert app.run_policy.suspend is True


def test_status_as_the_spark_operator_writes_it() -> None:
    doc = example()
    doc["status"] = {
        "lastRun": "2026-12-01T10:00:00Z",
        "nextRun": "2026-12-01T10:03:00Z",
        "lastRunName": "spark-pi-scheduled-1796119200000000000",
        "pastSuccessfulRunNames": ["spark-pi-scheduled-1796119020000000000"],
        "pastFailedRunNames": [],
        "scheduleState": "Scheduled",
        "reason": "",
    }
    status = load_scheduled(doc).status
    assert status.schedule_state is ScheduleState.SCHEDULED
    assert status.phase == "Scheduled"
    assert status.next_run == datetime(2026, 12, 1, 10, 3, tzinfo=UTC)
    assert status.past_successful_run_names == ["spark-pi-scheduled-1796119020000000000"]


# --- the schedule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "values"),
    [
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
        ("5/20 * * * *", "minutes", {5, 25, 45}),
        ("0 9-17/4 * * *", "hours", {9, 13, 17}),
        ("0 0 1,15 * *", "days_of_month", {1, 15}),
        ("0 0 * JAN-MAR,dec *", "months", {1, 2, 3, 12}),
        ("0 0 * * MON-FRI", "days_of_week", {1, 2, 3, 4, 5}),
        ("0 0 ? * SUN", "days_of_week", {0}),
        ("@hourly", "minutes", {0}),
        ("@daily", "hours", {0}),
        ("@weekly", "days_of_week", {0}),
        ("@monthly", "days_of_month", {1}),
        ("@yearly", "months", {1}),
        ("  0   2 * * *  ", "hours", {2}),
    ],
)
def test_cron_fields(text: str, field: str, values: set[int]) -> None:
    assert getattr(parse_cron(text), field) == values
    assert load_scheduled(with_spec(schedule=text)).spec.schedule == text


@pytest.mark.parametrize(
    ("text", "seconds"), [("@every 3m", 180), ("@every 1h30m", 5400), ("@every 1.5s", 1.5)]
)
def test_every_interval(text: str, seconds: float) -> None:
    schedule = parse_cron(text)
    assert schedule.every_seconds == seconds
    start = datetime(2026, 12, 1, 10, 0, 7, tzinfo=UTC)
    assert schedule.next_after(start) == start + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        ("", "the schedule is empty", "every day at 02:00"),
        ("* * * *", "4 fields, not 5", "minute hour day-of-month month day-of-week"),
        ("* * * * * *", "6 fields, not 5", "@hourly"),
        ("60 * * * *", "the minute field '60': 60 is out of range", "minute runs 0-59"),
        ("* 24 * * *", "the hour field '24': 24 is out of range", "hour runs 0-23"),
        ("* * 0 * *", "day of month field '0': 0 is out of range", "runs 1-31"),
        ("* * * 13 *", "the month field '13'", "month runs 1-12"),
        ("* * * * 7", "the day of week field '7'", "day of week runs 0-6"),
        ("* * * * FUNDAY", "'FUNDAY' is not a number", "day of week runs 0-6"),
        ("*/0 * * * *", "the step must be a whole number >= 1", "minute runs 0-59"),
        ("*/x * * * *", "the step must be a whole number >= 1", "minute runs 0-59"),
        ("30-10 * * * *", "the range runs backwards", "10-30"),
        ("? * * * *", "'?' is only for the day fields", "use *"),
        ("0 0 30 2 *", "day 30 never comes in the months '2'", "never run"),
        ("@hourlyy", "unknown shortcut '@hourlyy'", "did you mean '@hourly'?"),
        ("@often", "unknown shortcut '@often'", "@every <duration>"),
        ("@every", "@every needs a duration", "30s, 5m or 1h30m"),
        ("@every soon", "@every needs a duration, got 'soon'", "Go duration"),
        ("@every 10ms", "under a second", "at least 1s apart"),
        ("TZ=UTC 0 * * * *", "a time zone inside the schedule", "spec.timeZone"),
        ("CRON_TZ=UTC 0 * * * *", "a time zone inside the schedule", "spec.timeZone"),
    ],
)
def test_bad_schedules_say_what_is_wrong(text: str, message: str, hint: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(text)
    assert message in str(caught.value)
    assert hint in caught.value.hint
    (error,) = errors_of(with_spec(schedule=text))
    assert error.path == "spec.schedule"
    assert error.message.startswith(f"{text!r} is not a schedule: ")
    assert message in error.message and hint in error.hint


def test_a_schedule_with_both_day_fields_fires_on_either() -> None:
    # Cron's rule: "the 13th, or a Friday" when both day fields are restricted.
    either = parse_cron("0 0 13 * 5")
    assert either.matches(datetime(2026, 2, 13, 0, 0))  # a Friday the 13th
    assert either.matches(datetime(2026, 3, 13, 0, 0))  # a Friday
    assert either.matches(datetime(2026, 4, 13, 0, 0))  # a Monday the 13th
    assert either.matches(datetime(2026, 4, 17, 0, 0))  # a Friday
    assert not either.matches(datetime(2026, 4, 14, 0, 0))
    assert not either.matches(datetime(2026, 4, 17, 0, 1))
    both = parse_cron("0 0 13 * *")
    assert not both.matches(datetime(2026, 4, 17, 0, 0))


@pytest.mark.parametrize(
    ("text", "after", "expected"),
    [
        ("*/15 * * * *", datetime(2026, 12, 1, 10, 7, 30), datetime(2026, 12, 1, 10, 15)),
        ("*/15 * * * *", datetime(2026, 12, 1, 10, 15), datetime(2026, 12, 1, 10, 30)),
        ("0 2 * * *", datetime(2026, 12, 1, 10, 0), datetime(2026, 12, 2, 2, 0)),
        ("@hourly", datetime(2026, 12, 31, 23, 59), datetime(2027, 1, 1, 0, 0)),
        ("0 0 * * MON", datetime(2026, 12, 1, 10, 0), datetime(2026, 12, 7, 0, 0)),
        ("0 12 31 * *", datetime(2026, 11, 1), datetime(2026, 12, 31, 12, 0)),
        ("0 0 29 2 *", datetime(2026, 3, 1), datetime(2028, 2, 29, 0, 0)),
        ("30 4 1 JAN *", datetime(2026, 12, 1), datetime(2027, 1, 1, 4, 30)),
    ],
)
def test_next_run(text: str, after: datetime, expected: datetime) -> None:
    schedule = parse_cron(text)
    assert schedule.next_after(after) == expected
    assert schedule.matches(expected)
    # Nothing in between fires.
    probe = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while probe < expected and (expected - probe) < timedelta(days=2):
        assert not schedule.matches(probe)
        probe += timedelta(minutes=1)


def test_next_run_keeps_the_time_zone() -> None:
    # Cron fields are wall-clock times where the schedule is read: 02:00 at UTC+5 is
    # 21:00 UTC the day before.
    plus_five = timezone(timedelta(hours=5))
    after = datetime(2026, 12, 1, 1, 30, tzinfo=plus_five)
    fired = parse_cron("0 2 * * *").next_after(after)
    assert fired.tzinfo is plus_five
    assert fired == datetime(2026, 11, 30, 21, 0, tzinfo=UTC)


# --- the time zone ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "zone", ["UTC", "Local", "Europe/Paris", "America/Argentina/Buenos_Aires", "Etc/GMT+5"]
)
def test_time_zone_names(zone: str) -> None:
    assert load_scheduled(with_spec(timeZone=zone)).spec.time_zone == zone


@pytest.mark.parametrize(
    "zone", ["", "Europe//Paris", "../etc/passwd", "Paris France", "/UTC", "Europe/", "+02:00"]
)
def test_time_zones_that_are_not_names(zone: str) -> None:
    (error,) = errors_of(with_spec(timeZone=zone))
    assert error.path == "spec.timeZone"
    assert f"{zone!r} is not a time zone name" in error.message
    assert "Europe/Paris" in error.hint


# --- the template and the name ---------------------------------------------------------------


def test_the_template_is_checked_at_its_path() -> None:
    doc = example()
    del doc["spec"]["template"]["mainApplicationFile"]
    doc["spec"]["template"]["driver"]["memory"] = "lots"
    doc["spec"]["template"]["sparkConf"] = {"spark.master": "local"}
    doc["spec"]["template"]["restartPolicy"]["onFailureRetries"] = 1
    doc["spec"]["template"]["mode"] = "client"
    assert sorted(e.path for e in errors_of(doc)) == [
        "spec.template.driver.memory",
        "spec.template.mainApplicationFile",
        "spec.template.mode",
        "spec.template.restartPolicy.onFailureRetries",
        "spec.template.sparkConf['spark.master']",
    ]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("schedule", None, "required field is missing"),
        ("template", None, "required field is missing"),
        ("concurrencyPolicy", "Queue", "got 'Queue'"),
        ("successfulRunHistoryLimit", -1, "must be >= 0"),
        ("failedRunHistoryLimit", -1, "must be >= 0"),
    ],
)
def test_spec_field_errors(field: str, value: Any, message: str) -> None:
    doc = example()
    if value is None:
        del doc["spec"][field]
    else:
        doc["spec"][field] = value
    errors = errors_of(doc)
    assert [e.path for e in errors] == [f"spec.{field}"]
    assert message in errors[0].message


def test_the_name_leaves_room_for_the_runs() -> None:
    doc = example()
    doc["metadata"]["name"] = "s" * 36
    load_scheduled(copy.deepcopy(doc))
    doc["metadata"]["name"] = "s" * 37
    (error,) = errors_of(doc)
    assert error.path == "metadata.name"
    assert "over the 36 allowed" in error.message
    assert "<name>-<19 digits>" in error.message
    doc["metadata"]["name"] = "9pi"
    (error,) = errors_of(doc)
    assert "must start with a letter" in error.message


# --- runs ------------------------------------------------------------------------------------


def test_a_run_is_the_template_named_by_its_time() -> None:
    doc = example()
    doc["metadata"]["uid"] = "0b1c2d3e"
    doc["metadata"]["labels"] = {"team": "data"}
    scheduled = load_scheduled(doc)
    nanos = 1796119200000000000
    run = scheduled.run(nanos)
    assert isinstance(run, SparkApplication)
    assert run.name == f"spark-pi-scheduled-{nanos}"
    assert run.namespace == "default"
    assert run.metadata.labels == {
        "team": "data",
        "sparkoperator.k8s.io/scheduled-app-name": "spark-pi-scheduled",
    }
    (owner,) = run.metadata.owner_references or []
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "ScheduledSparkApplication",
        "spark-pi-scheduled",
        "0b1c2d3e",
        True,
    )
    assert run.spec == scheduled.spec.template
    # The run is a valid SparkApplication as it stands.
    again = load_one(run.to_wire(), kinds=KINDS)
    assert again.to_wire() == run.to_wire()
    run.spec.executor.instances = 7
    assert scheduled.spec.template.executor.instances == 1
