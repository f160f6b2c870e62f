"""Suspend, resume and interrupt of local jobs with real processes; the verdicts that
come from the core when no supervisor loop is there to ask for them.

Every outcome is the core's: these tests only change what the core is told (the stop
annotation, ``runPolicy.suspend``, a lost supervisor) and check what it recorded.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from local_support import SLEEPER, log_text, pytorch_job

from kubemill.api import STOP_ANNOTATION, ConditionType
from kubemill.core import ObservedPod, reconcile
from kubemill.substrates.base import JobView, SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend, procinfo
from kubemill.substrates.local.supervisor import Supervisor
from support.waiting import eventually


def _up(backend: LocalBackend, name: str, count: int) -> None:
    eventually(
        lambda: log_text(backend, name).count("up") >= count, what=f"{count} 'up' lines of {name}"
    )


def _phase(backend: LocalBackend, name: str, phase: str) -> JobView:
    view: JobView = eventually(
        lambda: (v := backend.get(name)).phase == phase and v, what=f"{name} {phase}"
    )
    return view


def _running_pids(view: JobView) -> list[int]:
    return [r.pid for r in view.replicas if r.pid is not None]


def _supervisor(backend: LocalBackend, name: str) -> procinfo.ProcessId:
    rec = eventually(
        lambda: (r := backend.store.job("default", name)).supervisor_state == "running" and r,
        what="the supervisor to run",
    )
    assert rec.supervisor is not None
    return rec.supervisor


def _failed(view: JobView) -> tuple[str, str]:
    cond = view.status.condition(ConditionType.FAILED)
    assert cond is not None and cond.status == "True", view.status
    return cond.reason, cond.message


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_suspend_stops_the_replicas_and_resume_starts_them_again(
    backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    job = pytorch_job("pause", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))
    _up(backend, "pause", 2)
    before = _running_pids(
        eventually(lambda: len(_running_pids(v := backend.get("pause"))) == 2 and v)
    )
    supervisor = _supervisor(backend, "pause")

    backend.suspend("pause")
    suspended = _phase(backend, "pause", "Suspended")
    eventually(lambda: {r.phase for r in backend.get("pause").replicas} == {"Stopped"})
    assert not suspended.finished
    assert all(not procinfo.group_members(pid) for pid in before)
    assert backend.store.job("default", "pause").manifest["spec"]["runPolicy"]["suspend"] is True
    # The supervisor stays, idle, while the job is suspended.
    assert procinfo.is_alive(supervisor)
    assert any(e.reason == "PyTorchJobSuspended" for e in backend.events("pause"))

    backend.resume("pause")
    _up(backend, "pause", 4)
    resumed = _phase(backend, "pause", "Running")
    after = _running_pids(
        eventually(lambda: len(_running_pids(v := backend.get("pause"))) == 2 and v)
    )
    assert set(after).isdisjoint(before)
    suspended_cond = resumed.status.condition(ConditionType.SUSPENDED)
    assert suspended_cond is not None and suspended_cond.status == "False"
    # As Kubernetes Jobs do, a suspension is not a restart.
    assert all(r.restarts == 0 for r in backend.get("pause").replicas)

    view = backend.interrupt("pause", why="the test is done")
    reason, message = _failed(view)
    assert reason == "Interrupted" and "the test is done" in message
    assert {r.phase for r in view.replicas} == {"Stopped"}
    assert all(not procinfo.group_members(pid) for pid in after)
    manifest = backend.store.job("default", "pause").manifest
    assert manifest["metadata"]["annotations"][STOP_ANNOTATION] == "the test is done"


def test_a_suspended_job_whose_supervisor_died_stays_suspended_and_resumes_under_a_new_one(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("lazarus", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    _up(backend, "lazarus", 2)
    first = _supervisor(backend, "lazarus")
    backend.suspend("lazarus")
    eventually(lambda: {r.phase for r in backend.get("lazarus").replicas} == {"Stopped"})
    os.kill(first.pid, signal.SIGKILL)
    assert procinfo.wait_gone(first, timeout=30)

    # Nothing of it ran when the supervisor went: the core keeps it Suspended.
    view = backend.get("lazarus")
    assert view.phase == "Suspended" and not view.finished
    assert backend.store.job("default", "lazarus").supervisor_state == "done"

    backend.resume("lazarus")
    second = _supervisor(backend, "lazarus")
    assert second != first
    _up(backend, "lazarus", 4)
    _phase(backend, "lazarus", "Running")

    view = backend.interrupt("lazarus")
    assert _failed(view)[0] == "Interrupted"
    assert procinfo.wait_gone(second, timeout=30)


def test_a_stop_request_recorded_before_the_supervisor_died_is_the_verdict(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("asked", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    _up(backend, "asked", 2)
    supervisor = _supervisor(backend, "asked")
    # Frozen, it cannot act on the request before it dies.
    os.kill(supervisor.pid, signal.SIGSTOP)
    rec = backend.store.job("default", "asked")
    backend.store.patch_manifest(rec.uid, annotations={STOP_ANNOTATION: "someone"})
    os.kill(supervisor.pid, signal.SIGKILL)
    assert procinfo.wait_gone(supervisor, timeout=30)

    view = backend.get("asked")
    reason, message = _failed(view)
    # It was asked to stop, and it is stopped: Interrupted is truer than SupervisorLost.
    assert reason == "Interrupted" and "someone" in message
    assert {r.reason for r in view.replicas} == {"SupervisorLost"}


def test_interrupting_a_job_whose_supervisor_is_already_gone_records_it_lost(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("late", master=SLEEPER)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    _up(backend, "late", 1)
    supervisor = _supervisor(backend, "late")
    os.kill(supervisor.pid, signal.SIGKILL)
    assert procinfo.wait_gone(supervisor, timeout=30)

    # The job was lost before anyone asked it to stop: that is what is recorded.
    view = backend.interrupt("late")
    assert _failed(view)[0] == "SupervisorLost"
    assert [e.reason for e in backend.events("late")].count("SupervisorLost") == 1


@pytest.mark.parametrize("verb", ["suspend", "resume"])
def test_suspend_and_resume_refuse_a_finished_job(
    backend: LocalBackend, tmp_path: Path, verb: str
) -> None:
    backend.submit(
        pytorch_job("over", master="print('done')"),
        SubmitOptions(detach=False, base_dir=str(tmp_path)),
    )
    assert backend.wait("over", timeout=120).phase == "Succeeded"
    with pytest.raises(SubstrateError, match=r"already finished \(Succeeded\).*kubemill delete"):
        getattr(backend, verb)("over")


def test_a_failing_supervisor_loop_is_a_halt_the_core_records(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0

    def failing_reconcile(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls > 3:
            raise RuntimeError("boom")
        return reconcile(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("kubemill.substrates.local.supervisor.loop.reconcile", failing_reconcile)
    # The halt's own reconcile must be the real one.
    real_halt = Supervisor._halt

    def halt(self: Supervisor, *args: object) -> None:
        monkeypatch.setattr("kubemill.substrates.local.supervisor.loop.reconcile", reconcile)
        real_halt(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Supervisor, "_halt", halt)
    job = pytorch_job("buggy", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    view = backend.wait("buggy", timeout=120)
    reason, message = _failed(view)
    assert reason == "SupervisorError" and "RuntimeError: boom" in message
    assert all(r.phase != "Running" for r in view.replicas)
    assert any(e.reason == "SupervisorError" for e in backend.events("buggy"))


def test_observed_pods_of_a_lost_supervisor_are_unknown() -> None:
    from kubemill.substrates.local.store import ReplicaRecord
    from kubemill.substrates.local.verdict import observed_records

    def record(name: str, phase: str, created: float | None = 1.0) -> ReplicaRecord:
        return ReplicaRecord(
            job_uid="u",
            name=name,
            replica_type="Worker",
            index=0,
            position=0,
            log_path="x",
            phase=phase,
            created=created,
            reason="Error" if phase == "Failed" else "",
        )

    records = [
        record("running", "Running"),
        record("failed", "Failed"),
        record("stopped", "Stopped"),
        record("never", "Pending", created=None),
    ]
    lost = {p.name: p for p in observed_records(records, lost=True)}
    assert set(lost) == {"running", "failed"}
    assert (lost["running"].phase, lost["running"].reason) == ("Unknown", "SupervisorLost")
    assert (lost["failed"].phase, lost["failed"].reason) == ("Failed", "Error")
    kept = {p.name: p for p in observed_records(records, lost=False)}
    assert isinstance(kept["running"], ObservedPod) and kept["running"].phase == "Running"


def test_replicas_a_suspend_stopped_through_a_dying_supervisor_are_no_restarts(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # Found with the chaos test: suspended, then its supervisor died before it stopped
    # the replicas (they died with it); they were recorded Failed (SupervisorLost), and
    # once resumed each showed a restart, though none had failed.
    job = pytorch_job(
        "pausedlost",
        master=SLEEPER,
        worker=SLEEPER,
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 1},
    )
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    _up(backend, "pausedlost", 2)
    supervisor = _supervisor(backend, "pausedlost")
    # Frozen, it cannot act on the suspend before it dies.
    os.kill(supervisor.pid, signal.SIGSTOP)
    backend.store.patch_manifest(backend.store.job("default", "pausedlost").uid, suspend=True)
    os.kill(supervisor.pid, signal.SIGKILL)
    assert procinfo.wait_gone(supervisor, timeout=30)

    view = backend.get("pausedlost")
    assert view.phase == "Suspended" and not view.finished
    # Stopped by the suspend asked for (the kernel did it, as the supervisor died).
    assert {r.phase for r in view.replicas} == {"Stopped"}
    assert [r.restarts for r in view.replicas] == [0, 0]

    backend.resume("pausedlost")
    _up(backend, "pausedlost", 4)
    view = _phase(backend, "pausedlost", "Running")
    assert [r.restarts for r in view.replicas] == [0, 0]
    assert view.status.condition(ConditionType.FAILED) is None


def test_a_replica_that_had_succeeded_is_no_restart_when_resume_starts_it_again(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # Found by the chaos test: a suspend deletes every pod, succeeded ones too, and resume
    # creates them again; the worker that had exited 0 was shown with a restart.
    job = pytorch_job(
        "donebefore", master=SLEEPER, worker="print('up', flush=True)", restart_policy="Never"
    )
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    eventually(
        lambda: {r.phase for r in backend.get("donebefore").replicas} == {"Running", "Succeeded"},
        what="the worker done, the master running",
    )
    backend.suspend("donebefore")
    _phase(backend, "donebefore", "Suspended")
    backend.resume("donebefore")
    view = eventually(
        lambda: (
            (v := backend.get("donebefore")).phase == "Running"
            and {r.phase for r in v.replicas} == {"Running", "Succeeded"}
            and all(r.started is not None for r in v.replicas)
            and v
        ),
        what="resumed",
    )
    assert log_text(backend, "donebefore", "worker-0").count("up") == 2
    assert [r.restarts for r in view.replicas] == [0, 0]
