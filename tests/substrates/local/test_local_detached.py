"""Detached jobs: a supervisor process of their own, and the truth after it dies."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from local_support import SLEEPER, log_text, pytorch_job

from kubemill.api import ConditionType
from kubemill.substrates.base import JobNotFound, SubmitOptions
from kubemill.substrates.local import LocalBackend, log_keeper, procinfo
from support.waiting import eventually

SPAWNS_GRANDCHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print('grandchild', child.pid, flush=True)\n"
    "time.sleep(120)\n"
)
"""A replica that leaves a process of its own behind (in its process group)."""


def _supervisor(backend: LocalBackend, name: str) -> procinfo.ProcessId:
    rec = eventually(
        lambda: (r := backend.store.job("default", name)).supervisor_state == "running" and r,
        what="the detached supervisor to start",
    )
    supervisor: procinfo.ProcessId | None = rec.supervisor
    assert supervisor is not None and rec.supervisor_mode == "detached"
    assert supervisor.pid != os.getpid()
    return supervisor


def test_a_detached_job_runs_to_success_without_us(backend: LocalBackend, tmp_path: Path) -> None:
    job = pytorch_job("bg", master="print('hello from the background')")
    view = backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    assert not view.finished
    done = backend.wait("bg", timeout=120)
    assert done.phase == "Succeeded"
    assert log_text(backend, "bg") == "hello from the background"
    rec = backend.store.job("default", "bg")
    assert rec.supervisor is not None
    assert procinfo.wait_gone(rec.supervisor, timeout=30)


def test_supervisor_killed_mid_job_get_tells_the_truth_and_delete_leaves_nothing(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("orphan", master=SLEEPER, worker=SPAWNS_GRANDCHILD)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    supervisor = _supervisor(backend, "orphan")
    eventually(lambda: "grandchild" in log_text(backend, "orphan"), what="replicas up")
    running = backend.get("orphan")
    assert {r.phase for r in running.replicas} == {"Running"}
    groups = [r.pid for r in running.replicas if r.pid]
    assert len(groups) == 2
    grandchild = int(log_text(backend, "orphan", "worker-0").split()[1])
    assert procinfo.stat(grandchild) is not None

    os.kill(supervisor.pid, signal.SIGKILL)
    assert procinfo.wait_gone(supervisor, timeout=30)

    view = backend.get("orphan")
    assert view.phase == "Failed"
    cond = view.status.condition(ConditionType.FAILED)
    assert cond is not None and cond.reason == "SupervisorLost"
    assert "kubemill delete orphan" in cond.message
    assert all(r.phase != "Running" for r in view.replicas)
    assert {r.reason for r in view.replicas} == {"SupervisorLost"}
    # The kernel killed the replicas (PDEATHSIG) and the read killed what they left.
    assert all(not procinfo.group_members(pgid) for pgid in groups)
    info = procinfo.stat(grandchild)
    assert info is None or info.state == "Z"
    # What was logged is still there.
    assert "up" in log_text(backend, "orphan", "master-0")
    assert "grandchild" in log_text(backend, "orphan", "worker-0")
    assert any(e.reason == "SupervisorLost" for e in backend.events("orphan"))

    backend.delete("orphan")
    with pytest.raises(JobNotFound):
        backend.get("orphan")
    assert all(not procinfo.group_members(pgid) for pgid in groups)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_the_supervisor_stops_the_job_as_interrupted(
    backend: LocalBackend, tmp_path: Path, sig: signal.Signals
) -> None:
    job = pytorch_job("signalled", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    supervisor = _supervisor(backend, "signalled")
    eventually(lambda: log_text(backend, "signalled").count("up") == 2, what="replicas up")
    groups = [r.pid for r in backend.get("signalled").replicas if r.pid]
    os.kill(supervisor.pid, sig)
    view = backend.wait("signalled", timeout=60)
    cond = view.status.condition(ConditionType.FAILED)
    assert cond is not None and cond.reason == "Interrupted"
    assert {r.phase for r in view.replicas} == {"Stopped"}
    assert procinfo.wait_gone(supervisor, timeout=30)
    assert all(not procinfo.group_members(pgid) for pgid in groups)


def test_delete_of_a_running_detached_job_stops_it_through_its_supervisor(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("bgdel", master=SLEEPER, worker=SPAWNS_GRANDCHILD)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    supervisor = _supervisor(backend, "bgdel")
    eventually(lambda: "grandchild" in log_text(backend, "bgdel"), what="replicas up")
    groups = [r.pid for r in backend.get("bgdel").replicas if r.pid]
    grandchild = int(log_text(backend, "bgdel", "worker-0").split()[1])
    backend.delete("bgdel")
    assert procinfo.wait_gone(supervisor, timeout=30)
    assert all(not procinfo.group_members(pgid) for pgid in groups)
    info = procinfo.stat(grandchild)
    assert info is None or info.state == "Z"
    with pytest.raises(JobNotFound):
        backend.get("bgdel")


@pytest.mark.parametrize("supervisor_dies", [False, True], ids=["let-go", "killed"])
def test_a_delete_whose_caller_died_is_finished_by_the_next_read(
    backend: LocalBackend, tmp_path: Path, supervisor_dies: bool
) -> None:
    # Found while building the chaos test: `kubemill delete` SIGKILLed once it had asked
    # left the job recorded Running forever, with nothing running and no supervisor.
    job = pytorch_job("halfdel", master=SLEEPER, worker=SPAWNS_GRANDCHILD)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    supervisor = _supervisor(backend, "halfdel")
    eventually(lambda: "grandchild" in log_text(backend, "halfdel"), what="replicas up")
    groups = [r.pid for r in backend.get("halfdel").replicas if r.pid]
    grandchild = int(log_text(backend, "halfdel", "worker-0").split()[1])
    rec = backend.store.job("default", "halfdel")
    # What `delete` does first; then its process is gone.
    backend.store.request(rec.uid, "delete")
    if supervisor_dies:
        os.kill(supervisor.pid, signal.SIGKILL)
    assert procinfo.wait_gone(supervisor, timeout=30)

    with pytest.raises(JobNotFound):
        backend.get("halfdel")
    assert backend.list() == []
    assert not Path(rec.job_dir).exists()
    assert all(not procinfo.group_members(pgid) for pgid in groups)
    info = procinfo.stat(grandchild)
    assert info is None or info.state == "Z"


@pytest.mark.parametrize("next_read", ["get", "submit"])
def test_a_delete_killed_while_it_removes_the_files_is_finished_by_the_next_read(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, next_read: str
) -> None:
    # Found by the chaos test: `kubemill delete` of a job whose supervisor was killed,
    # SIGKILLed after it removed the job's record and before its directory was gone, left
    # a directory no record named, which nothing would ever remove. The record goes last.
    # A submit of the same name finishes the deletion too, rather than answer "exists".
    job = pytorch_job("halfgone", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    supervisor = _supervisor(backend, "halfgone")
    eventually(lambda: backend.get("halfgone").phase == "Running", what="running")
    os.kill(supervisor.pid, signal.SIGKILL)
    assert procinfo.wait_gone(supervisor, timeout=30)
    rec = backend.store.job("default", "halfgone")

    def killed_while_removing(job_dir: str) -> None:
        raise KeyboardInterrupt  # the deleter's end, its files not (all) removed

    monkeypatch.setattr(log_keeper, "remove_job_directory", killed_while_removing)
    with pytest.raises(KeyboardInterrupt):
        backend.delete("halfgone")
    monkeypatch.undo()
    assert Path(rec.job_dir).exists()

    if next_read == "submit":
        again = pytorch_job("halfgone", master="pass")
        backend.submit(again, SubmitOptions(detach=False, base_dir=str(tmp_path)))
        assert backend.wait("halfgone", timeout=60).phase == "Succeeded"
        assert backend.store.job("default", "halfgone").uid != rec.uid
    else:
        with pytest.raises(JobNotFound):
            backend.get("halfgone")
        assert backend.list() == []
    assert not Path(rec.job_dir).exists()


def test_no_process_of_a_deleted_job_is_left_when_delete_returns(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # Found while building the chaos test (no process of a deleted job may run): the
    # detached supervisor, which had let go of the job, was often still ending
    # (interpreter shutdown) when `delete` returned.
    for round_ in range(3):
        name = f"gonenow-{round_}"
        backend.submit(pytorch_job(name, master=SLEEPER), SubmitOptions(detach=True))
        supervisor = _supervisor(backend, name)
        eventually(lambda name=name: "up" in log_text(backend, name), what="replica up")
        backend.delete(name)
        assert not procinfo.is_alive(supervisor), f"round {round_}: supervisor still runs"


LEAVES_A_CHILD_BEHIND = (
    "import os, time\n"
    "child = os.fork()\n"
    "if child == 0:\n"
    "    time.sleep(1)\n"  # outlives its parent, in its parent's process group, then ends
    "    os._exit(0)\n"
    "print('child', child, flush=True)\n"
)


def test_orphans_that_end_under_the_supervisor_are_reaped_while_the_job_runs(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # The worker ends at once and its child a second later, re-parented to the supervisor
    # (a subreaper), while the master keeps the job running: a Ray node's raylet after its
    # `ray start` was killed. Without a wait by the supervisor it would stay a zombie until
    # the job's end.
    job = pytorch_job("reaped", master=SLEEPER, worker=LEAVES_A_CHILD_BEHIND)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    supervisor = _supervisor(backend, "reaped")
    eventually(lambda: "child" in log_text(backend, "reaped", "worker-0"), what="the fork")
    child = int(log_text(backend, "reaped", "worker-0").split()[1])

    def reaped() -> bool:
        info = procinfo.stat(child)
        assert info is None or info.ppid in (supervisor.pid, 0) or info.state != "Z"
        return info is None

    eventually(reaped, timeout=30, what="the orphan, dead, reaped by the supervisor")
    assert backend.get("reaped").phase == "Running"
    backend.delete("reaped")
