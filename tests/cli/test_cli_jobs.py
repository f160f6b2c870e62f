"""The real ``kubemill`` console script running real jobs on the local substrate.

Each test runs tiny ``python -c`` replicas of a PyTorchJob (no engine needed) in a
private state directory, and asserts what a user sees: exit codes, the outcome line,
log prefixes, the ``get``/``describe`` tables, and that no process is left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cli_support import Kubemill, conditions, lines, pytorch_job, write_manifest

from support.waiting import eventually

WAIT = 60.0
"""Upper bound for a job state to be reached; the tests poll, they never time work."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited; only its parent has not reaped it yet.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _replica_pids(kubemill: Kubemill, name: str) -> list[int]:
    """PIDs of the job's replicas, read from ``describe`` (the PID column)."""
    out = kubemill("describe", name, check=True).stdout
    pids = []
    in_replicas = False
    for line in out.splitlines():
        if line.startswith("Replicas:"):
            in_replicas = True
            continue
        if in_replicas and line and not line.startswith(" "):
            break
        fields = line.split()
        if in_replicas and fields and fields[0].startswith(f"{name}-") and fields[5].isdigit():
            pids.append(int(fields[5]))
    return pids


def test_run_success_follows_logs_and_exits_zero(kubemill: Kubemill, tmp_path: Path) -> None:
    # The job succeeds when the master does (and then stops the worker), so the master
    # waits for the worker's marker file: both lines are then in the log for sure.
    manifest = write_manifest(
        tmp_path,
        pytorch_job(
            "hello",
            master=(
                "import os, pathlib, time\n"
                "while not pathlib.Path('worker-done').exists(): time.sleep(0.05)\n"
                "print('master rank', os.environ['RANK'])"
            ),
            worker=(
                "import os, pathlib\n"
                "print('worker rank', os.environ['RANK'], flush=True)\n"
                "pathlib.Path('worker-done').touch()"
            ),
        ),
    )
    done = kubemill("run", str(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "master-0 | master rank 0" in out
    assert "worker-0 | worker rank 1" in out
    last = lines(out)[-2:]
    assert "PyTorchJob hello Succeeded" in last[0]
    assert last[1].startswith("Next: ")
    # The final replica table, laid out as `get` lays out its jobs: columns aligned.
    header, master, worker = lines(out)[-5:-2]
    assert header.split() == "REPLICA TYPE INDEX PHASE RESTARTS EXIT CODE ADDRESS".split()
    assert master.split()[:6] == ["master-0", "Master", "0", "Succeeded", "0", "0"]
    assert worker.split()[:2] == ["worker-0", "Worker"]
    assert header.index("PHASE") == master.index("Succeeded") == worker.index(worker.split()[3])
    assert header.index("ADDRESS") == master.index("127.0.0.1:")
    for verb in ("logs", "describe", "delete"):
        assert f"kubemill {verb} hello" in last[1]
    job = kubemill.job("hello")
    assert conditions(job)["Succeeded"]["status"] == "True"


def test_run_failure_names_the_failed_replica(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        pytorch_job(
            "broken",
            master="import time; time.sleep(30)",
            worker="import sys; print('giving up'); sys.exit(3)",
        ),
    )
    done = kubemill("run", str(manifest))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "worker-0 | giving up" in done.stdout
    outcome = lines(done.stdout)[-2]
    assert "PyTorchJob broken Failed" in outcome
    assert "worker-0 exited with code 3" in outcome
    assert "kubemill logs broken --replica worker-0" in lines(done.stdout)[-1]
    job = kubemill.job("broken")
    assert conditions(job)["Failed"]["status"] == "True"
    # The master was stopped with the job: nothing of it keeps running.
    for pid in _replica_pids(kubemill, "broken"):
        assert not _alive(pid)


def test_detach_then_get_logs_describe_delete(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        pytorch_job(
            "bg",
            master="import time; print('master up', flush=True); time.sleep(60)",
            worker="import time; print('worker up', flush=True); time.sleep(60)",
            workers=2,
        ),
    )
    done = kubemill("run", "--detach", str(manifest), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PyTorchJob bg submitted" in done.stdout
    assert "kubemill logs bg -f" in done.stdout
    assert "kubemill delete bg" in done.stdout

    def all_running() -> bool:
        table = kubemill("get", check=True).stdout
        row = [line.split() for line in table.splitlines() if line.startswith("bg ")]
        return bool(row) and row[0][2] == "Running" and row[0][3] == "3/3"

    eventually(all_running, "3/3 replicas running", timeout=WAIT, interval=0.2)
    header = lines(kubemill("get", check=True).stdout)[0].split()
    assert header == ["NAME", "KIND", "STATE", "REPLICAS", "RESTARTS", "AGE"]

    def logged() -> bool:
        out = kubemill("logs", "bg", check=True).stdout
        return "master-0 | master up" in out and "worker-1 | worker up" in out

    eventually(logged, "every replica's first line", timeout=WAIT, interval=0.2)
    for replica in ("worker-1", "bg-worker-1", "Worker-1"):
        one = kubemill("logs", "bg", "--replica", replica, check=True).stdout
        assert one.splitlines() == ["worker up"], replica
    unknown = kubemill("logs", "bg", "--replica", "worker-7")
    assert unknown.returncode == 1
    assert "no replica 'worker-7'" in unknown.stderr
    assert "worker-1" in unknown.stderr

    described = kubemill("describe", "bg", check=True).stdout
    for heading in ("Conditions:", "Replica Statuses:", "Replicas:", "Events:"):
        assert heading in described
    assert "bg-worker-1" in described
    pids = _replica_pids(kubemill, "bg")
    assert len(pids) == 3
    assert all(_alive(pid) for pid in pids)

    deleted = kubemill("delete", "bg", check=True)
    assert "bg deleted" in deleted.stdout
    eventually(
        lambda: not any(_alive(pid) for pid in pids), "replica processes to end", timeout=WAIT
    )
    gone = kubemill("get", "bg")
    assert gone.returncode == 1
    assert "Traceback" not in gone.stderr
    assert "bg" in gone.stderr and "kubemill get" in gone.stderr


def test_restart_is_counted_in_get_and_describe(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        pytorch_job(
            "again",
            restart_policy="OnFailure",
            master=(
                "import pathlib, time\n"
                "while not pathlib.Path('worker-ok').exists(): time.sleep(0.05)\n"
                "print('master done')"
            ),
            worker=(
                "import pathlib, sys\n"
                "if not pathlib.Path('tried').exists():\n"
                "    pathlib.Path('tried').touch()\n"
                "    print('first try fails', flush=True)\n"
                "    sys.exit(1)\n"
                "print('second try works', flush=True)\n"
                "pathlib.Path('worker-ok').touch()"
            ),
        ),
    )
    done = kubemill("run", str(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "worker-0 | first try fails" in done.stdout
    assert "worker-0 | second try works" in done.stdout
    row = next(
        line.split()
        for line in kubemill("get", check=True).stdout.splitlines()
        if line.startswith("again ")
    )
    assert row[1:5] == ["PyTorchJob", "Succeeded", "2/2", "1"]
    replicas = kubemill("describe", "again", check=True).stdout
    worker_row = next(line.split() for line in replicas.splitlines() if "again-worker-0" in line)
    assert worker_row[1:3] == ["Succeeded", "1"]


def test_logs_follow_and_get_as_yaml(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        pytorch_job(
            "follow",
            master=(
                "import time\n"
                "for i in range(3):\n"
                "    print('step', i, flush=True)\n"
                "    time.sleep(0.3)"
            ),
        ),
    )
    kubemill("run", "-d", str(manifest), check=True)
    followed = kubemill("logs", "follow", "-f", check=True)
    # --follow returns once the job has ended, with every line.
    assert followed.stdout.splitlines() == [f"master-0 | step {i}" for i in range(3)]
    as_yaml = yaml.safe_load(kubemill("get", "follow", "-o", "yaml", check=True).stdout)
    assert as_yaml["kind"] == "PyTorchJob"
    assert as_yaml["metadata"]["name"] == "follow"
    assert as_yaml["metadata"]["creationTimestamp"]
    types = {c["type"]: c["status"] for c in as_yaml["status"]["conditions"]}
    assert types["Succeeded"] == "True"
    listed = yaml.safe_load(kubemill("get", "-o", "yaml", check=True).stdout)
    assert listed["kind"] == "List"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["follow"]


def test_run_same_name_twice_is_a_clear_error(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, pytorch_job("twice", master="import time; time.sleep(60)"))
    kubemill("run", "--detach", str(manifest), check=True)
    again = kubemill("run", "--detach", str(manifest))
    assert again.returncode == 1
    assert len(lines(again.stderr)) == 1
    assert "twice" in again.stderr and "kubemill delete" in again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["get", "nope"], id="get"),
        pytest.param(["describe", "nope"], id="describe"),
        pytest.param(["logs", "nope"], id="logs"),
        pytest.param(["delete", "nope"], id="delete"),
    ],
)
def test_missing_job_is_one_red_line(kubemill: Kubemill, argv: list[str]) -> None:
    done = kubemill(*argv)
    assert done.returncode == 1
    assert done.stdout == ""
    assert len(lines(done.stderr)) == 1
    assert "nope" in done.stderr
    assert "Traceback" not in done.stderr


def _two_sleepers(directory: Path, name: str) -> Path:
    """A job whose master and worker say they are up, then run until stopped."""
    return write_manifest(
        directory,
        pytorch_job(
            name,
            master="import time; print('master up', flush=True); time.sleep(120)",
            worker="import time; print('worker up', flush=True); time.sleep(120)",
        ),
    )


@contextlib.contextmanager
def _foreground_run(kubemill: Kubemill, manifest: Path) -> Iterator[subprocess.Popen[str]]:
    """`kubemill run MANIFEST` in the foreground; killed on the way out if still running."""
    process = kubemill.popen("run", str(manifest))
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize(
    ("signum", "code"),
    [
        pytest.param(signal.SIGINT, 130, id="ctrl-c"),
        pytest.param(signal.SIGTERM, 143, id="sigterm"),
    ],
)
def test_signal_stops_the_job_and_records_interrupted(
    kubemill: Kubemill, tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    with _foreground_run(kubemill, _two_sleepers(tmp_path, "stopme")) as process:

        def both_running() -> bool:
            out = kubemill("get", "stopme")
            return out.returncode == 0 and " 2/2 " in out.stdout and "Running" in out.stdout

        eventually(both_running, "both replicas running", timeout=WAIT, interval=0.2)
        pids = _replica_pids(kubemill, "stopme")
        assert len(pids) == 2
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=WAIT)
    assert process.returncode == code, stdout + stderr
    assert "PyTorchJob stopme Failed (Interrupted)" in stdout
    failed = conditions(kubemill.job("stopme"))["Failed"]
    assert failed["status"] == "True"
    assert failed["reason"] == "Interrupted"
    # The stop annotation says what stopped it, and the core's message repeats it.
    why = "Ctrl-C in kubemill run" if signum == signal.SIGINT else "SIGTERM to kubemill run"
    assert why in failed["message"]
    eventually(
        lambda: not any(_alive(pid) for pid in pids), "replica processes to end", timeout=WAIT
    )


def test_a_killed_foreground_run_leaves_the_truth_the_logs_and_no_process(
    kubemill: Kubemill, tmp_path: Path
) -> None:
    # In the foreground the CLI process is the supervisor; SIGKILL gives it no chance to
    # record anything, so what `get` says afterwards comes from the next reader.
    with _foreground_run(kubemill, _two_sleepers(tmp_path, "killed")) as process:

        def both_logged() -> bool:
            out = kubemill("logs", "killed")
            return "master up" in out.stdout and "worker up" in out.stdout

        eventually(both_logged, "both replicas to log", timeout=WAIT, interval=0.2)
        pids = _replica_pids(kubemill, "killed")
        assert len(pids) == 2
        process.kill()
        process.communicate(timeout=WAIT)
    got = kubemill("get", "killed", check=True).stdout
    assert "Running" not in got and "Failed" in got, got
    assert conditions(kubemill.job("killed"))["Failed"]["reason"] == "SupervisorLost"
    logs = kubemill("logs", "killed", check=True).stdout
    assert "master up" in logs and "worker up" in logs
    eventually(
        lambda: not any(_alive(pid) for pid in pids), "replica processes to end", timeout=WAIT
    )
    kubemill("delete", "killed", check=True)
    assert kubemill("get", "killed").returncode != 0


def test_state_dir_flag_selects_the_store(kubemill: Kubemill, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    manifest = write_manifest(tmp_path, pytorch_job("where", master="print('here')"))
    done = kubemill("--state-dir", str(other), "run", str(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    # The next commands repeat the flag, so they find the job.
    assert f"kubemill --state-dir {other} logs where" in done.stdout
    assert kubemill("get", "where").returncode == 1
    listed = kubemill("--state-dir", str(other), "get", check=True).stdout
    assert "where" in listed and "Succeeded" in listed
    kubemill("--state-dir", str(other), "delete", "where", check=True)


def test_namespaces_are_kept_apart(kubemill: Kubemill, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, pytorch_job("same", master="print('hi')"))
    kubemill("run", str(manifest), check=True)
    done = kubemill("-n", "team", "run", str(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kubemill --namespace team logs same" in done.stdout
    everywhere = [line.split() for line in lines(kubemill("get", check=True).stdout)]
    assert everywhere[0][:2] == ["NAMESPACE", "NAME"]
    assert sorted(row[:2] for row in everywhere[1:]) == [["default", "same"], ["team", "same"]]
    team = [line.split() for line in lines(kubemill("get", "-n", "team", check=True).stdout)]
    assert team[0][0] == "NAME"
    assert [row[0] for row in team[1:]] == ["same"]
    kubemill("delete", "same", "-n", "team", check=True)
    assert kubemill("get", "same", "-n", "team").returncode == 1
    assert kubemill("get", "same").returncode == 0


def test_subprocess_kubemill_is_the_console_script() -> None:
    from cli_support import KUBEMILL

    done = subprocess.run([str(KUBEMILL), "version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("kubemill ")


def test_suspend_resume_and_interrupt_a_detached_job(kubemill: Kubemill, tmp_path: Path) -> None:
    kubemill("run", "--detach", str(_two_sleepers(tmp_path, "napper")), check=True)

    def shows(*words: str) -> bool:
        out = kubemill("get", "napper")
        return out.returncode == 0 and all(w in out.stdout for w in words)

    eventually(
        lambda: shows(" 2/2 ", "Running"), "both replicas running", timeout=WAIT, interval=0.2
    )
    pids = _replica_pids(kubemill, "napper")
    assert len(pids) == 2

    suspended = kubemill("suspend", "napper", check=True)
    assert "napper suspended" in suspended.stdout
    assert "kubemill resume napper" in suspended.stdout
    eventually(
        lambda: shows("Suspended", " 0/2 "), "get to show Suspended", timeout=WAIT, interval=0.2
    )
    eventually(
        lambda: not any(_alive(pid) for pid in pids), "replica processes to end", timeout=WAIT
    )
    assert conditions(kubemill.job("napper"))["Suspended"]["status"] == "True"

    resumed = kubemill("resume", "napper", check=True)
    assert "napper resumed" in resumed.stdout
    eventually(
        lambda: shows(" 2/2 ", "Running"), "both replicas running again", timeout=WAIT, interval=0.2
    )
    again = _replica_pids(kubemill, "napper")
    assert len(again) == 2 and set(again).isdisjoint(pids)
    assert conditions(kubemill.job("napper"))["Suspended"]["status"] == "False"

    stopped = kubemill("interrupt", "napper", check=True)
    assert "napper Failed (Interrupted)" in stopped.stdout
    failed = conditions(kubemill.job("napper"))["Failed"]
    assert failed["reason"] == "Interrupted" and "kubemill interrupt" in failed["message"]
    eventually(
        lambda: not any(_alive(pid) for pid in again), "replica processes to end", timeout=WAIT
    )


@pytest.mark.parametrize("verb", ["suspend", "resume"])
def test_suspend_or_resume_of_a_finished_job_is_one_red_line(
    kubemill: Kubemill, tmp_path: Path, verb: str
) -> None:
    manifest = write_manifest(tmp_path, pytorch_job("finished", master="print('done')"))
    kubemill("run", str(manifest), check=True)
    done = kubemill(verb, "finished")
    assert done.returncode == 1
    assert len(lines(done.stderr)) == 1
    assert "already finished (Succeeded)" in done.stderr and "kubemill delete" in done.stderr
