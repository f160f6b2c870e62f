"""`kubemill render` of a ScheduledSparkApplication: the run the operator creates when the
schedule is next due (named by that time, decided by the same core function), then that
SparkApplication's own objects; nothing while suspended; an unknown time zone says so.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.engines.spark.api.scheduled import ScheduledSparkApplication
from kubemill.engines.spark.schedule import unix_nanos
from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.build import UnsupportedPlanError
from kubemill.substrates.kubernetes.render import render_job
from support.manifest_checks import ROOT, k8s_errors

EXAMPLE = ROOT / "examples" / "scheduled-spark-pi.yaml"
NOW = datetime(2026, 12, 1, 10, 3, 20, tzinfo=UTC)


def example(**spec: Any) -> ScheduledSparkApplication:
    doc = yaml.safe_load(Path(EXAMPLE).read_text(encoding="utf-8"))
    doc["spec"].update(spec)
    job = load_one(copy.deepcopy(doc))
    assert isinstance(job, ScheduledSparkApplication)
    return job


def test_the_next_run_and_what_it_creates() -> None:
    schedule = example()
    objects = render_job(schedule, now=NOW)
    due = datetime(2026, 12, 1, 10, 10, tzinfo=UTC)  # "*/10 * * * *" in UTC
    run_name = f"scheduled-spark-pi-{unix_nanos(due)}"
    run = objects[0]
    assert (run["kind"], run["metadata"]["name"]) == ("SparkApplication", run_name)
    assert run["metadata"]["labels"] == {"sparkoperator.k8s.io/scheduled-app-name": schedule.name}
    assert "status" not in run
    assert run["spec"]["executor"]["instances"] == 2
    # Then the run's own objects, exactly as a SparkApplication of that name renders.
    rest = objects[1:]
    assert rest == render_job(load_one(run), now=NOW)
    kinds = {o["kind"] for o in rest}
    assert {"ConfigMap", "Service", "Pod"} <= kinds
    driver = next(o for o in rest if o["kind"] == "Pod")
    assert driver["metadata"]["name"] == f"{run_name}-driver-0"
    assert [e for o in rest for e in k8s_errors(o)] == []


def test_the_time_zone_moves_the_run() -> None:
    # "0 2 * * *" in Asia/Kolkata (UTC+05:30) is 20:30 UTC the day before.
    objects = render_job(example(schedule="0 2 * * *", timeZone="Asia/Kolkata"), now=NOW)
    due = datetime(2026, 12, 1, 20, 30, tzinfo=UTC)
    assert objects[0]["metadata"]["name"] == f"scheduled-spark-pi-{unix_nanos(due)}"


def test_a_suspended_schedule_creates_nothing() -> None:
    assert render_job(example(suspend=True), now=NOW) == []


def test_an_unknown_time_zone_cannot_be_rendered() -> None:
    with pytest.raises(UnsupportedPlanError, match="invalid timeZone 'Mars/Olympus_Mons'"):
        render_job(example(timeZone="Mars/Olympus_Mons"), now=NOW)
