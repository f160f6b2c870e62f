"""Process handling of the local substrate under abuse (issue 7): no process outlives its
job, even a daemonised one; restarts only the core allows.

Real processes throughout; replicas coordinate through files in the test's ``tmp_path``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from local_support import DAEMONISE, SLEEPER, assert_gone, daemons, pytorch_job

from kubemill.api import ConditionType
from kubemill.substrates.base import JobView, SubmitOptions
from kubemill.substrates.local import LocalBackend, procinfo
from support.waiting import eventually

COUNT_RUN = (
    "import os\n"
    "runs = int(open('{name}').read()) + 1 if os.path.exists('{name}') else 1\n"
    "open('{name}.tmp', 'w').write(str(runs))\n"
    "os.replace('{name}.tmp', '{name}')\n"
)


def run(backend: LocalBackend, job: object, tmp_path: Path, *, detach: bool = False) -> JobView:
    view = backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))  # type: ignore[arg-type]
    done = backend.wait(view.name, timeout=120)
    assert done.finished, f"{view.name} did not finish: {done.status}"
    return done


def test_on_failure_never_starts_a_run_past_the_backoff_limit(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job(
        "limit",
        master=SLEEPER,
        worker=COUNT_RUN.format(name="runs") + "raise SystemExit(3)",
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 2},
    )
    view = run(backend, job, tmp_path)
    failed = view.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    # One run and two restarts; the third failure is judged before any fourth run.
    assert (tmp_path / "runs").read_text() == "3"
    worker = next(r for r in view.replicas if r.name.endswith("worker-0"))
    # The last real exit, not the SIGTERM of a run started only to be stopped.
    assert (worker.phase, worker.exit_code) == ("Failed", 3)
    assert worker.restarts == 3


HAS_CHILDREN = """\
import os, subprocess, sys
from kubemill.substrates.local import procinfo
seen = [procinfo.has_children()]
child = subprocess.Popen([sys.executable, "-c", "pass"])
seen.append(procinfo.has_children())
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
seen.append(procinfo.has_children())  # exited, not reaped: still a child (a zombie)
child.wait()
seen.append(procinfo.has_children())
print(seen)
"""


def test_has_children_counts_a_child_until_it_is_reaped() -> None:
    # The sweep at a job's end skips its scan of /proc on this (strays.JobProcesses.sweep):
    # a zombie not yet reaped must count, for the sweep reaps the job's.
    done = subprocess.run(
        [sys.executable, "-c", HAS_CHILDREN], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[False, True, True, False]"


def daemon_job(name: str, *, clear_env: bool = False) -> object:
    code = DAEMONISE if not clear_env else "import os; os.environ['CLEAR_ENV'] = '1'\n" + DAEMONISE
    return pytorch_job(name, master=code)


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
@pytest.mark.parametrize(("code", "phase"), [(0, "Succeeded"), (3, "Failed")])
def test_daemonised_processes_end_with_their_job(
    backend: LocalBackend, tmp_path: Path, detach: bool, code: int, phase: str
) -> None:
    view = backend.submit(
        daemon_job("daemons"), SubmitOptions(detach=detach, base_dir=str(tmp_path))
    )  # type: ignore[arg-type]
    started = daemons(tmp_path)
    (tmp_path / "go").write_text(str(code))
    done = backend.wait(view.name, timeout=60)
    assert done.phase == phase
    assert_gone(started)


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_daemonised_processes_end_on_delete(
    backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    view = backend.submit(
        daemon_job("deleted"), SubmitOptions(detach=detach, base_dir=str(tmp_path))
    )  # type: ignore[arg-type]
    started = daemons(tmp_path)
    backend.delete(view.name)
    assert_gone(started)


def test_a_detached_supervisor_ends_daemons_that_cleared_their_environment(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # Without the mark, only being below the supervisor (a subreaper) identifies them.
    job = daemon_job("cleared", clear_env=True)
    view = backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))  # type: ignore[arg-type]
    started = daemons(tmp_path)
    (tmp_path / "go").write_text("0")
    assert backend.wait(view.name, timeout=60).phase == "Succeeded"
    assert_gone(started)


def test_a_restart_in_place_ends_what_the_previous_run_left(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # The first run daemonises then fails; the second checks its daemons are gone already.
    second = (
        "import json, os\n"
        "def alive(pid):\n"
        "    try:\n"
        "        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z'\n"
        "    except OSError:\n"
        "        return False\n"
        "if os.path.exists('daemons'):\n"
        "    raise SystemExit(7 if any(map(alive, json.load(open('daemons')))) else 0)\n"
    )
    job = pytorch_job(
        "again",
        master=second + DAEMONISE,
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 1},
    )
    view = backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))  # type: ignore[arg-type]
    started = daemons(tmp_path)
    (tmp_path / "go").write_text("1")
    done = backend.wait(view.name, timeout=60)
    master = next(r for r in done.replicas if r.name.endswith("master-0"))
    assert (done.phase, master.exit_code, master.restarts) == ("Succeeded", 0, 1)
    assert_gone(started)


def test_daemons_of_a_killed_supervisor_end_when_the_job_is_next_read(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # The subreaper is gone: the daemons re-parent away, and are found by their mark.
    view = backend.submit(
        daemon_job("orphaned"), SubmitOptions(detach=True, base_dir=str(tmp_path))
    )  # type: ignore[arg-type]
    started = daemons(tmp_path)
    rec = backend.store.job("default", view.name)
    assert rec.supervisor is not None
    procinfo.kill_process(rec.supervisor)
    assert procinfo.wait_gone(rec.supervisor, timeout=10)
    healed = backend.get(view.name)
    assert healed.status.condition(ConditionType.FAILED) is not None
    assert_gone(started)


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_a_replica_that_ends_takes_only_its_own_daemons(
    backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    # Each replica daemonises in a directory of its own, then exits when told to.
    own_dir = "import os; os.makedirs(os.environ['HOSTNAME'], exist_ok=True)\n"
    own_dir += "os.chdir(os.environ['HOSTNAME'])\n"
    job = pytorch_job("two", master=own_dir + DAEMONISE, worker=own_dir + DAEMONISE)
    backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))  # type: ignore[arg-type]
    worker_dir, master_dir = tmp_path / "two-worker-0", tmp_path / "two-master-0"
    worker_daemons, master_daemons = daemons(worker_dir), daemons(master_dir)
    (worker_dir / "go").write_text("0")

    def worker_done() -> bool:
        replicas = backend.get("two").replicas
        return any(r.name == "two-worker-0" and r.phase == "Succeeded" for r in replicas)

    eventually(worker_done, what="the worker succeeded")
    # The sweep of a replica's daemons follows its exit, which the status may show first.
    eventually(
        lambda: not any(procinfo.is_alive(p) for p in worker_daemons),
        what="the worker's daemons ended",
    )
    assert all(procinfo.is_alive(p) for p in master_daemons), "the master's daemons were ended"
    (master_dir / "go").write_text("0")
    assert backend.wait("two", timeout=60).phase == "Succeeded"
    assert_gone(master_daemons)
