"""``kubemill logs`` reads in memory that does not grow with the log, and takes
``--tail``, ``--since``, ``--limit-bytes`` and ``--timestamps`` as ``kubectl logs`` does."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from cli_support import KUBEMILL, Kubemill, pytorch_job, write_manifest
from typer.testing import CliRunner

from kubemill.cli.app import app
from kubemill.sdk import JobClient
from kubemill.substrates.base import LogLine

LINE = b"x" * 90


def _log_file(state_dir: Path, job: str, replica: str) -> Path:
    (found,) = state_dir.glob(f"jobs/default/{job}-*/logs/{job}-{replica}.log")
    return found


def test_tail_of_a_150_mb_log_costs_a_few_mb_beyond_the_command_itself(
    kubemill: Kubemill, state_dir: Path, tmp_path: Path
) -> None:
    manifest = write_manifest(tmp_path, pytorch_job("big", master="print('first')"))
    kubemill("run", str(manifest), check=True)
    # What the command needs beside the log (the interpreter and its imports, which grow
    # with the kinds kubemill knows): its peak over the one-line log.
    baseline_mb, _ = _logs_peak(kubemill, tmp_path)
    # A 150 MB log (written here rather than by a replica: the reading is under test).
    log = _log_file(state_dir, "big", "master-0")
    with log.open("ab") as fh:
        for block in range(1_500):
            fh.write(b"".join(b"%08d %s\n" % (block * 1_000 + i, LINE) for i in range(1_000)))
    assert log.stat().st_size > 150_000_000

    peak_mb, printed = _logs_peak(kubemill, tmp_path)
    assert [line.split()[2] for line in printed] == [
        f"{n:08d}" for n in range(1_499_990, 1_500_000)
    ]
    # The tail is found from the end: the 150 MB cost no more than a few MB of reading.
    assert peak_mb - baseline_mb < 10, (
        f"kubemill logs --tail 10 peaked at {peak_mb:.0f} MB"
        f" ({baseline_mb:.0f} MB on a one-line log)"
    )


def _logs_peak(kubemill: Kubemill, tmp_path: Path) -> tuple[float, list[str]]:
    """The peak memory (MB) of `kubemill logs big --tail 10` alone, and what it printed.

    Not this process's child directly: a child forked from pytest starts with pytest's
    high-water mark, so a small wrapper runs it and reports its child's peak (ru_maxrss of
    RUSAGE_CHILDREN, in KB)."""
    peak_file = tmp_path / "peak"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURE,
            str(peak_file),
            str(KUBEMILL),
            "logs",
            "big",
            "--tail",
            "10",
        ],
        env=kubemill.env,
        cwd=kubemill.cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return int(peak_file.read_text()) / 1024, done.stdout.splitlines()


MEASURE = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as fh:
    fh.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def test_limit_bytes_and_timestamps(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path, pytorch_job("few", master="for i in range(3): print(f'line {i}')")
    )
    kubemill("run", str(manifest), check=True)

    limited = kubemill("logs", "few", "--replica", "master-0", "--limit-bytes", "10", check=True)
    assert limited.stdout.splitlines() == ["line 0", "lin"]

    stamped = kubemill("logs", "few", "--timestamps", "--tail", "2", check=True)
    rows = [line.split() for line in stamped.stdout.splitlines()]
    assert [row[3:] for row in rows] == [["line", "1"], ["line", "2"]]
    moments = [datetime.fromisoformat(row[2]) for row in rows]
    assert moments[0] <= moments[1]
    assert all(m.tzinfo is not None for m in moments)

    recent = kubemill("logs", "few", "--since", "1h", check=True)
    assert len(recent.stdout.splitlines()) == 3
    future = kubemill("logs", "few", "--since", "2999-01-01T00:00:00Z", check=True)
    assert future.stdout == ""


def test_a_bad_since_is_one_clear_error(runner: CliRunner, state_dir: Path) -> None:
    done = runner.invoke(app, ["logs", "anyjob", "--since", "yesterday"])
    assert done.exit_code == 1
    assert "--since: 'yesterday' is neither a duration" in done.stderr
    negative = runner.invoke(app, ["logs", "anyjob", "--tail", "-5"])
    assert negative.exit_code != 0


def test_output_rotated_away_before_a_follower_read_it_is_told_on_stderr(
    runner: CliRunner, kubemill: Kubemill, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = write_manifest(tmp_path, pytorch_job("behind", master="print('only')"))
    kubemill("run", str(manifest), check=True)
    # The reader's side (a follower behind the rotation gets the lost bytes on its next
    # line) is tested with the local logs; this is what the command makes of it.
    lines = [
        LogLine("behind-master-0", "before"),
        LogLine("behind-master-0", "after the hole", rotated_away=4096),
    ]
    monkeypatch.setattr(JobClient, "logs", lambda *_args, **_kwargs: iter(lines))
    done = runner.invoke(app, ["logs", "behind", "-f"])
    assert done.exit_code == 0, done.output
    assert done.stdout.split() == [
        "master-0",
        "|",
        "before",
        "master-0",
        "|",
        "after",
        "the",
        "hole",
    ]
    assert "4096 bytes of behind-master-0's output before the next line" in done.stderr
    assert "containerLogMaxSize" in done.stderr
