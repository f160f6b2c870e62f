"""Following a job supervised in this process ends once its supervisor has let go (its own
flag, not a database poll) and still yields every line, the very last ones included."""

from __future__ import annotations

from pathlib import Path

from local_support import pytorch_job

from kubemill.substrates.base import SubmitOptions
from kubemill.substrates.local import LocalBackend

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
