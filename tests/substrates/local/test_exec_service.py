"""The supervisor's exec service: ``kubectl exec`` into a local replica (issue 8, point 4).

A ``ToyHosts`` job (``tests/kinds/toy_host_engine.py``, a plugin shaped like MPI) has Host
replicas with no command, which its engine declares hosts, and a Client started once the
hosts are ready. Commands reach a host through the job's unix socket
(``KUBEMILL_EXEC_SOCKET``), with the protocol the MPI agent speaks: one ``send_fds``
message with a JSON line and the caller's stdin, stdout and stderr, one JSON line back.
The client here is a few lines in the test, in a replica or in the test process itself.
Everything is real: processes, sockets, the supervisor (in-process or detached).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from exec_support import CLIENT_FUNCTION, exec_in, register_toy_hosts, submit
from local_support import log_text, pytorch_job
from toy_host_engine import host_token, manifest

from kubemill.api import ManifestError
from kubemill.substrates.base import JobView, SubmitOptions
from kubemill.substrates.local import LocalBackend, procinfo
from kubemill.substrates.local.exec_service import BadRequest, ExecRequest, parse_request, receive
from kubemill.substrates.local.launch import EXEC_SOCKET_ENV, exec_socket_path
from support.waiting import eventually


@pytest.fixture
def toy_hosts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from register_toy_hosts(monkeypatch)


SHOW = (
    'printf "seen token=%s tmpdir=%s vader=%s cwd=%s mark=%s host=%s\\n" "$TOY_HOST_TOKEN"'
    ' "$TMPDIR" "$OMPI_MCA_btl_vader_backing_directory" "$(pwd)" "$KUBEMILL_REPLICA_ID"'
    ' "$HOSTNAME"; echo "on stderr" >&2; exit 7'
)
"""What a client runs in each host: the host's own values, both streams, an exit code."""

CLIENT = (
    CLIENT_FUNCTION
    + """
import sys
job = os.environ["HOSTNAME"][: -len("-client-0")]
for index in range(2):
    answer = exec_in(f"{job}-host-{index}", ["/bin/sh", "-c", sys.argv[1]])
    print("answer", index, json.dumps(answer), flush=True)
print("unknown", json.dumps(exec_in(f"{job}-host-9", ["true"])), flush=True)
"""
)


def socket_of(backend: LocalBackend, name: str) -> str:
    rec = backend.store.job("default", name)
    return exec_socket_path(rec.job_dir, rec.uid)


def job_dir(backend: LocalBackend, name: str) -> Path:
    return Path(backend.store.job("default", name).job_dir)


@pytest.mark.parametrize("detach", [False, True], ids=["in-process", "detached-supervisor"])
def test_a_replica_execs_into_host_replicas_that_have_no_command(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    (tmp_path / "hostdir").mkdir()
    doc = manifest("hosts", client=["python", "-c", CLIENT, SHOW])
    # The seed's worker: command [""] (upstream images run sshd). Its own working dir,
    # so the command is seen to run in the host's, not the client's.
    host = doc["spec"]["toyHostReplicaSpecs"]["Host"]["template"]["spec"]["containers"][0]
    host.update(command=[""], workingDir="hostdir")
    submit(backend, doc, tmp_path, detach=detach)
    done = backend.wait("hosts", timeout=120)
    assert done.phase == "Succeeded", done.status
    text = log_text(backend, "hosts", "hosts-client-0")
    tmp_root = job_dir(backend, "hosts") / "tmp"
    uid = backend.store.job("default", "hosts").uid
    for index in range(2):
        name = f"hosts-host-{index}"
        # The host's env (the framework's variable only it has), its working dir, its
        # private TMPDIR, its mark and its name; the output reached the client's stdout.
        assert (
            f"seen token={host_token('hosts', index)} tmpdir={tmp_root / name}"
            f" vader={tmp_root / name} cwd={tmp_path / 'hostdir'} mark={uid}/{name} host={name}"
        ) in text
        assert f'answer {index} {{"exitCode": 7}}' in text
        assert (tmp_root / name).stat().st_mode & 0o777 == 0o700
    assert text.count("on stderr") == 2
    unknown = json.loads(text.split("unknown ", 1)[1].splitlines()[0])
    assert unknown["exitCode"] == 126
    assert "has no replica 'hosts-host-9'" in unknown["error"]
    assert "hosts-client-0, hosts-host-0, hosts-host-1" in unknown["error"]
    # Hosts are stopped at the job's end, and each exec is an event.
    hosts = [r for r in done.replicas if r.replica_type == "Host"]
    assert [r.phase for r in hosts] == ["Stopped"] * 2
    execs = [e.message for e in backend.events("hosts") if e.reason == "Exec"]
    assert len(execs) == 2 and all("exec /bin/sh -c" in m for m in execs)
    # The socket is gone with the supervisor; the private directories stay until delete.
    assert not Path(socket_of(backend, "hosts")).exists()
    backend.delete("hosts")
    assert not tmp_root.exists()


def test_the_container_the_plan_picks_runs_whatever_its_name(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    # As for MPI, whose upstream names no container: the first one of each template runs.
    doc = manifest("first", client=["python", "-c", "print('the client ran', flush=True)"])
    for rtype in ("Client", "Host"):
        pod = doc["spec"]["toyHostReplicaSpecs"][rtype]["template"]["spec"]
        first = {**pod["containers"][0], "name": f"{rtype.lower()}-main", "image": "another"}
        pod["containers"] = [first, {"name": "toy", "image": "python", "command": ["false"]}]
    submit(backend, doc, tmp_path, detach=False)
    assert backend.wait("first", timeout=120).phase == "Succeeded"
    assert "the client ran" in log_text(backend, "first", "first-client-0")
    warnings = sorted(e.message for e in backend.events("first") if e.reason == "ContainersIgnored")
    assert warnings == [
        f"{rtype}: only container '{rtype.lower()}-main' runs on the local substrate; not run: toy"
        for rtype in ("Client", "Host")
    ]


def wait_running(backend: LocalBackend, name: str) -> JobView:
    """The job once its client (started after every host is ready) runs."""
    return eventually(
        lambda: (
            (v := backend.get(name)).replicas
            and all(r.phase == "Running" for r in v.replicas)
            and v
        ),
        what=f"every replica of {name} running",
    )


IDLE_CLIENT = ["python", "-c", "import time; time.sleep(300)"]


def test_the_caller_gets_both_streams_and_the_exit_code(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    submit(backend, manifest("streams", client=IDLE_CLIENT), tmp_path, detach=False)
    view = wait_running(backend, "streams")
    assert {r.name: r.phase for r in view.replicas}["streams-host-1"] == "Running"
    path = socket_of(backend, "streams")
    assert Path(path).stat().st_mode & 0o777 == 0o600
    assert Path(path).parent.stat().st_mode & 0o777 == 0o700
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    os.write(in_w, b"from stdin\n")
    os.close(in_w)
    code = 'read line; echo "out:$line:$TOY_HOST_TOKEN"; echo "err:$TOY_ROLE" >&2; exit 5'
    answer = exec_in("streams-host-1", ["/bin/sh", "-c", code], fds=(in_r, out_w, err_w), path=path)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    with os.fdopen(out_r, "rb") as out, os.fdopen(err_r, "rb") as err:
        assert out.read() == f"out:from stdin:{host_token('streams', 1)}\n".encode()
        assert err.read() == b"err:host\n"
    assert answer == {"exitCode": 5}
    # A signal's death is 128 + the signal, as a container runtime reports it.
    killed = exec_in("streams-host-0", ["/bin/sh", "-c", "kill -9 $$"], path=path)
    assert killed == {"exitCode": 128 + signal.SIGKILL}


def test_bad_requests_are_refused_with_a_reason(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    submit(backend, manifest("refuse", client=IDLE_CLIENT), tmp_path, detach=False)
    wait_running(backend, "refuse")
    path = socket_of(backend, "refuse")

    def raw(payload: bytes, fds: list[int]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            socket.send_fds(sock, [payload], fds)
            answer: dict[str, Any] = json.loads(sock.makefile("rb").readline())
            return answer

    std = [0, 1, 2]
    cases = {
        b"not json\n": "not a JSON line",
        b'["a"]\n': "must be a JSON object",
        b'{"pod": "refuse-host-0"}\n': "command: expected a non-empty list",
        b'{"pod": "refuse-host-0", "command": []}\n': "command: expected a non-empty list",
        b'{"pod": "", "command": ["true"]}\n': "pod: expected the name",
        b'{"pod": "refuse-host-0", "command": ["true"], "tty": true}\n': "unknown fields",
    }
    for payload, why in cases.items():
        answer = raw(payload, std)
        assert answer["exitCode"] == 126 and why in answer["error"], (payload, answer)
    one = raw(b'{"pod": "refuse-host-0", "command": ["true"]}\n', [1])
    assert "expected 3 file descriptors" in one["error"]
    missing = exec_in("refuse-host-0", ["no-such-program-here"], path=path)
    assert missing["exitCode"] == 127 and "no-such-program-here" in missing["error"]
    # A client that shuts down its sending side still gets its answer.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        line = json.dumps({"pod": "refuse-host-0", "command": ["sh", "-c", "sleep 0.3; exit 4"]})
        socket.send_fds(sock, [line.encode() + b"\n"], std)
        sock.shutdown(socket.SHUT_WR)
        assert json.loads(sock.makefile("rb").readline()) == {"exitCode": 4}


SLEEP_AND_TELL = (
    "setsid sleep 301 & echo $$ $! > {pidfile}.tmp && mv {pidfile}.tmp {pidfile} && wait"
)
"""An exec'd shell that starts a child in a session of its own (as orted starts ranks),
then tells both pids."""


def started(pidfile: Path) -> list[procinfo.ProcessId]:
    text = eventually(lambda: pidfile.exists() and pidfile.read_text().strip(), what=pidfile)
    found = [procinfo.identify(int(pid)) for pid in text.split()]
    assert len(found) == 2 and all(p is not None and procinfo.is_alive(p) for p in found)
    return [p for p in found if p is not None]


def gone(processes: list[procinfo.ProcessId]) -> bool:
    return not any(procinfo.is_alive(p) for p in processes)


CALLER = CLIENT_FUNCTION + "import sys; print(json.dumps(exec_in(sys.argv[1], sys.argv[2:])))"
"""A client program: ``CALLER <pod> <command...>``; prints the answer."""


def call(path: str, pod: str, pidfile: Path) -> subprocess.Popen[bytes]:
    """A client process running SLEEP_AND_TELL in ``pod``."""
    command = ["/bin/sh", "-c", SLEEP_AND_TELL.format(pidfile=pidfile)]
    return subprocess.Popen(
        [sys.executable, "-c", CALLER, pod, *command],
        env={**os.environ, EXEC_SOCKET_ENV: path},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )


def test_a_killed_client_takes_its_process_with_it(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    submit(backend, manifest("agent", client=IDLE_CLIENT), tmp_path, detach=False)
    wait_running(backend, "agent")
    caller = call(socket_of(backend, "agent"), "agent-host-0", tmp_path / "exec.pid")
    try:
        processes = started(tmp_path / "exec.pid")
        caller.kill()  # as mpirun kills its agents
        caller.wait()
        # The shell, and the child it started in a session of its own.
        eventually(lambda: gone(processes), what="the exec'd processes to end with their client")
        # The host itself runs on.
        view = backend.get("agent")
        assert {r.name: r.phase for r in view.replicas}["agent-host-0"] == "Running"
    finally:
        if caller.poll() is None:
            caller.kill()
        caller.wait()


@pytest.mark.parametrize("detach", [False, True], ids=["in-process", "detached-supervisor"])
def test_a_host_killed_mid_run_ends_what_was_exec_d_into_it_and_fails_the_job(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    submit(backend, manifest("ends", client=IDLE_CLIENT), tmp_path, detach=detach)
    view = wait_running(backend, "ends")
    path = socket_of(backend, "ends")
    callers = [call(path, f"ends-host-{i}", tmp_path / f"exec-{i}.pid") for i in range(2)]
    try:
        processes = [started(tmp_path / f"exec-{i}.pid") for i in range(2)]
        host0 = next(r for r in view.replicas if r.name == "ends-host-0")
        assert host0.pid is not None
        os.kill(host0.pid, signal.SIGTERM)  # not by kubemill: the host has failed
        # As a container's processes end with it; the caller hears of the kill.
        eventually(lambda: gone(processes[0]), what="host-0's exec'd processes")
        out, _ = callers[0].communicate(timeout=60)
        assert json.loads(out) == {"exitCode": 128 + signal.SIGKILL}
        done = backend.wait("ends", timeout=60)
        assert done.phase == "Failed"
        failed = done.status.conditions[-1]
        assert "Host replica(s) failed: host-0 exited with code 143" in failed.message, failed
        # The job's end ends what was exec'd into the other host too.
        assert gone(processes[1])
        phases = {r.name: r.phase for r in done.replicas}
        assert (phases["ends-host-0"], phases["ends-host-1"]) == ("Failed", "Stopped")
    finally:
        for caller in callers:
            if caller.poll() is None:
                caller.kill()
            caller.wait()


def test_deleting_the_job_ends_everything_exec_d_into_it(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    submit(backend, manifest("gone", client=IDLE_CLIENT), tmp_path, detach=False)
    wait_running(backend, "gone")
    path = socket_of(backend, "gone")
    caller = call(path, "gone-host-1", tmp_path / "exec.pid")
    try:
        processes = started(tmp_path / "exec.pid")
        backend.delete("gone")
        assert gone(processes)
        assert not Path(path).exists()
        out, _ = caller.communicate(timeout=60)
        assert json.loads(out)["exitCode"] in (128 + signal.SIGTERM, 128 + signal.SIGKILL)
    finally:
        if caller.poll() is None:
            caller.kill()
        caller.wait()


def test_exec_d_processes_count_in_their_replicas_memory_and_cores(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    doc = manifest("limits", client=IDLE_CLIENT)
    host = doc["spec"]["toyHostReplicaSpecs"]["Host"]["template"]["spec"]["containers"][0]
    host["resources"] = {"limits": {"cpu": "1", "memory": "200Mi"}}
    submit(backend, doc, tmp_path, detach=False)
    view = wait_running(backend, "limits")
    path = socket_of(backend, "limits")
    host0 = next(r for r in view.replicas if r.name == "limits-host-0")
    assert host0.pid is not None
    cores = os.sched_getaffinity(host0.pid)
    out_r, out_w = os.pipe()
    show = "import os; print(sorted(os.sched_getaffinity(0)))"
    answer = exec_in("limits-host-0", ["python", "-c", show], fds=(0, out_w, 2), path=path)
    os.close(out_w)
    with os.fdopen(out_r) as out:
        assert out.read().strip() == str(sorted(cores))
    assert answer == {"exitCode": 0}
    # 400 MB held by an exec'd process: the host's processes together pass its limit.
    hog = "b = bytearray(400 * 2**20); import time; time.sleep(300)"
    answer = exec_in("limits-host-0", ["python", "-c", hog], path=path)
    assert answer == {"exitCode": 128 + signal.SIGKILL}
    done = backend.wait("limits", timeout=60)
    host0 = next(r for r in done.replicas if r.name == "limits-host-0")
    assert (host0.reason, host0.exit_code) == ("OOMKilled", 137)


def test_only_host_types_may_have_no_command(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    doc = manifest("nocmd", client=[""])
    with pytest.raises(ManifestError) as caught:
        submit(backend, doc, tmp_path, detach=False)
    [error] = caught.value.errors
    assert error.path == "spec.toyHostReplicaSpecs.Client.template.spec.containers[0].command"
    assert "has an empty `command`" in error.message
    # Another kind's worker with the seed's command [""] is refused as before.
    job = pytorch_job(
        "plain", master="pass", worker={"name": "pytorch", "image": "x", "command": [""]}
    )
    with pytest.raises(ManifestError) as caught:
        backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    assert [e.path for e in caught.value.errors] == [
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].command"
    ]


TMP_REPORT = textwrap.dedent(
    """
    import os, tempfile
    print("tmp", os.environ["HOSTNAME"], os.environ["TMPDIR"], tempfile.gettempdir(),
          os.environ.get("OMPI_MCA_btl_vader_backing_directory", "unset"),
          oct(os.stat(os.environ["TMPDIR"]).st_mode & 0o777), flush=True)
    """
)


def test_every_replica_has_a_private_tmpdir_unless_the_manifest_sets_one(
    backend: LocalBackend, tmp_path: Path
) -> None:
    own = tmp_path / "mine"
    own.mkdir()
    worker = {
        "name": "pytorch",
        "image": "local-python",
        "command": ["python", "-c", TMP_REPORT],
        "env": [{"name": "TMPDIR", "value": str(own)}],
    }
    job = pytorch_job("tmps", master=TMP_REPORT, worker=worker)
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    assert backend.wait("tmps", timeout=120).phase == "Succeeded"
    tmp_root = job_dir(backend, "tmps") / "tmp"
    lines = {
        words[1]: words[2:]
        for line in log_text(backend, "tmps").splitlines()
        if (words := line.split())[0] == "tmp"
    }
    master = str(tmp_root / "tmps-master-0")
    # Not a host: no MPI backing directory (a launcher's mpirun would pass it on).
    assert lines["tmps-master-0"] == [master, master, "unset", "0o700"]
    # The manifest's TMPDIR wins.
    assert lines["tmps-worker-0"][:3] == [str(own), str(own), "unset"]


@pytest.mark.parametrize("runtime_dir", [True, False], ids=["XDG_RUNTIME_DIR", "tmp"])
def test_a_deep_state_directory_puts_the_socket_in_a_short_private_place(
    toy_hosts: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime_dir: bool
) -> None:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.delenv("TMPDIR", raising=False)
    # A short runtime directory of this user (tmp_path itself is too deep for one).
    runtime = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))
    if runtime_dir:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        expected = runtime / "kubemill"
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        expected = Path("/tmp") / f"kubemill-{os.getuid()}"
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    local = LocalBackend(deep / "state")
    try:
        submit(local, manifest("deep", client=IDLE_CLIENT), tmp_path, detach=False)
        wait_running(local, "deep")
        path = Path(socket_of(local, "deep"))
        uid = local.store.job("default", "deep").uid
        assert path == expected / uid / "exec.sock"
        assert len(os.fsencode(path)) <= 107 < len(os.fsencode(job_dir(local, "deep")))
        assert path.parent.stat().st_mode & 0o777 == 0o700
        assert exec_in("deep-host-0", ["true"], path=str(path)) == {"exitCode": 0}
        local.delete("deep")
        assert not path.parent.exists()
        # A supervisor killed outright cannot remove its socket: delete does.
        submit(local, manifest("killed", client=IDLE_CLIENT), tmp_path, detach=True)
        wait_running(local, "killed")
        path = Path(socket_of(local, "killed"))
        assert path.is_socket()
        supervisor = local.store.job("default", "killed").supervisor
        assert supervisor is not None
        procinfo.kill_process(supervisor)
        procinfo.wait_gone(supervisor, timeout=30)
        assert path.is_socket()
        local.delete("killed")
        assert not path.parent.exists()
    finally:
        for rec in local.store.jobs():
            local.delete(rec.name, rec.namespace)
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_user_cannot_reach_the_socket(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    submit(backend, manifest("private", client=IDLE_CLIENT), tmp_path, detach=False)
    wait_running(backend, "private")
    path = socket_of(backend, "private")
    probe = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    sys.exit(13)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe, path], check=False)
    assert result.returncode == 13


def test_a_request_must_arrive_whole_in_time_and_before_the_service_closes() -> None:
    client, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stop_r, stop_w = os.pipe()
    try:
        socket.send_fds(client, [b'{"pod": "a", '], [0, 1, 2])
        with pytest.raises(BadRequest, match=r"no whole message within 0\.2s"):
            receive(server, stop_fd=stop_r, timeout=0.2)
        os.write(stop_w, b"x")
        with pytest.raises(BadRequest, match="closing"):
            receive(server, stop_fd=stop_r)
        # Split over several sends, the descriptors with the first part.
        other, end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with other, end:
            socket.send_fds(other, [b'{"pod": "a", '], [0, 1, 2])
            other.sendall(b'"command": ["true"]}\n')
            line, fds = receive(end)
            for fd in fds:
                os.close(fd)
        assert parse_request(line) == ExecRequest("a", ("true",))
        assert len(fds) == 3
    finally:
        for closable in (client, server):
            closable.close()
        os.close(stop_r)
        os.close(stop_w)


def test_hosts_stopped_by_a_suspend_come_back_on_resume_without_a_restart(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    submit(backend, manifest("nap", client=IDLE_CLIENT), tmp_path, detach=False)
    wait_running(backend, "nap")
    backend.suspend("nap")
    eventually(
        lambda: all(r.phase == "Stopped" for r in backend.get("nap").replicas),
        what="every replica stopped by the suspend",
    )
    refused = exec_in("nap-host-0", ["true"], path=socket_of(backend, "nap"))
    assert refused["exitCode"] == 126
    assert refused["error"].startswith("replica nap-host-0 is not running")
    backend.resume("nap")
    view = wait_running(backend, "nap")
    assert {r.name: r.restarts for r in view.replicas} == {
        "nap-client-0": 0,
        "nap-host-0": 0,
        "nap-host-1": 0,
    }
    assert exec_in("nap-host-1", ["true"], path=socket_of(backend, "nap")) == {"exitCode": 0}
