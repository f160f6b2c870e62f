"""The real ``kubemill`` against broken state and bad input: one red line, never a traceback.

A damaged or unopenable ``kubemill.db`` for ``get``, ``run`` and ``logs``; a binary
manifest; ``kubemill doctor`` and ``--repair``; a namespace such as ``../..``; a job
deleted while ``run`` follows it; ``kubemill operator --help`` in plain text.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from cli_support import Kubemill, lines, pytorch_job, write_manifest

WAIT = 60.0
"""Upper bound for a job state to be reached; the tests poll, they never time work."""

VERBS = [
    pytest.param(["get"], id="get"),
    pytest.param(["run", "MANIFEST"], id="run"),
    pytest.param(["logs", "some-job"], id="logs"),
]


def one_red_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    assert len(lines(done.stderr)) == 1, done.stderr
    return done.stderr.strip()


def argv_for(verbs: list[str], tmp_path: Path) -> list[str]:
    manifest = write_manifest(tmp_path, pytorch_job("ok", master="print('hi')"))
    return [str(manifest) if v == "MANIFEST" else v for v in verbs]


@pytest.mark.parametrize("verbs", VERBS)
def test_a_damaged_database_is_one_line_naming_it_and_the_repair(
    kubemill: Kubemill, state_dir: Path, tmp_path: Path, verbs: list[str]
) -> None:
    (state_dir / "kubemill.db").write_bytes(b"not a database at all" * 200)
    message = one_red_line(kubemill(*argv_for(verbs, tmp_path)))
    assert message == (
        f"error: the state database {state_dir / 'kubemill.db'} is damaged (file is not a"
        " database); run `kubemill doctor --repair` to move it aside and start a fresh one"
        " (job logs are kept)"
    )


@pytest.mark.parametrize("verbs", VERBS)
def test_an_unopenable_database_is_one_line_saying_what_to_make_writable(
    kubemill: Kubemill, state_dir: Path, tmp_path: Path, verbs: list[str]
) -> None:
    # As a read-only directory would, for root too: SQLite cannot create this file.
    (state_dir / "kubemill.db").symlink_to(tmp_path / "missing" / "kubemill.db")
    message = one_red_line(kubemill(*argv_for(verbs, tmp_path)))
    assert message.startswith(f"error: cannot open the state database {state_dir / 'kubemill.db'}")
    assert f"make {state_dir} writable, or set KUBEMILL_STATE_DIR" in message


def test_a_binary_manifest_is_one_line_naming_the_file(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = tmp_path / "binary.yaml"
    manifest.write_bytes(bytes(range(256)))
    message = one_red_line(kubemill("run", str(manifest)))
    assert "cannot read" not in message
    assert f"{manifest}: <document>: not UTF-8 text" in message


def test_doctor_checks_then_repairs_keeping_the_logs(
    kubemill: Kubemill, state_dir: Path, tmp_path: Path
) -> None:
    empty = kubemill("doctor", check=True)
    assert "no database yet" in empty.stdout
    manifest = write_manifest(tmp_path, pytorch_job("kept", master="print('kept line')"))
    kubemill("run", str(manifest), check=True)
    healthy = kubemill("doctor", check=True)
    assert healthy.stdout.strip() == f"{state_dir / 'kubemill.db'}: OK (integrity check passed)"
    logs = list((state_dir / "jobs").rglob("*.log"))
    assert logs and "kept line" in logs[0].read_text()

    (state_dir / "kubemill.db").write_bytes(b"garbage" * 1000)
    for companion in ("kubemill.db-wal", "kubemill.db-shm"):
        (state_dir / companion).unlink(missing_ok=True)
    damaged = kubemill("doctor")
    assert damaged.returncode == 1
    assert "file is not a database" in damaged.stdout
    assert "kubemill doctor --repair" in damaged.stdout

    repaired = kubemill("doctor", "--repair", check=True)
    aside = sorted(state_dir.glob("kubemill.db.broken-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"garbage")
    assert str(aside[0]) in repaired.stdout
    assert "kept line" in logs[0].read_text()
    assert kubemill("get", check=True).stdout.strip() == "No jobs found."
    assert "OK" in kubemill("doctor", check=True).stdout


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["get", "-n", "../.."], id="get-all"),
        pytest.param(["get", "job", "-n", "../.."], id="get-one"),
        pytest.param(["--namespace", "..", "get"], id="global-flag"),
        pytest.param(["logs", "job", "-n", "a/b"], id="logs"),
        pytest.param(["delete", "job", "-n", "../.."], id="delete"),
        pytest.param(["describe", "job", "-n", "../.."], id="describe"),
    ],
)
def test_a_path_as_namespace_is_refused_everywhere(kubemill: Kubemill, argv: list[str]) -> None:
    message = one_red_line(kubemill(*argv))
    assert "is not a valid name" in message


def test_a_job_deleted_while_run_follows_it_says_so(kubemill: Kubemill, tmp_path: Path) -> None:
    code = (
        "import time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)"
    )
    manifest = write_manifest(tmp_path, pytorch_job("doomed", master=code))
    follower = kubemill.popen("run", str(manifest))
    try:
        deadline = time.monotonic() + WAIT
        while kubemill("get", "doomed").returncode != 0 or "Running" not in (
            kubemill("get", "doomed").stdout
        ):
            assert time.monotonic() < deadline, "the job never ran"
            time.sleep(0.2)
        kubemill("delete", "doomed", check=True)
        out, err = follower.communicate(timeout=WAIT)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 1
    assert "deleted while running" in out
    assert "no job" not in out + err
    assert "Traceback" not in err


def test_operator_help_is_plain_and_names_every_option_whole(kubemill: Kubemill) -> None:
    done = kubemill("operator", "--help", check=True)
    assert done.stdout.startswith("Usage: kubemill operator [OPTIONS]")
    for box in ("╭", "│", "╰", "─"):
        assert box not in done.stdout
    for option in ("--serve-upstream-groups", "--leader-election", "--lease-namespace"):
        assert option in done.stdout


def test_a_path_is_printed_as_it_is_never_as_markup_or_an_emoji(
    kubemill: Kubemill, tmp_path: Path
) -> None:
    # Every string kubemill prints (paths, names, messages, log lines) is the user's text:
    # `[bold]` and `:smile:` in a state directory's name stay as they are.
    state_dir = tmp_path / "state [bold]x[/bold] :smile:"
    done = kubemill("--state-dir", str(state_dir), "doctor", check=True)
    assert done.stdout.startswith(f"{state_dir / 'kubemill.db'}: no database yet"), done.stdout
