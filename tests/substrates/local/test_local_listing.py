"""``kubemill get`` lists from one summary row per job (issue 7's benchmark): the schema
migration keeps a database of the old schema working, the listing tells the same truth
as a full read (it gives way when a job needs healing or its TTL has passed), and the
rows the store reads as they are draw the very table of the jobs the full read sees.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from local_support import SLEEPER, pytorch_job

from kubemill.api import Job, JobStatus
from kubemill.cli.table import jobs_text
from kubemill.engines.spark.api.application import SparkApplicationStatus
from kubemill.kinds import load_one
from kubemill.sdk import summary
from kubemill.sdk.summary import row_of
from kubemill.substrates.base import SubmitOptions
from kubemill.substrates.local import LocalBackend, procinfo
from kubemill.substrates.local.records import phase_of
from kubemill.substrates.local.store import DB_NAME, SCHEMA_VERSION, Store
from kubemill.substrates.rows import JobSummary
from support.waiting import eventually

KUBEMILL = Path(sys.executable).parent / "kubemill"

# The schema of the first kubemill release, as it created its databases (schema 1).
SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS jobs (
    uid TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    manifest TEXT NOT NULL,
    status TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0,
    base_dir TEXT NOT NULL,
    job_dir TEXT NOT NULL,
    environments TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    supervisor_pid INTEGER,
    supervisor_start INTEGER,
    supervisor_boot TEXT,
    supervisor_mode TEXT NOT NULL DEFAULT 'foreground',
    supervisor_state TEXT NOT NULL DEFAULT 'starting',
    request TEXT,
    UNIQUE (namespace, name)
);
CREATE TABLE IF NOT EXISTS replicas (
    job_uid TEXT NOT NULL REFERENCES jobs(uid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    replica_type TEXT NOT NULL,
    idx INTEGER NOT NULL,
    position INTEGER NOT NULL,
    phase TEXT NOT NULL DEFAULT 'Pending',
    pid INTEGER,
    pgid INTEGER,
    proc_start INTEGER,
    proc_boot TEXT,
    exit_code INTEGER,
    restart_count INTEGER NOT NULL DEFAULT 0,
    retired_restarts INTEGER NOT NULL DEFAULT 0,
    created REAL,
    started REAL,
    finished REAL,
    reason TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL DEFAULT '',
    log_path TEXT NOT NULL,
    PRIMARY KEY (job_uid, name)
);
CREATE TABLE IF NOT EXISTS ports (
    job_uid TEXT NOT NULL REFERENCES jobs(uid) ON DELETE CASCADE,
    replica TEXT NOT NULL,
    container_port INTEGER NOT NULL,
    port INTEGER NOT NULL,
    PRIMARY KEY (job_uid, replica, container_port)
);
CREATE INDEX IF NOT EXISTS ports_by_port ON ports (port);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_uid TEXT NOT NULL REFERENCES jobs(uid) ON DELETE CASCADE,
    first_time REAL NOT NULL,
    time REAL NOT NULL,
    type TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_uid, id);
"""
V1_JOB_COLUMNS = (
    "uid, namespace, name, kind, manifest, status, finished, base_dir, job_dir,"
    " environments, created, supervisor_pid, supervisor_start, supervisor_boot,"
    " supervisor_mode, supervisor_state, request"
)


def finished_jobs(backend: LocalBackend, tmp_path: Path) -> None:
    """One job that succeeded, one that failed with a restart, one in another namespace."""
    base = SubmitOptions(detach=False, base_dir=str(tmp_path))
    backend.submit(pytorch_job("good", master="pass", worker="pass", workers=2), base)
    backend.submit(
        pytorch_job(
            "bad",
            master="raise SystemExit(3)",
            restart_policy="OnFailure",
            run_policy={"backoffLimit": 1},
        ),
        base,
    )
    other = SubmitOptions(detach=False, base_dir=str(tmp_path), namespace="team-a")
    backend.submit(pytorch_job("other", master="pass"), other)
    for name, namespace in (("good", None), ("bad", None), ("other", "team-a")):
        assert backend.wait(name, namespace, timeout=60).finished


def read_summaries(
    state_dir: Path, namespace: str | None = None, *, now: float | None = None
) -> list[JobSummary] | None:
    """The rows ``kubemill get`` lists from the store as it is (None: the core first)."""
    store = Store(state_dir)
    try:
        return store.summaries(namespace, now=now)
    finally:
        store.close()


def rich_table(backend: LocalBackend, namespace: str | None = None, *, now: float) -> str:
    """The table of the jobs as the full read sees them (the rows of the job views, as on
    every other substrate)."""
    rows = [row_of(view) for view in backend.list(namespace)]
    return jobs_text(rows, one_namespace=bool(namespace), now=now)


@pytest.fixture
def fixed_age() -> float:
    """Both tables measure ages from the same moment."""
    return datetime.now().timestamp() + 5


def test_the_stored_rows_draw_the_table_of_the_full_read(
    backend: LocalBackend, tmp_path: Path, fixed_age: float
) -> None:
    finished_jobs(backend, tmp_path)
    summaries = read_summaries(backend.state_dir)
    assert summaries is not None
    assert jobs_text(summaries, now=fixed_age) == rich_table(backend, now=fixed_age)
    only = read_summaries(backend.state_dir, "default")
    assert only is not None and [s.name for s in only] == ["good", "bad"]
    assert jobs_text(only, one_namespace=True, now=fixed_age) == rich_table(
        backend, "default", now=fixed_age
    )
    by_name = {s.name: s for s in summaries}
    assert (by_name["good"].phase, by_name["good"].ready, by_name["good"].total) == (
        "Succeeded",
        3,
        3,
    )
    bad = backend.get("bad")
    assert summary.restarts(bad) > 0
    assert (by_name["bad"].phase, by_name["bad"].restarts) == ("Failed", summary.restarts(bad))


def test_a_database_of_the_old_schema_is_migrated_and_lists_the_same(
    backend: LocalBackend, tmp_path: Path, fixed_age: float
) -> None:
    finished_jobs(backend, tmp_path)
    expected = rich_table(backend, now=fixed_age)
    old_dir = tmp_path / "old-state"
    old_dir.mkdir()
    old = sqlite3.connect(old_dir / DB_NAME)
    old.executescript(SCHEMA_1)
    old.execute("PRAGMA user_version = 1")
    old.execute("ATTACH DATABASE ? AS new", (str(backend.store.path),))
    for table, columns in (
        ("jobs", V1_JOB_COLUMNS),
        ("replicas", "*"),
        ("ports", "*"),
        ("events", "*"),
    ):
        old.execute(f"INSERT INTO main.{table} SELECT {columns} FROM new.{table}")
    old.commit()
    old.close()
    # The store migrates it as it opens it, for every reader.
    migrated = LocalBackend(old_dir)
    assert migrated.store.path.exists()
    with sqlite3.connect(old_dir / DB_NAME) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        rows = conn.execute("SELECT name, wanted, ttl FROM jobs ORDER BY name").fetchall()
    assert rows == [
        ("bad", 1, None),
        ("good", 3, None),
        ("other", 1, None),
    ]
    summaries = read_summaries(old_dir)
    assert summaries is not None
    assert jobs_text(summaries, now=fixed_age) == expected
    # Everything else still reads the migrated records.
    assert migrated.get("bad").phase == "Failed"
    assert [v.name for v in migrated.list()] == ["good", "bad", "other"]


def test_a_job_whose_supervisor_died_is_healed_before_it_is_listed(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.submit(pytorch_job("lost", master=SLEEPER), SubmitOptions(base_dir=str(tmp_path)))
    eventually(lambda: backend.get("lost").phase == "Running", what="the job running")
    listed = read_summaries(backend.state_dir)
    assert listed is not None and [s.phase for s in listed] == ["Running"]
    rec = backend.store.job("default", "lost")
    assert rec.supervisor is not None
    procinfo.kill_process(rec.supervisor)
    assert procinfo.wait_gone(rec.supervisor, timeout=10)
    assert read_summaries(backend.state_dir) is None
    # The console script's `get` gives way to the full read, which tells the truth.
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(backend.state_dir)}
    env.pop("KUBEMILL_SUBSTRATE", None)
    done = subprocess.run(
        [str(KUBEMILL), "get"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "lost   PyTorchJob   Failed" in done.stdout
    healed = read_summaries(backend.state_dir)
    assert healed is not None and [s.phase for s in healed] == ["Failed"]


def test_a_finished_job_past_its_ttl_is_deleted_not_listed(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("short", master="pass", run_policy={"ttlSecondsAfterFinished": 1})
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    done = backend.wait("short", timeout=60)
    completed = done.status.completion_time
    assert completed is not None
    later = completed.timestamp() + 2
    assert read_summaries(backend.state_dir, now=completed.timestamp()) is not None
    assert read_summaries(backend.state_dir, now=later) is None


@pytest.mark.parametrize(
    "conditions",
    [
        [],
        [("Created", "True")],
        [("Created", "True"), ("Running", "True")],
        [("Created", "True"), ("Running", "False"), ("Restarting", "True")],
        [("Created", "True"), ("Running", "True"), ("Succeeded", "True")],
        [("Created", "True"), ("Succeeded", "True"), ("Failed", "True")],
        [("Suspended", "True"), ("Running", "False")],
    ],
)
def test_the_listed_phase_is_the_status_phase(conditions: list[tuple[str, str]]) -> None:
    wire = {
        "conditions": [
            {"type": t, "status": s, "reason": "R", "message": "m"} for t, s in conditions
        ]
    }
    assert phase_of(wire) == JobStatus.model_validate(wire).phase


@pytest.mark.parametrize(
    ("state", "conditions", "listed"),
    [
        ("", [], "NEW"),
        ("SUBMITTED", [("Created", "True")], "SUBMITTED"),
        ("RUNNING", [("Created", "True"), ("Running", "True")], "RUNNING"),
        ("COMPLETED", [("Created", "True"), ("Succeeded", "True")], "COMPLETED"),
        ("PENDING_RERUN", [("Created", "True"), ("Restarting", "True")], "PENDING_RERUN"),
        # The conditions say it ended, the state has not caught up: the conditions win.
        ("RUNNING", [("Created", "True"), ("Failed", "True")], "Failed"),
    ],
)
def test_a_spark_application_is_listed_by_its_state(
    state: str, conditions: list[tuple[str, str]], listed: str
) -> None:
    wire = {
        "applicationState": {"state": state},
        "conditions": [
            {"type": t, "status": s, "reason": "R", "message": "m"} for t, s in conditions
        ],
    }
    assert phase_of(wire) == listed
    assert SparkApplicationStatus.model_validate(wire).phase == listed


def test_a_bad_namespace_is_refused_by_the_console_script(tmp_path: Path) -> None:
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(tmp_path / "state")}
    env.pop("KUBEMILL_SUBSTRATE", None)
    Store(tmp_path / "state").close()
    done = subprocess.run(
        [str(KUBEMILL), "get", "-n", "../.."], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "namespace '../..' is not a valid name" in done.stderr


def test_the_store_records_what_is_listed(backend: LocalBackend, tmp_path: Path) -> None:
    job = pytorch_job("kept", master="pass", run_policy={"ttlSecondsAfterFinished": 3600})
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    assert backend.wait("kept", timeout=60).phase == "Succeeded"
    with sqlite3.connect(backend.store.path) as conn:
        row = conn.execute("SELECT wanted, ttl, status FROM jobs").fetchone()
    assert row[:2] == (1, 3600.0)
    assert phase_of(json.loads(row[2])) == "Succeeded"


def test_the_listed_phase_follows_the_status_whoever_wrote_it(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # A writer that knows nothing of the listing (e.g. a supervisor of an older kubemill,
    # still running across an upgrade) changes only the status.
    backend.submit(pytorch_job("seen", master="pass"), SubmitOptions(detach=False))
    assert backend.wait("seen", timeout=60).phase == "Succeeded"
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "R", "message": "m"}]}
    with sqlite3.connect(backend.store.path) as conn:
        conn.execute("UPDATE jobs SET status = ?", (json.dumps(failed),))
    listed = read_summaries(backend.state_dir)
    assert listed is not None and [s.phase for s in listed] == ["Failed"]


def test_a_listing_rebuilds_only_the_views_of_jobs_whose_records_changed(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # A long-lived reader (the dashboard) lists every half second: a job whose records did
    # not change keeps its view; one whose status another process wrote gets a new one,
    # and a deleted job is no longer listed.
    finished_jobs(backend, tmp_path)
    first = {view.name: view for view in backend.list()}
    again = {view.name: view for view in backend.list()}
    assert all(again[name] is first[name] for name in first)
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "R", "message": "m"}]}
    with sqlite3.connect(backend.store.path) as conn:
        conn.execute("UPDATE jobs SET status = ? WHERE name = 'good'", (json.dumps(failed),))
    changed = {view.name: view for view in backend.list()}
    assert changed["good"] is not first["good"] and changed["good"].phase == "Failed"
    assert changed["bad"] is first["bad"] and changed["other"] is first["other"]
    backend.delete("other", "team-a")
    assert sorted(view.name for view in backend.list()) == ["bad", "good"]
    assert sorted(view.name for view in backend.list("team-a")) == []


def test_an_endpoint_column_appears_in_both_tables_only_when_a_cluster_serves() -> None:
    from kubemill.kinds import load_one
    from kubemill.substrates.base import JobView

    created = datetime(2026, 1, 1, 12, 0, 0).astimezone()
    now = created.timestamp() + 30

    def mars(name: str, endpoint: str | None) -> JobView:
        job = load_one(
            {
                "apiVersion": "kubemill.dev/v1",
                "kind": "MarsCluster",
                "metadata": {"name": name},
                "spec": {"workerCpu": 1, "workerMem": "1g", "workerNum": 2},
                "status": {"endpoint": endpoint} if endpoint else {},
            }
        )
        return JobView(job=job, status=job.status, created=created)

    def summary(name: str, endpoint: str) -> JobSummary:
        return JobSummary("default", name, "MarsCluster", "Pending", 0, 3, 0, now - 30, endpoint)

    def rich(listed: list[JobView]) -> str:
        return jobs_text([row_of(view) for view in listed], now=now)

    serving = [mars("a", None), mars("b", "http://127.0.0.1:4242")]
    text = jobs_text([summary("a", ""), summary("b", "http://127.0.0.1:4242")], now=now)
    assert text == rich(serving)
    assert text.splitlines()[0].split()[-1] == "ENDPOINT"
    quiet = jobs_text([summary("a", "")], now=now)
    assert quiet == rich([mars("a", None)])
    assert "ENDPOINT" not in quiet


def yearly_schedule(name: str) -> Job:
    """A schedule whose next run is months away: its loop runs, and starts nothing."""
    return load_one(
        {
            "apiVersion": "kubemill.dev/v1",
            "kind": "ScheduledSparkApplication",
            "metadata": {"name": name},
            "spec": {
                "schedule": "0 0 1 1 *",
                "template": {
                    "type": "Python",
                    "mode": "cluster",
                    "image": "spark:4.0.0",
                    "sparkVersion": "4.0.0",
                    "mainApplicationFile": "app.py",
                },
            },
        }
    )


def listed_by_the_console_script(backend: LocalBackend) -> dict[str, list[str]]:
    """``kubemill get`` as a user runs it: its rows, by name."""
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(backend.state_dir)}
    env.pop("KUBEMILL_SUBSTRATE", None)
    done = subprocess.run(
        [str(KUBEMILL), "get"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    # Columns are separated by 3 spaces or more; a LAST RUN cell has single spaces.
    split = [re.split(r"\s{3,}", row.strip()) for row in rows]
    assert re.split(r"\s{3,}", header.strip())[-1] == "LAST RUN"
    return {cells[0]: cells[1:] for cells in split}


def test_a_schedule_is_listed_with_its_state_and_last_run(
    backend: LocalBackend, tmp_path: Path, fixed_age: float
) -> None:
    """Beside jobs, a schedule shows whether runs start (Scheduled / Suspended) and its
    last run, never replicas it cannot have; the stored rows draw the full read's table."""
    backend.submit(pytorch_job("good", master="pass"), SubmitOptions(base_dir=str(tmp_path)))
    assert backend.wait("good", timeout=60).finished
    (tmp_path / "app.py").write_text("print('never run here')\n")
    backend.submit(yearly_schedule("yearly"), SubmitOptions(detach=True, base_dir=str(tmp_path)))
    try:
        eventually(lambda: backend.get("yearly").phase == "Scheduled", what="the first pass")
        rows = listed_by_the_console_script(backend)
        assert rows["yearly"][:4] == ["ScheduledSparkApplication", "Scheduled", "-", "-"]
        assert rows["yearly"][-1] == "-"  # no run yet
        assert rows["good"][:2] == ["PyTorchJob", "Succeeded"] and rows["good"][-1] == "-"
        summaries = read_summaries(backend.state_dir)
        assert summaries is not None
        assert jobs_text(summaries, now=fixed_age) == rich_table(backend, now=fixed_age)

        backend.suspend("yearly")
        # Suspended: the core clears nextRun; once it has, the loop writes nothing more.
        eventually(lambda: backend.get("yearly").job.status.next_run is None, what="suspended")
        rec = backend.store.job("default", "yearly")
        assert rec is not None
        last_run = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        # As the loop records a run it started (none starts here: the next is months away).
        status = {**rec.status, "lastRun": last_run.isoformat(), "lastRunName": "yearly-1"}
        backend.store.set_status(rec.uid, status, finished=False)
        rows = listed_by_the_console_script(backend)
        assert rows["yearly"][1] == "Suspended"
        assert rows["yearly"][-1] == "yearly-1 (5m ago)"
        summaries = read_summaries(backend.state_dir)
        assert summaries is not None
        assert jobs_text(summaries, now=fixed_age) == rich_table(backend, now=fixed_age)

        backend.resume("yearly")
        eventually(lambda: backend.get("yearly").job.status.next_run is not None, what="resumed")
        assert listed_by_the_console_script(backend)["yearly"][1] == "Scheduled"
    finally:
        backend.delete("yearly")


def test_the_coloured_table_is_the_plain_one_with_its_phases_coloured() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0).timestamp()
    rows = [
        JobSummary("default", "a", "PyTorchJob", "Succeeded", 3, 3, 0, now - 30),
        JobSummary("team-a", "long-name", "TFJob", "Failed", 0, 12, 4, now - 7200),
        JobSummary(
            "default",
            "sched",
            "ScheduledThing",
            "Scheduled",
            0,
            0,
            0,
            now,
            "",
            controller=True,
            last_run_name="",
        ),
    ]
    plain = jobs_text(rows, now=now)
    coloured = jobs_text(rows, colour=True, now=now)
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    assert "\x1b[32mSucceeded\x1b[0m" in coloured and "\x1b[1;31mFailed\x1b[0m" in coloured
    header, *lines = plain.splitlines()
    assert header.split() == [
        "NAMESPACE",
        "NAME",
        "KIND",
        "STATE",
        "REPLICAS",
        "RESTARTS",
        "AGE",
        "LAST",
        "RUN",
    ]
    # Columns start where the header's do, three spaces after the widest cell before them.
    starts = [header.index(h) for h in ("NAME", "KIND", "STATE", "REPLICAS", "AGE")]
    for line in lines:
        assert all(line[i - 3 : i] == "   " and line[i] != " " for i in starts[1:]), line
    assert lines[2].split()[4:7] == ["-", "-", "0s"]


def test_the_listing_loads_no_job_model_and_no_typer_rich_or_pydantic(tmp_path: Path) -> None:
    """The one path of `kubemill get` stays cheap to start: the store's rows, the text table."""
    code = (
        "import sys\n"
        "from kubemill.cli.listing import plain_get\n"
        "assert plain_get(['get']) == 0\n"
        "heavy = ('pydantic', 'typer', 'rich', 'yaml', 'kubemill.api', 'kubemill.kinds',"
        " 'kubemill.sdk', 'kubemill.core')\n"
        "print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.')"
        " for h in heavy)))\n"
    )
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(tmp_path / "state")}
    env.pop("KUBEMILL_SUBSTRATE", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    listed, loaded = done.stdout.splitlines()
    assert listed == "No jobs found."
    assert loaded == "[]"
