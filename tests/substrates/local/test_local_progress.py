"""A local job's program reports progress; the status, ``kubemill get`` and the SDK show it.

Replicas are small ``python -c`` programs. One writes the line protocol itself (the
``time`` of each report given, so the ETA is exact), one calls ``kubemill.report``, one
writes lines that break the protocol between good ones. The tests wait on files and
states, never on durations.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from local_support import container, pytorch_job

from kubemill.cli.table import jobs_text
from kubemill.core import ReconcileOptions
from kubemill.progress import MAX_LINE
from kubemill.sdk import JobClient
from kubemill.sdk.summary import row_of
from kubemill.substrates.base import SubmitOptions
from kubemill.substrates.local import LocalBackend, SupervisorOptions
from kubemill.substrates.local.progress import ProgressTail, history
from kubemill.substrates.local.store import Store
from kubemill.substrates.rows import JobSummary
from support.waiting import eventually


def lines_program(reports: list[dict[str, object]], *, then_wait_for: str = "") -> str:
    """A program that appends ``reports`` to its progress file, one line each, then
    (optionally) waits for a file before a last report at the final step."""
    code = [
        "import json, os, time",
        "path = os.environ['KUBEMILL_PROGRESS_FILE']",
        f"for r in {reports!r}:",
        "    open(path, 'a').write(json.dumps(r) + '\\n')",
    ]
    if then_wait_for:
        code += [
            f"while not os.path.exists({then_wait_for!r}): time.sleep(0.02)",
            "open(path, 'a').write(json.dumps({'step': 4, 'total': 4, 'loss': 0.1}) + '\\n')",
        ]
    return "\n".join(code)


def read_summaries(state_dir: Path) -> list[JobSummary] | None:
    """The rows ``kubemill get`` lists from the store as it is (None: the core first)."""
    store = Store(state_dir)
    try:
        return store.summaries()
    finally:
        store.close()


def rich_table(backend: LocalBackend, now: float | None = None) -> str:
    """The table of the jobs as the full read sees them (what every other substrate lists)."""
    return jobs_text([row_of(view) for view in backend.list()], now=now)


@pytest.fixture
def fixed_age() -> float:
    """Both tables measure ages from the same moment."""
    return datetime.now().timestamp() + 5


def test_reports_reach_the_status_get_and_the_sdk(
    backend: LocalBackend, tmp_path: Path, fixed_age: float
) -> None:
    reports: list[dict[str, object]] = [
        {"step": 1, "total": 4, "time": 1000.0, "loss": 0.9, "accuracy": 0.5},
        {"step": 2, "total": 4, "time": 1010.0, "loss": 0.5, "accuracy": 0.75},
    ]
    job = pytorch_job(
        "reports", master=lines_program(reports, then_wait_for=str(tmp_path / "finish"))
    )
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))

    def reported_step_two() -> object:
        shown = backend.get("reports").status.trainer_status
        assert shown is not None and shown.step == 2, shown
        return shown

    shown = eventually(reported_step_two, "the second report in the status")
    # Kubeflow Trainer's shape: half done; one step took 10 s, two are left.
    wire = backend.get("reports").status.to_wire()["trainerStatus"]
    assert wire["progressPercentage"] == 50
    assert wire["estimatedRemainingSeconds"] == 20
    assert wire["metrics"] == [
        {"name": "accuracy", "value": "0.75"},
        {"name": "loss", "value": "0.5"},
    ]
    assert "lastUpdatedTime" in wire
    # The SDK's status is the same record.
    client = JobClient("local", state_dir=backend.state_dir)
    assert client.get("reports").status.trainer_status == shown

    summaries = read_summaries(backend.state_dir)
    assert summaries is not None
    quick = jobs_text(summaries, now=fixed_age)
    assert quick == rich_table(backend, fixed_age)
    header, row = quick.splitlines()
    assert header.split()[-2:] == ["PROGRESS", "ETA"]
    assert row.split()[-2:] == ["50%", "20s"]

    (tmp_path / "finish").touch()
    done = backend.wait("reports", timeout=60)
    assert done.phase == "Succeeded"
    # The last report is written as the job ends, whatever the rate bound.
    final = done.status.trainer_status
    assert final is not None and (final.step, final.progress_percentage) == (4, 100)
    summaries = read_summaries(backend.state_dir)
    assert summaries is not None
    assert jobs_text(summaries, now=fixed_age).splitlines()[1].split()[-2:] == ["100%", "-"]
    # Every report is kept for the dashboard's plot.
    points = history(Path(done_dir(backend, "reports")) / "reports-master-0.jsonl")
    assert [(p.step, p.metrics["loss"]) for p in points] == [(1, 0.9), (2, 0.5), (4, 0.1)]


def done_dir(backend: LocalBackend, name: str) -> str:
    rec = backend.store.job("default", name)
    assert rec is not None
    return str(Path(rec.job_dir) / "progress")


def test_get_has_no_progress_columns_until_a_job_reports(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.submit(pytorch_job("quiet", master="pass"), SubmitOptions(base_dir=str(tmp_path)))
    assert backend.wait("quiet", timeout=60).phase == "Succeeded"
    summaries = read_summaries(backend.state_dir)
    assert summaries is not None
    assert "PROGRESS" not in jobs_text(summaries)
    assert "PROGRESS" not in rich_table(backend)


def test_kubemill_report_from_the_program(backend: LocalBackend, tmp_path: Path) -> None:
    code = (
        "import kubemill\n"
        "for epoch in range(1, 4):\n"
        "    assert kubemill.report(step=epoch, total=3, loss=1 / epoch, accuracy=epoch / 4)\n"
    )
    backend.submit(pytorch_job("sdkcall", master=code), SubmitOptions(base_dir=str(tmp_path)))
    done = backend.wait("sdkcall", timeout=60)
    assert done.phase == "Succeeded", done.status
    shown = done.status.trainer_status
    assert shown is not None
    assert (shown.step, shown.total, shown.progress_percentage) == (3, 3, 100)
    assert {m.name: m.value for m in shown.metrics} == {"accuracy": "0.75", "loss": "0.333333"}


def test_a_malformed_report_is_skipped_with_a_warning_and_loses_nothing_else(
    backend: LocalBackend, tmp_path: Path
) -> None:
    path = "os.environ['KUBEMILL_PROGRESS_FILE']"
    bad_lines = [
        "not json",
        json.dumps({"step": "three"}),
        json.dumps([1, 2]),
        json.dumps({"step": 2, "loss": "low"}),
        "x" * 10_000,
    ]
    code = (
        "import json, os\n"
        f"out = open({path}, 'a')\n"
        "out.write(json.dumps({'step': 1, 'total': 3, 'loss': 0.8}) + '\\n')\n"
        f"for line in {bad_lines!r}:\n"
        "    out.write(line + '\\n')\n"
        "out.write(json.dumps({'step': 3, 'total': 3, 'loss': 0.2}) + '\\n')\n"
        "out.close()\n"
        "print('done', flush=True)\n"
    )
    backend.submit(
        pytorch_job("garbled", master=container(code)), SubmitOptions(base_dir=str(tmp_path))
    )
    done = backend.wait("garbled", timeout=60)
    assert done.phase == "Succeeded", done.status
    shown = done.status.trainer_status
    assert shown is not None
    assert (shown.step, [(m.name, m.value) for m in shown.metrics]) == (3, [("loss", "0.2")])
    warnings = [e for e in backend.events("garbled") if e.reason == "BadProgressReport"]
    assert len(warnings) == 1, warnings
    assert warnings[0].type == "Warning" and "garbled-master-0" in warnings[0].message
    # The bad lines are skipped in the plot's history too.
    points = history(Path(done_dir(backend, "garbled")) / "garbled-master-0.jsonl")
    assert [p.step for p in points] == [1, 3]


def test_the_tail_reads_whole_lines_only_and_a_lower_step_restarts_the_speed(
    tmp_path: Path,
) -> None:
    bad: list[tuple[str, str]] = []
    tail = ProgressTail(tmp_path, on_bad=lambda replica, why: bad.append((replica, why)))
    path = tmp_path / "j-master-0.jsonl"
    assert tail.poll() == ()
    with path.open("ab") as out:
        out.write(b'{"step": 1, "total": 9, "time": 100, "loss": 2}\n{"step": 2, "ti')
    (first,) = tail.poll()
    assert (first.step, first.origin) == (1, (first.time, 1))
    with path.open("ab") as out:
        # The rest of the half-written line, an over-long line, then a restarted program.
        out.write(b'me": 110, "loss": 1}\n' + b"x" * (MAX_LINE + 10) + b"\n")
        out.write(b'{"step": 0, "total": 9, "time": 200}\n{"step": 3, "total": 9, "time": 230}\n')
    (latest,) = tail.poll()
    assert latest.step == 3 and latest.origin is not None
    # The speed is measured from the restart (step 0 at 200 s): 3 steps in 30 s.
    assert latest.origin[1] == 0 and (latest.time - latest.origin[0]).total_seconds() == 30
    assert [replica for replica, _ in bad] == ["j-master-0"]
    assert tail.poll() == (latest,)  # nothing new: the same report
    # A report updates what it names: the total and the loss are kept from earlier ones.
    assert (latest.total, latest.metrics) == (9, (("loss", 1.0),))
    with path.open("ab") as out:
        out.write(b'{"accuracy": 0.5}\n')
    (merged,) = tail.poll()
    # Still step 3 as reported at 230 s: the ETA's speed is measured from steps.
    assert (merged.step, merged.total, merged.time) == (3, 9, latest.time)
    assert merged.metrics == (("accuracy", 0.5), ("loss", 1.0))


def test_history_reads_the_end_of_a_long_file_and_thins_it(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(
        "".join(json.dumps({"step": i, "loss": 1 / (i + 1)}) + "\n" for i in range(5000))
    )
    thinned = history(path, limit=100)
    assert len(thinned) == 100 and thinned[0].step == 0 and thinned[-1].step == 4999
    tail_only = history(path, most=1000)
    steps = [p.step for p in tail_only]
    assert steps[-1] == 4999 and steps == list(range(steps[0], 5000)) and steps[0] > 4900


def test_a_program_reporting_every_few_milliseconds_gets_bounded_status_writes(
    isolated: Path, tmp_path: Path
) -> None:
    """Three hundred reports, 5 ms apart: every status write the test sees is at least the
    interval after the one before (the times are the core's, recorded with each write),
    and the last report is the one the finished job keeps."""
    interval = timedelta(seconds=0.5)
    local = LocalBackend(
        isolated / "rate-state",
        supervisor_options=SupervisorOptions(
            reconcile=ReconcileOptions(progress_interval=interval)
        ),
    )
    code = (
        "import kubemill, time\n"
        "for step in range(1, 301):\n"
        "    kubemill.report(step=step, total=300, loss=1 / step)\n"
        "    time.sleep(0.005)\n"
    )
    # In this process: the supervisor runs with these options.
    options = SubmitOptions(detach=False, base_dir=str(tmp_path))
    local.submit(pytorch_job("chatty", master=code), options)
    written: dict[datetime, int | None] = {}

    def finished() -> bool:
        view = local.get("chatty")
        shown = view.status.trainer_status
        if shown is not None and shown.last_updated_time is not None:
            written[shown.last_updated_time] = shown.step
        return view.finished

    eventually(finished, "chatty finished", interval=0.01)
    try:
        final = local.get("chatty").status.trainer_status
        assert final is not None and final.step == 300
        times = sorted(written)
        assert len(times) >= 3, written  # the reports span more than two intervals
        # The end writes at once; every earlier write waited for its interval.
        gaps = [b - a for a, b in itertools.pairwise(times[:-1])]
        assert all(gap >= interval for gap in gaps), gaps
        assert written[times[-1]] == 300
    finally:
        local.delete("chatty")
