"""ScheduledSparkApplication on the local substrate: a detached loop asks the core
(:func:`kubemill.core.decide`) and submits its runs as local SparkApplications.

The template is a real SparkApplication: each run is pyspark's ``spark-submit`` (a JVM) of
a tiny Python application, which prints, or waits for a ``gate`` file when the test needs a
run that stays active. ``@every 1s`` makes runs due faster than they finish.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.engines.spark.api.scheduled import SCHEDULED_APP_LABEL, ScheduledSparkApplication
from kubemill.engines.spark.schedule import unix_nanos
from kubemill.kinds import load_one
from kubemill.substrates.base import JobNotFound, SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend, procinfo
from kubemill.substrates.local.launch import NotRunnableLocally
from kubemill.substrates.local.schedules import owned_runs
from support.waiting import eventually

APP = """
import os, sys, time
print("run", flush=True)
while sys.argv[1:] == ["gated"] and not os.path.exists("gate"):
    time.sleep(0.05)
"""


def schedule(name: str, *, gated: bool = False, **spec: Any) -> ScheduledSparkApplication:
    doc = {
        "apiVersion": "kubemill.dev/v1",
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": name},
        "spec": {
            "schedule": "@every 1s",
            "concurrencyPolicy": "Forbid",
            **spec,
            "template": {
                "type": "Python",
                "mode": "cluster",
                "image": "spark:4.0.0",
                "sparkVersion": "4.0.0",
                "mainApplicationFile": "app.py",
                "arguments": ["gated"] if gated else [],
                "restartPolicy": {"type": "Never"},
                "driver": {"cores": 1, "memory": "512m"},
                "executor": {"cores": 1, "instances": 1, "memory": "512m"},
            },
        },
    }
    job = load_one(doc)
    assert isinstance(job, ScheduledSparkApplication)
    return job


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    return folder


@pytest.fixture
def submitted(backend: LocalBackend, base: Path) -> Iterator[list[str]]:
    """Names of the schedules a test submitted; deleted (with their runs) at its end."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(JobNotFound):
            backend.delete(name)


def submit(backend: LocalBackend, base: Path, names: list[str], job: Any) -> None:
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(base)))
    names.append(job.name)


def current(backend: LocalBackend, name: str) -> ScheduledSparkApplication:
    job = backend.get(name).job
    assert isinstance(job, ScheduledSparkApplication)
    return job


def reasons(backend: LocalBackend, name: str) -> list[str]:
    return [e.reason for e in backend.events(name)]


def test_runs_are_named_by_due_time_and_old_ones_deleted_by_the_history_limit(
    backend: LocalBackend, base: Path, submitted: list[str]
) -> None:
    submit(backend, base, submitted, schedule("tick", successfulRunHistoryLimit=1))
    rec = backend.store.job("default", "tick")

    def trimmed() -> bool:
        status = current(backend, "tick").status
        return "RunDeleted" in reasons(backend, "tick") and bool(status.past_successful_run_names)

    eventually(trimmed, timeout=300, what="a run deleted beyond the history limit")
    job = current(backend, "tick")
    assert job.status.last_run is not None
    assert job.status.last_run_name == f"tick-{unix_nanos(job.status.last_run)}"
    runs = owned_runs(backend, rec)
    assert runs
    for run in runs:
        view = backend.get(run.name)
        assert view.kind == "SparkApplication"
        assert view.job.metadata.labels[SCHEDULED_APP_LABEL] == "tick"
        prefix, _, nanos = run.name.rpartition("-")
        assert prefix == "tick" and nanos.isdigit()
    deleted = [
        e.message.split()[2].rstrip(":") for e in backend.events("tick") if e.reason == "RunDeleted"
    ]
    for name in deleted:
        with pytest.raises(JobNotFound):
            backend.get(name)
    (kept,) = current(backend, "tick").status.past_successful_run_names or []
    assert kept not in deleted


def test_forbid_skips_while_a_run_is_active_and_delete_leaves_no_process(
    backend: LocalBackend, base: Path, submitted: list[str]
) -> None:
    submit(backend, base, submitted, schedule("gated", gated=True))
    rec = backend.store.job("default", "gated")
    eventually(
        lambda: reasons(backend, "gated").count("RunSkipped") >= 2,
        timeout=300,
        what="due runs skipped",
    )
    # The first run is still waiting for its gate: no other run was started.
    (first,) = owned_runs(backend, rec)
    assert first.outcome == "active"
    (base / "gate").write_text("")
    eventually(lambda: len(owned_runs(backend, rec)) >= 2, timeout=300, what="the next run")

    rec = backend.store.job("default", "gated")
    loop = rec.supervisor
    assert loop is not None and procinfo.is_alive(loop)
    run_supervisors = [
        r.supervisor for r in backend.store.jobs() if r.name.startswith("gated-") and r.supervisor
    ]
    backend.delete("gated")
    submitted.clear()
    assert not procinfo.is_alive(loop)
    assert all(not procinfo.is_alive(p) for p in run_supervisors if p is not None)
    assert backend.store.jobs() == []
    assert procinfo.marked(f"{rec.uid}/") == set()


def test_suspend_and_resume_and_a_killed_loop_is_reported(
    backend: LocalBackend, base: Path, submitted: list[str]
) -> None:
    # Suspended from the start: no run is due, so the test needs no Spark.
    submit(backend, base, submitted, schedule("idle", suspend=True))
    eventually(
        lambda: current(backend, "idle").status.schedule_state is not None,
        what="the first pass",
    )
    assert current(backend, "idle").status.next_run is None
    rec = backend.store.job("default", "idle")
    assert rec.supervisor is not None
    procinfo.kill_process(rec.supervisor, signal.SIGKILL)
    eventually(lambda: not procinfo.is_alive(rec.supervisor), what="the loop killed")
    eventually(lambda: "SupervisorLost" in reasons(backend, "idle"), what="the loss reported")

    # Resume starts a new loop, which schedules the next run again.
    backend.resume("idle")
    assert current(backend, "idle").spec.suspend is False
    eventually(
        lambda: current(backend, "idle").status.next_run is not None,
        what="a next run after resume",
    )
    new = backend.store.job("default", "idle").supervisor
    assert new is not None and new != rec.supervisor and procinfo.is_alive(new)
    backend.suspend("idle")
    eventually(lambda: current(backend, "idle").status.next_run is None, what="suspended")


def test_a_template_this_machine_cannot_run_is_refused_at_submit(
    backend: LocalBackend, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotRunnableLocally) as caught:
        backend.submit(schedule("missing"), SubmitOptions(detach=True, base_dir=str(empty)))
    assert [e.path for e in caught.value.errors] == ["spec.template.mainApplicationFile"]
    assert backend.store.jobs() == []


def test_a_schedule_cannot_be_interrupted_and_says_what_to_do(
    backend: LocalBackend, base: Path, submitted: list[str]
) -> None:
    submit(backend, base, submitted, schedule("paused", suspend=True))
    with pytest.raises(SubstrateError, match="kubemill suspend paused"):
        backend.interrupt("paused")
    rec = backend.store.job("default", "paused")
    assert rec.supervisor is not None and procinfo.is_alive(rec.supervisor)
