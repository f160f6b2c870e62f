"""Following a job supervised in this process ends once its supervisor has let go (its own
flag, not a database poll, which also ends the pause between two looks) and still yields
every line, the very last ones included."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from local_support import pytorch_job

from kubemill.substrates.base import SubmitOptions
from kubemill.substrates.local import LocalBackend, job_reads

LINES = 2000
CHATTY = f"import sys\nfor i in range({LINES}): print(i)\nsys.stdout.write('last, no newline')\n"


def test_following_a_foreground_job_yields_every_line_to_the_end(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("chatty", master=CHATTY, worker=CHATTY, workers=2)
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    lines = list(backend.logs("chatty", follow=True))
    # The follow ended by itself: the job is over and its supervisor has let go.
    assert backend.wait("chatty", timeout=0).finished
    replicas = sorted({line.replica for line in lines})
    assert len(replicas) == 3
    for replica in replicas:
        texts = [line.text for line in lines if line.replica == replica]
        assert texts == [str(i) for i in range(LINES)] + ["last, no newline"]


def test_the_followers_pause_ends_with_the_job(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Looks an hour apart: only the supervisor letting go can end the follow in time.
    monkeypatch.setattr(job_reads, "FOLLOW_INTERVAL", 3600.0)
    job = pytorch_job("brief", master="print('master done', flush=True)")
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    lines: list[str] = []
    follower = threading.Thread(
        target=lambda: lines.extend(line.text for line in backend.logs("brief", follow=True)),
        daemon=True,
    )
    follower.start()
    follower.join(60)
    assert not follower.is_alive(), "the follow waited out its pause after the job's end"
    assert lines == ["master done"]
