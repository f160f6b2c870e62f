"""Broken state, bad names and oversized jobs on the local substrate: clear errors.

A damaged or unwritable ``kubemill.db`` is a :class:`BrokenState` naming the file and what
to do; ``check_state``/``repair_state`` (``kubemill doctor``) find and replace a damaged
database and keep the jobs' logs; a namespace such as ``../..`` is refused by every
method; no job directory is written outside the state directory; the config caps the
replicas of one job.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from local_support import SLEEPER, log_text, pytorch_job

from kubemill.substrates.base import JobNotFound, SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend
from kubemill.substrates.local.images import DEFAULT_MAX_REPLICAS_PER_JOB, ImageConfig
from kubemill.substrates.local.state_check import check_state, repair_state
from kubemill.substrates.local.store import (
    BUSY_TIMEOUT_MS,
    DB_NAME,
    BrokenState,
    Store,
    state_error,
)
from support.waiting import eventually


def finished_job(backend: LocalBackend, name: str, text: str) -> Path:
    """Run a job that prints ``text``; the path of its log."""
    backend.submit(pytorch_job(name, master=f"print({text!r})"), SubmitOptions(detach=False))
    assert backend.wait(name, timeout=60).finished
    assert log_text(backend, name) == text
    return Path(backend.store.replicas(backend.store.job("default", name).uid)[0].log_path)


def test_a_database_that_is_not_one_is_a_clear_error(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / DB_NAME).write_bytes(bytes(range(256)) * 16)
    with pytest.raises(BrokenState) as exc:
        LocalBackend(state)
    message = str(exc.value)
    assert str(state / DB_NAME) in message
    assert "is damaged (file is not a database)" in message
    assert "kubemill doctor --repair" in message


def test_an_unopenable_database_says_to_make_the_directory_writable(tmp_path: Path) -> None:
    # Tests may run as root, who writes anywhere: a link into a missing directory is a
    # database file SQLite cannot create, as in a read-only state directory.
    state = tmp_path / "state"
    state.mkdir()
    (state / DB_NAME).symlink_to(tmp_path / "missing" / "kubemill.db")
    with pytest.raises(BrokenState) as exc:
        Store(state)
    message = str(exc.value)
    assert f"cannot open the state database {state / DB_NAME} for writing" in message
    assert "unable to open database file" in message
    assert "KUBEMILL_STATE_DIR" in message


def test_a_read_only_database_error_names_the_file_and_the_fix(tmp_path: Path) -> None:
    error = state_error(
        sqlite3.OperationalError("attempt to write a readonly database"), tmp_path / DB_NAME
    )
    assert str(error).startswith(f"cannot open the state database {tmp_path / DB_NAME}")
    assert f"make {tmp_path} writable" in str(error)


def test_a_database_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / DB_NAME).mkdir()
    with pytest.raises(BrokenState, match="is not a file"):
        Store(tmp_path)
    assert check_state(tmp_path).problems == ["it is not a file"]


def test_the_database_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    store = Store(tmp_path)
    conn = store._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS


def test_check_finds_damage_and_repair_starts_afresh_keeping_the_logs(
    backend: LocalBackend,
) -> None:
    state = backend.state_dir
    log = finished_job(backend, "kept", "still here")
    assert check_state(state).healthy
    db = state / DB_NAME
    # Everything into the main file first, so the damage below is all there is.
    backend.store._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    backend.store.close()
    # Overwrite every page after the first (the schema's own page stays readable).
    size = db.stat().st_size
    with db.open("r+b") as damaged:
        damaged.seek(4096)
        damaged.write(b"\xa5" * (size - 4096))
    found = check_state(state)
    assert not found.healthy
    assert found.exists and found.path == db
    with pytest.raises(BrokenState, match="kubemill doctor"):
        LocalBackend(state).list()

    aside = repair_state(state)
    assert aside.parent == state and aside.name.startswith(f"{DB_NAME}.broken-")
    assert aside.read_bytes()[4096:4100] == b"\xa5" * 4
    assert check_state(state).healthy
    fresh = LocalBackend(state)
    assert fresh.list() == []
    assert log.read_text() == "still here\n"
    # The fixture's cleanup must not find the forgotten job in the fresh database.
    backend.store = fresh.store


def test_check_of_a_missing_database_creates_nothing(tmp_path: Path) -> None:
    found = check_state(tmp_path / "nowhere")
    assert found.healthy and not found.exists
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("namespace", ["../..", "..", "a/b", "UPPER"])
def test_a_bad_namespace_is_refused_by_every_method(backend: LocalBackend, namespace: str) -> None:
    calls = {
        "get": lambda: backend.get("job", namespace),
        "list": lambda: backend.list(namespace),
        "wait": lambda: backend.wait("job", namespace, 1.0),
        "logs": lambda: backend.logs("job", namespace),
        "events": lambda: backend.events("job", namespace),
        "delete": lambda: backend.delete("job", namespace),
        "interrupt": lambda: backend.interrupt("job", namespace),
        "suspend": lambda: backend.suspend("job", namespace),
        "resume": lambda: backend.resume("job", namespace),
        "submit": lambda: backend.submit(
            pytorch_job("job", master="pass"), SubmitOptions(namespace=namespace)
        ),
    }
    for verb, call in calls.items():
        with pytest.raises(SubstrateError, match="is not a valid name") as exc:
            call()
        assert repr(namespace) in str(exc.value), verb


def test_a_job_name_changed_after_validation_writes_nothing_outside(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("fine", master="pass")
    job.metadata.name = "../../../escaped"  # assignment is not validated
    with pytest.raises(SubstrateError, match="outside the state directory"):
        backend.submit(job, SubmitOptions(detach=False))
    assert backend.list() == []
    assert not list(tmp_path.rglob("escaped*"))


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_the_config_caps_the_replicas_of_one_job(tmp_path: Path) -> None:
    config = write_config(tmp_path, "maxReplicasPerJob: 2\n")
    backend = LocalBackend(tmp_path / "state", config_path=config)
    job = pytorch_job("wide", master="pass", worker="pass", workers=2)
    with pytest.raises(SubstrateError) as exc:
        backend.submit(job, SubmitOptions(detach=False))
    message = str(exc.value)
    assert "asks for 3 replicas, over the local cap of 2 per job" in message
    assert f"set `maxReplicasPerJob: 3` in {config}" in message
    assert backend.list() == []


def test_the_default_cap_is_named_with_the_default_config_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "absent.yaml"))
    backend = LocalBackend(tmp_path / "state")
    job = pytorch_job("wider", master="pass", worker="pass", workers=DEFAULT_MAX_REPLICAS_PER_JOB)
    with pytest.raises(SubstrateError) as exc:
        backend.submit(job, SubmitOptions(detach=False))
    assert f"over the local cap of {DEFAULT_MAX_REPLICAS_PER_JOB} per job" in str(exc.value)
    assert str(tmp_path / "absent.yaml") in str(exc.value)


@pytest.mark.parametrize("value", ["0", "-3", "many", "true", "1.5"])
def test_a_bad_cap_in_the_config_is_refused(tmp_path: Path, value: str) -> None:
    config = write_config(tmp_path, f"maxReplicasPerJob: {value}\n")
    with pytest.raises(SubstrateError, match="maxReplicasPerJob: expected a positive integer"):
        ImageConfig.load(config)


def test_a_cap_in_the_config_is_read(tmp_path: Path) -> None:
    config = write_config(tmp_path, "maxReplicasPerJob: 2048\nimages: {}\n")
    assert ImageConfig.load(config).max_replicas_per_job == 2048


def test_a_job_whose_logs_cannot_be_created_is_refused_and_forgotten(
    backend: LocalBackend,
) -> None:
    # A file where the jobs' directory belongs: creating any job directory fails.
    (backend.state_dir / "jobs").write_text("in the way\n")
    with pytest.raises(SubstrateError) as exc:
        backend.submit(pytorch_job("nologs", master="pass"), SubmitOptions(detach=False))
    assert "cannot create the job's log directory" in str(exc.value)
    assert "KUBEMILL_STATE_DIR" in str(exc.value)
    assert backend.list() == []


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_waiting_for_a_job_deleted_meanwhile_says_it_was_deleted(
    backend: LocalBackend, detach: bool
) -> None:
    backend.submit(pytorch_job("gone", master=SLEEPER), SubmitOptions(detach=detach))
    eventually(lambda: "up" in log_text(backend, "gone"), what="the replica to run")
    deleter = threading.Thread(target=backend.delete, args=("gone",))
    deleter.start()
    try:
        with pytest.raises(JobNotFound) as exc:
            backend.wait("gone", timeout=60)
    finally:
        deleter.join()
    assert str(exc.value.args[0]).startswith(
        "job 'gone' in namespace 'default' was deleted while waiting for it"
    )


def test_check_of_a_state_dir_that_is_a_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a directory\n")
    with pytest.raises(BrokenState, match="is not a directory"):
        check_state(tmp_path / "state")
