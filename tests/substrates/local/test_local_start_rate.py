"""Replicas start at a bounded rate (issue 7): a job of many tiny replicas never has more
processes started in any one-second window than the configured burst and rate allow.

The bound is checked on the start times the supervisor recorded for each replica (counts
within a window), never on how long the test took.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from local_support import pytorch_job

from kubemill.substrates.base import SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend
from kubemill.substrates.local.start_rate import StartBucket, StartLimits

WORKERS = 14
WORKER = "import os; open('started-' + os.environ['HOSTNAME'], 'w').close()"
MASTER = f"import glob, time\nwhile len(glob.glob('started-*')) < {WORKERS}: time.sleep(0.01)\n"
"""The master waits for every worker, so the job only ends once all of them have run."""


def most_in_one_second(starts: list[datetime]) -> int:
    moments = sorted(s.timestamp() for s in starts)
    return max(sum(1 for t in moments if first <= t < first + 1.0) for first in moments)


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_replicas_start_no_faster_than_the_configured_rate(
    backend: LocalBackend, isolated: Path, tmp_path: Path, detach: bool
) -> None:
    # The isolated fixture points KUBEMILL_CONFIG at this file; detached supervisors too.
    (isolated / "no-config.yaml").write_text("replicaStarts:\n  perSecond: 4\n  burst: 3\n")
    job = pytorch_job("many", master=MASTER, worker=WORKER, workers=WORKERS)
    backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))
    done = backend.wait("many", timeout=120)
    assert done.phase == "Succeeded", done.status
    starts = [r.started for r in done.replicas if r.started is not None]
    assert len(starts) == WORKERS + 1
    assert most_in_one_second(starts) <= 3 + 4


def test_the_default_rate_lets_a_small_job_start_at_once() -> None:
    bucket = StartBucket(StartLimits())
    assert all(bucket.take(100.0) for _ in range(StartLimits().burst))
    assert not bucket.take(100.0)
    # Tokens come back with time, at the rate.
    assert bucket.next_token(100.0) == pytest.approx(100.0 + 1 / StartLimits().per_second)
    assert bucket.take(100.0 + 1 / StartLimits().per_second)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("replicaStarts:\n  perSecond: 0\n", "replicaStarts.perSecond: expected a number > 0"),
        ("replicaStarts:\n  burst: 0.5\n", "replicaStarts.burst: expected a whole number >= 1"),
        ("replicaStarts:\n  rate: 3\n", "replicaStarts: unknown keys ['rate']"),
    ],
)
def test_a_bad_start_rate_is_refused_at_submit_with_the_key_named(
    backend: LocalBackend, isolated: Path, tmp_path: Path, text: str, words: str
) -> None:
    (isolated / "no-config.yaml").write_text(text)
    with pytest.raises(SubstrateError, match=re.escape(words)):
        backend.submit(
            pytorch_job("bad-rate", master="pass"),
            SubmitOptions(detach=False, base_dir=str(tmp_path)),
        )
    # Refused before anything was recorded or started.
    assert backend.list() == []
