"""Jobs run for real as local processes: success, failure, every restart policy, stop.

Each replica is a small ``python -c`` program; the job's base directory is the test's
``tmp_path``, so replicas coordinate through files there (no timing assumptions).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
from local_support import SLEEPER, container, log_text, pytorch_job

from kubemill.api import ConditionType
from kubemill.substrates.base import (
    JobNotFound,
    JobView,
    ReplicaView,
    SubmitOptions,
    SubstrateError,
)
from kubemill.substrates.local import LocalBackend, procinfo
from support.waiting import eventually

ENV_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "HOSTNAME", "POD_NAME", "POD_IP")

PRINT_ENV = (
    "import json, os, sys; "
    f"print(json.dumps({{k: os.environ.get(k) for k in {ENV_KEYS!r}}} | "
    "{'cwd': os.getcwd(), 'python': sys.executable}), flush=True)"
)
"""Prints the replica's view of its environment as one JSON line."""

WAIT_FOR = "import os, time\nwhile not os.path.exists({path!r}): time.sleep(0.01)\n"
COUNT_RUN = (
    "import os\n"
    "runs = int(open('{name}').read()) + 1 if os.path.exists('{name}') else 1\n"
    "open('{name}.tmp', 'w').write(str(runs))\n"
    "os.replace('{name}.tmp', '{name}')\n"
)
"""Counts the runs of a replica in a file named ``name`` (in the working directory),
replacing it atomically so another replica never reads it half-written."""

FIELD_ENV = [
    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
]


def run(backend: LocalBackend, job: object, tmp_path: Path, *, detach: bool = False) -> JobView:
    """Submit ``job`` with ``tmp_path`` as base directory and wait for its end."""
    view = backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))  # type: ignore[arg-type]
    done = backend.wait(view.name, timeout=120)
    assert done.finished, f"{view.name} did not finish: {done.status}"
    return done


def failed_condition(view: JobView) -> tuple[str, str]:
    cond = view.status.condition(ConditionType.FAILED)
    assert cond is not None and cond.status == "True", view.status
    return cond.reason, cond.message


def replica(view: JobView, short: str) -> ReplicaView:
    return next(r for r in view.replicas if r.name == f"{view.name}-{short}")


def test_two_replicas_get_their_env_and_the_job_succeeds(
    backend: LocalBackend, tmp_path: Path
) -> None:
    worker = PRINT_ENV + "; open('worker-done', 'w').close()"
    master = WAIT_FOR.format(path="worker-done") + PRINT_ENV
    job = pytorch_job(
        "ddp-env",
        master=container(master, env=FIELD_ENV),
        worker=container(worker, env=FIELD_ENV),
    )
    view = run(backend, job, tmp_path)
    assert view.phase == "Succeeded"
    assert [(r.name, r.phase, r.exit_code) for r in view.replicas] == [
        ("ddp-env-master-0", "Succeeded", 0),
        ("ddp-env-worker-0", "Succeeded", 0),
    ]
    master_address = view.replicas[0].address
    seen = {
        name: json.loads(log_text(backend, "ddp-env", name)) for name in ("master-0", "worker-0")
    }
    for name, env in seen.items():
        assert env["HOSTNAME"] == env["POD_NAME"] == f"ddp-env-{name}"
        assert env["POD_IP"] == "127.0.0.1"
        assert f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}" == master_address
        assert env["WORLD_SIZE"] == "2"
        assert env["cwd"] == str(tmp_path)
        assert Path(env["python"]).parent == Path(sys.executable).absolute().parent
    assert (seen["master-0"]["RANK"], seen["worker-0"]["RANK"]) == ("0", "1")
    reasons = [e.reason for e in backend.events("ddp-env")]
    assert "SuccessfulCreatePod" in reasons and "PyTorchJobSucceeded" in reasons


def test_worker_exiting_3_under_never_fails_the_job_and_names_the_worker(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("fails", master=SLEEPER, worker="import sys; sys.exit(3)")
    view = run(backend, job, tmp_path)
    reason, message = failed_condition(view)
    assert reason == "PyTorchJobFailed"
    assert "worker-0 exited with code 3" in message
    worker, master = replica(view, "worker-0"), replica(view, "master-0")
    assert (worker.phase, worker.exit_code) == ("Failed", 3)
    # The master was still running: locally no process outlives its job.
    assert master.phase == "Stopped"
    assert not procinfo.group_members(master.pid or -1)


def test_a_replica_that_exits_0_when_stopped_is_shown_succeeded_not_stopped(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # The worker finishes cleanly on SIGTERM (as a server that shuts down gracefully does):
    # it was not cut off, so it is recorded as Succeeded.
    # The handler is in place before the master learns the worker is up (and can finish).
    worker = (
        "import signal, sys, time; "
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
        "open('worker-up', 'w').close(); time.sleep(120)"
    )
    master = WAIT_FOR.format(path="worker-up") + "print('master done')"
    view = run(backend, pytorch_job("graceful", master=master, worker=worker), tmp_path)
    assert view.phase == "Succeeded"
    stopped = replica(view, "worker-0")
    assert (stopped.phase, stopped.exit_code) == ("Succeeded", 0)


def test_on_failure_restarts_in_place_and_counts_against_backoff_limit(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job(
        "backoff",
        master=SLEEPER,
        worker=COUNT_RUN.format(name="runs") + "raise SystemExit(1)",
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 2},
    )
    view = run(backend, job, tmp_path)
    reason, message = failed_condition(view)
    assert reason == "BackoffLimitExceeded"
    assert "worker-0" in message
    # A restart is counted when the exit calling for it is seen, before it happens: the
    # third failure puts the count over the limit and no fourth run starts.
    assert view.status.replica_statuses["Worker"].restarts == 3
    assert replica(view, "worker-0").restarts == 3
    assert int((tmp_path / "runs").read_text()) == 3


def test_on_failure_restarts_until_the_replica_succeeds(
    backend: LocalBackend, tmp_path: Path
) -> None:
    worker = (
        COUNT_RUN.format(name="runs")
        + "if runs < 3: raise SystemExit(1)\nopen('worker-ok', 'w').close()\n"
    )
    job = pytorch_job(
        "retry",
        master=WAIT_FOR.format(path="worker-ok"),
        worker=worker,
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 5},
    )
    view = run(backend, job, tmp_path)
    assert view.phase == "Succeeded"
    assert replica(view, "worker-0").restarts == 2
    assert view.status.replica_statuses["Worker"].restarts == 2


def test_always_restarts_even_after_success(backend: LocalBackend, tmp_path: Path) -> None:
    worker = COUNT_RUN.format(name="runs")
    master = (
        "import os, time\n"
        "while not os.path.exists('runs') or int(open('runs').read()) < 3:\n"
        "    time.sleep(0.01)\n"
    )
    job = pytorch_job("always", master=master, worker=worker, worker_restart_policy="Always")
    view = run(backend, job, tmp_path)
    assert view.phase == "Succeeded"
    assert replica(view, "worker-0").restarts >= 2


@pytest.mark.parametrize(
    ("first_exit", "phase", "restarts"),
    [
        pytest.param(137, "Succeeded", 1, id="137-killed-is-retried"),
        pytest.param(3, "Failed", 0, id="3-is-permanent"),
    ],
)
def test_exit_code_policy_retries_only_signals(
    backend: LocalBackend, tmp_path: Path, first_exit: int, phase: str, restarts: int
) -> None:
    worker = (
        COUNT_RUN.format(name="runs")
        + f"if runs == 1: raise SystemExit({first_exit})\nopen('worker-ok', 'w').close()\n"
    )
    job = pytorch_job(
        "exitcode",
        master=WAIT_FOR.format(path="worker-ok"),
        worker=worker,
        restart_policy="ExitCode",
    )
    view = run(backend, job, tmp_path)
    assert view.phase == phase
    assert replica(view, "worker-0").restarts == restarts
    if phase == "Failed":
        assert f"exited with code {first_exit}" in failed_condition(view)[1]


def test_interrupt_stops_the_job_and_records_why(backend: LocalBackend, tmp_path: Path) -> None:
    job = pytorch_job("stopme", master=SLEEPER, worker=SLEEPER, workers=2)
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    eventually(lambda: log_text(backend, "stopme").count("up") == 3, what="all replicas up")
    running = backend.get("stopme")
    assert all(r.phase == "Running" and r.pid for r in running.replicas)
    pids = [r.pid for r in running.replicas]
    view = backend.interrupt("stopme")
    assert failed_condition(view)[0] == "Interrupted"
    assert {r.phase for r in view.replicas} == {"Stopped"}
    assert all(not procinfo.group_members(pid) for pid in pids if pid)
    assert all(rs.active == 0 for rs in view.status.replica_statuses.values())


def test_delete_of_a_running_job_leaves_no_process_and_no_record(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("gone", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    eventually(lambda: log_text(backend, "gone").count("up") == 2, what="replicas up")
    pids = [r.pid for r in backend.get("gone").replicas]
    job_dir = Path(backend.store.job("default", "gone").job_dir)
    backend.delete("gone")
    assert all(pid and not procinfo.group_members(pid) for pid in pids)
    with pytest.raises(JobNotFound):
        backend.get("gone")
    assert not job_dir.exists()


def test_history_survives_a_new_backend(backend: LocalBackend, tmp_path: Path) -> None:
    run(backend, pytorch_job("history", master="print('remember me')"), tmp_path)
    later = LocalBackend(backend.state_dir)
    view = later.get("history")
    assert view.phase == "Succeeded"
    assert log_text(later, "history") == "remember me"
    assert [v.name for v in later.list()] == ["history"]
    assert any(e.reason == "PyTorchJobSucceeded" for e in later.events("history"))


def test_a_job_is_found_by_kind_and_name_as_on_kubernetes(
    backend: LocalBackend, tmp_path: Path
) -> None:
    run(backend, pytorch_job("named", master="print('found')"), tmp_path)
    for name in ("pytorchjob/named", "PyTorchJobs/named", "pytorchjobs.kubemill.dev/named"):
        assert backend.get(name).name == "named", name
    assert log_text(backend, "pytorchjob/named") == "found"
    with pytest.raises(JobNotFound, match=r"no TFJob 'named' .*\(its kind is PyTorchJob\)"):
        backend.get("tfjob/named")
    with pytest.raises(SubstrateError, match=r"cannot tell which job 'cron/named' means"):
        backend.events("cron/named")
    backend.delete("pytorchjob/named")
    assert backend.list() == []


def test_ports_taken_after_submit_are_moved_before_the_first_start(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from kubemill.substrates.local.supervisor import Supervisor

    # Record the job without starting it, take the master's port, then supervise.
    monkeypatch.setattr(LocalBackend, "_start_detached", lambda self, uid, job_dir: None)
    job = pytorch_job("moved", master=PRINT_ENV, worker=None)
    view = backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    taken = int(view.replicas[0].address.rsplit(":", 1)[1])
    rec = backend.store.job("default", "moved")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        assert procinfo.identify(os.getpid()) is not None
        backend.store.claim_supervisor(rec.uid, procinfo.identify(os.getpid()), mode="foreground")  # type: ignore[arg-type]
        Supervisor(backend.store, rec.uid).run()
    view = backend.get("moved")
    assert view.phase == "Succeeded"
    port = int(json.loads(log_text(backend, "moved"))["MASTER_PORT"])
    assert port != taken
    assert view.replicas[0].address == f"127.0.0.1:{port}"
    assert any(e.reason == "PortsReallocated" for e in backend.events("moved"))


def test_ttl_after_finished_deletes_the_job(backend: LocalBackend, tmp_path: Path) -> None:
    job = pytorch_job("ttl", master="pass", run_policy={"ttlSecondsAfterFinished": 0})
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))

    def deleted() -> bool:
        try:
            backend.get("ttl")
        except JobNotFound:
            return True
        return False

    eventually(deleted, what="the TTL to delete the job")


def test_a_supervisor_ended_while_its_ttl_removes_the_job_leaves_it_for_the_next_read(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a killed delete's (test_local_detached): the supervisor marks the job, stops its
    # replicas, removes its files, then its record. Ended before its record went (here the
    # directory's removal raises, as a SIGKILL would end it there), the job stays marked
    # for deletion, unlisted, and the next read finishes it: never a directory no record
    # names, which nothing would ever remove.
    from kubemill.substrates.local.supervisor import loop

    def ended_while_removing(job_dir: str) -> None:
        raise OSError("the supervisor ended here")

    monkeypatch.setattr(loop, "remove_job_directory", ended_while_removing)
    job = pytorch_job("ttlcut", master="pass", run_policy={"ttlSecondsAfterFinished": 0})
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    rec = backend.store.job("default", "ttlcut")
    for thread in threading.enumerate():
        if thread.name == f"kubemill-supervisor-{rec.uid[:8]}":
            thread.join(60)
    monkeypatch.undo()
    left = backend.store.job_by_uid(rec.uid)
    assert left is not None and left.request == "delete"
    assert Path(rec.job_dir).exists()

    assert backend.list() == []
    with pytest.raises(JobNotFound):
        backend.get("ttlcut")
    assert not Path(rec.job_dir).exists()


def test_an_executable_gone_at_start_fails_the_replica_with_a_clear_reason(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubemill.substrates.local.prepared import prepare_recorded
    from kubemill.substrates.local.supervisor import Supervisor

    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o755)
    monkeypatch.setattr(LocalBackend, "_start_detached", lambda self, uid, job_dir: None)
    job = pytorch_job("vanished", master=container(None, command=["./train.sh"]))
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    rec = backend.store.job("default", "vanished")
    prepared = prepare_recorded(rec, backend.store.ports(rec.uid))
    script.unlink()  # passes every check, missing when the process starts
    me = procinfo.identify(os.getpid())
    assert me is not None and backend.store.claim_supervisor(rec.uid, me, mode="foreground")
    Supervisor(backend.store, rec.uid, prepared=prepared).run()
    view = backend.get("vanished")
    master = replica(view, "master-0")
    assert (view.phase, master.phase, master.exit_code) == ("Failed", "Failed", 127)
    assert master.reason == "StartError"
    assert "vanished-master-0" in master.message and "./train.sh" in master.message
    assert "exited with code 127" in failed_condition(view)[1]
    assert any(e.reason == "FailedStart" for e in backend.events("vanished"))


def test_a_detached_supervisor_checks_the_job_again_before_starting(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o755)
    job = pytorch_job("recheck", master=container(None, command=["./train.sh"]))
    start_detached = LocalBackend._start_detached
    monkeypatch.setattr(LocalBackend, "_start_detached", lambda self, uid, job_dir: None)
    backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path)))
    script.unlink()
    rec = backend.store.job("default", "recheck")
    start_detached(backend, rec.uid, Path(rec.job_dir))
    view = backend.wait("recheck", timeout=120)
    reason, message = failed_condition(view)
    assert reason == "NotRunnableLocally"
    assert "./train.sh" in message and "does not exist" in message
    assert view.replicas[0].phase == "Pending"


def test_sidecars_do_not_run_locally_and_an_event_says_so(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("sidecar", master="print('main')")
    pod = job.replica_specs["Master"].template.spec
    pod.containers.append(pod.containers[0].model_copy(update={"name": "logger"}))
    view = run(backend, job, tmp_path)
    assert view.phase == "Succeeded"
    assert log_text(backend, "sidecar") == "main"
    warnings = [e.message for e in backend.events("sidecar") if e.reason == "ContainersIgnored"]
    assert warnings == [
        "Master: only container 'pytorch' runs on the local substrate; not run: logger"
    ]


def test_a_listing_expires_jobs_past_their_ttl_and_shows_each_job_its_own_replicas(
    backend: LocalBackend, tmp_path: Path
) -> None:
    options = SubmitOptions(detach=False, base_dir=str(tmp_path))
    backend.submit(pytorch_job("kept", master="pass", worker="pass", workers=2), options)
    expiring = pytorch_job("gone", master="pass", run_policy={"ttlSecondsAfterFinished": 1})
    backend.submit(expiring, options)
    lasting = pytorch_job("later", master="pass", run_policy={"ttlSecondsAfterFinished": 3600})
    backend.submit(lasting, options)
    # Not a wait on "gone": a wait reads the job, and a read past its TTL deletes it (under
    # load, a second may pass between its end and the wait's read).
    for name in ("kept", "later"):
        assert backend.wait(name, timeout=60).phase == "Succeeded"

    # Nothing else reads the jobs: the listing is what lets the core delete the one past
    # its TTL (only a finished job expires), and it lists the others with their own replicas.
    eventually(
        lambda: [v.name for v in backend.list()] == ["kept", "later"],
        what="a listing to delete the job past its TTL",
    )
    views = backend.list()
    assert [[r.name for r in v.replicas] for v in views] == [
        ["kept-master-0", "kept-worker-0", "kept-worker-1"],
        ["later-master-0"],
    ]
    assert all(v.phase == "Succeeded" for v in views)
    with pytest.raises(JobNotFound):
        backend.get("gone")
