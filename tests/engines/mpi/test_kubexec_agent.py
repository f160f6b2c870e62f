"""kubexec (``kubemill.engines.mpi.agent``) on its own: where it sends a command, what it runs,
how it reads an exit status, and its local mode against a small supervisor written here.

The supervisor below is the server side of the local protocol as the brief fixes it: one
line ``{"pod", "command"}`` with the agent's stdin, stdout and stderr attached
(``SCM_RIGHTS``), one line back ``{"exitCode"}`` or ``{"error", "exitCode"}``, and a closed
socket meaning "stop the process". The Kubernetes mode runs against the test API server's
exec endpoint in ``tests/substrates/kubernetes/operator/test_mpi_exec.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubemill.engines.mpi import agent as mpi_exec
from support.waiting import eventually

AGENT = Path(mpi_exec.__file__)
HANG_GUARD = 60.0
"""Seconds after which a test gives up waiting: a guard against hangs, not a bound."""


# --- where and what ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "pod"),
    [
        ("job-worker-0.job.ns.svc", "job-worker-0"),
        ("job-worker-12.job.team-a.svc.cluster.local", "job-worker-12"),
        ("job-worker-1", "job-worker-1"),
        ("w.job", "w"),
    ],
)
def test_the_pod_is_the_first_dns_label_of_the_host(host: str, pod: str) -> None:
    assert mpi_exec.pod_name(host) == pod


@pytest.mark.parametrize("host", ["Job-Worker-0.job", "-w.job", "", "w_0", "a" * 64])
def test_a_host_that_does_not_start_with_a_pod_name_is_refused(host: str) -> None:
    with pytest.raises(mpi_exec.AgentError, match="pod name"):
        mpi_exec.pod_name(host)


def test_the_namespace_is_the_third_label_else_the_pods_own_else_default(tmp_path: Path) -> None:
    own = tmp_path / "namespace"
    own.write_text("team-b\n")
    missing = tmp_path / "absent"
    assert mpi_exec.namespace_of("job-worker-0.job.team-a.svc", str(own)) == "team-a"
    assert mpi_exec.namespace_of("job-worker-0.job.team-a", str(missing)) == "team-a"
    assert mpi_exec.namespace_of("job-worker-0.job", str(own)) == "team-b"
    assert mpi_exec.namespace_of("job-worker-0", str(own)) == "team-b"
    assert mpi_exec.namespace_of("job-worker-0.job", str(missing)) == "default"
    with pytest.raises(mpi_exec.AgentError, match="namespace"):
        mpi_exec.namespace_of("w.job.Bad_NS.svc", str(missing))


def test_the_words_run_under_sh_joined_by_spaces_as_ssh_runs_them() -> None:
    words = [" orted", "-mca", "ess", '"env"', "-mca", "orte_hnp_uri", '"1.0;tcp://1.2.3.4:5"']
    command = mpi_exec.remote_command(words)
    assert command[:2] == ["/bin/sh", "-c"] and command[2] == " ".join(words)
    # what sh makes of it is what orted would get: the quotes are the shell's
    argv = subprocess.run(
        [*command[:2], "printf '%s\\n' " + command[2].replace("orted", "", 1)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert argv == ["-mca", "ess", "env", "-mca", "orte_hnp_uri", "1.0;tcp://1.2.3.4:5"]
    for empty in ([], ["", " "]):
        with pytest.raises(mpi_exec.AgentError, match="no command"):
            mpi_exec.remote_command(empty)


def test_the_exit_code_comes_from_the_final_status() -> None:
    assert mpi_exec._status_exit_code(b'{"metadata":{},"status":"Success"}') == 0
    failure = {
        "status": "Failure",
        "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code",
        "details": {"causes": [{"reason": "ExitCode", "message": "42"}]},
    }
    assert mpi_exec._status_exit_code(json.dumps(failure).encode()) == 42
    internal = {"status": "Failure", "reason": "InternalError", "message": "runtime said no"}
    with pytest.raises(mpi_exec.AgentError, match="runtime said no"):
        mpi_exec._status_exit_code(json.dumps(internal))
    with pytest.raises(mpi_exec.AgentError, match="before the command's exit status"):
        mpi_exec._status_exit_code(b"")
    with pytest.raises(mpi_exec.AgentError, match="unreadable"):
        mpi_exec._status_exit_code(b"not json")


# --- local mode: a supervisor of the test's own ------------------------------------------------


@dataclass
class Request:
    pod: str
    command: list[str]
    process: subprocess.Popen[bytes] | None = None
    stopped_on_close: bool = False


@dataclass
class Supervisor:
    """The local supervisor's side of the exec socket, one connection at a time.

    ``answer(request)`` returns the line to send instead of running the command (an
    error), or None to run it with the agent's own descriptors and answer its exit code.
    """

    path: str
    answer: Callable[[Request], dict[str, Any] | None] = lambda request: None
    hang_up: bool = False
    """Close the connection after reading the request, without answering."""
    raw_answer: bytes | None = None
    """Sent as the answer, once the command has run, instead of its JSON line."""
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed by the test
            with conn:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
        try:
            while not data.endswith(b"\n"):
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            line = json.loads(data)
            request = Request(pod=line["pod"], command=line["command"])
            self.requests.append(request)
            if self.hang_up:
                return
            reply = self.answer(request)
            if reply is None:
                # A session of its own: /bin/sh -c forks its command (dash does not exec
                # the last one), so stopping the process means stopping its group.
                request.process = subprocess.Popen(
                    request.command,
                    stdin=fds[0],
                    stdout=fds[1],
                    stderr=fds[2],
                    start_new_session=True,
                )
        finally:
            for fd in fds:
                os.close(fd)  # the process has its own copies now
        if reply is None:
            assert request.process is not None
            while request.process.poll() is None:
                readable, _, _ = select.select([conn], [], [], 0.05)
                if readable and not conn.recv(1):  # the agent closed: stop the process
                    os.killpg(request.process.pid, signal.SIGTERM)
                    request.process.wait()
                    request.stopped_on_close = True
                    return
            reply = {"exitCode": request.process.returncode}
        if self.raw_answer is not None:
            conn.sendall(self.raw_answer)
            return
        conn.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        self._server.close()
        for request in self.requests:
            if request.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(request.process.pid, signal.SIGKILL)
                request.process.wait()


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # A unix socket path must be short (108 bytes): not under pytest's tmp_path.
    path = Path(tempfile.mkdtemp(prefix="kubexec-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def supervisor(socket_dir: Path) -> Iterator[Supervisor]:
    served = Supervisor(str(socket_dir / "exec.sock"))
    yield served
    served.close()


def agent(
    *args: str, socket_path: str | None, python: list[str] | None = None, **popen: Any
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != mpi_exec.SOCKET_ENV}
    if socket_path is not None:
        env[mpi_exec.SOCKET_ENV] = socket_path
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([*(python or [sys.executable]), str(AGENT), *args], env=env, **popen)


def finish(process: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=HANG_GUARD)
    return process.returncode, out.decode(), err.decode()


def test_local_mode_runs_the_command_on_the_agents_own_descriptors(
    supervisor: Supervisor,
) -> None:
    words = ["echo", "out;", "echo", "err", ">&2;", "exit", "4"]
    code, out, err = finish(agent("job-worker-1.job.ns.svc", *words, socket_path=supervisor.path))
    assert (code, out, err) == (4, "out\n", "err\n")
    [request] = supervisor.requests
    assert request.pod == "job-worker-1"
    assert request.command == ["/bin/sh", "-c", "echo out; echo err >&2; exit 4"]


def test_local_mode_needs_nothing_but_the_standard_library(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    # Delivered as a file named kubexec and run by a bare Python: no site-packages at all.
    delivered = tmp_path / "kubexec"
    shutil.copy(AGENT, delivered)
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(delivered), "w-0", "echo", "standalone"],
        env={mpi_exec.SOCKET_ENV: supervisor.path, "PATH": os.environ["PATH"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert finish(process) == (0, "standalone\n", "")


IMPORTS_BEFORE_THE_REQUEST = """
import sys
sys.argv = sys.argv[1:]
with open(sys.argv[0]) as source:
    program = compile(source.read(), sys.argv[0], "exec")
loaded = []
def seen(event, args):
    if event == "import":
        loaded.append(args[0])
    elif event == "socket.sendmsg":
        print(" ".join(loaded), file=sys.stderr, flush=True)
        sys.addaudithook(lambda *_: None)  # (hooks cannot be removed: a no-op is added)
        loaded.append("|")
sys.addaudithook(seen)
exec(program, {"__name__": "__main__", "__file__": sys.argv[0]})
"""
"""Runs the agent given as its first argument, printing on stderr the modules it imported
up to sending its request (the ``socket.sendmsg`` audit event)."""


def test_local_mode_sends_its_request_before_importing_socket_json_or_enums(
    supervisor: Supervisor,
) -> None:
    # mpirun waits for orted on every host, and orted starts once the request is in: the
    # modules that build enums or compile patterns at import time wait until it is sent.
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", IMPORTS_BEFORE_THE_REQUEST, str(AGENT), "w-0", "true"],
        env={mpi_exec.SOCKET_ENV: supervisor.path, "PATH": os.environ["PATH"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    code, _, err = finish(process)
    assert code == 0, err
    before_the_request = set(err.split("\n", 1)[0].split())
    assert "_socket" in before_the_request  # the hook saw the agent's imports
    assert not before_the_request & {"socket", "selectors", "json", "re", "contextlib", "enum"}, err


IMPORTS_OF_A_RUN = """
import sys
sys.argv = sys.argv[1:]
with open(sys.argv[0]) as source:
    program = compile(source.read(), sys.argv[0], "exec")
loaded = []
sys.addaudithook(lambda event, args: event == "import" and loaded.append(args[0]))
try:
    exec(program, {"__name__": "__main__", "__file__": sys.argv[0]})
finally:
    print(" ".join(loaded), file=sys.stderr, flush=True)
"""
"""Runs the agent given as its first argument, printing on stderr the modules it imported
in all, once it has ended."""


def test_local_mode_reads_the_answer_without_importing_json_or_re(
    supervisor: Supervisor,
) -> None:
    # The answer of an orted's exec arrives as that orted and its ranks start, on the same
    # cores: importing json then (it compiles re patterns) took CPU from them.
    supervisor.answer = lambda request: {"error": 'sp\u00e9cial "quoted"', "exitCode": 3}
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", IMPORTS_OF_A_RUN, str(AGENT), "w-0", "true"],
        env={mpi_exec.SOCKET_ENV: supervisor.path, "PATH": os.environ["PATH"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    code, _, err = finish(process)
    message, imported = err.rstrip("\n").split("\n")
    assert (code, message) == (3, 'kubexec: w-0: sp\u00e9cial "quoted"')
    assert "_json" in imported.split()  # the hook saw the agent's imports
    assert not set(imported.split()) & {"json", "re", "enum", "socket", "selectors"}, err


@pytest.mark.parametrize(
    "raw",
    [
        b'{"exitCode": 0}',
        b' {"error": "no \\"w-9\\"\\n\\u00e9", "exitCode": 126}\r\n',
        b'{"exitCode": 1.5e2, "x": [true, false, null, {}], "y": NaN}',
        b"[]",
        b'"text"',
    ],
)
def test_the_answer_is_read_as_json_reads_it(raw: bytes) -> None:
    assert repr(mpi_exec.read_answer(raw)) == repr(json.loads(raw))


@pytest.mark.parametrize(
    "raw", [b"", b" ", b"{", b'{"exitCode": 0} {}', b'{"exitCode": 0}x', b"\xff", b"nope"]
)
def test_an_answer_json_cannot_read_is_a_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(raw)
    with pytest.raises(ValueError):
        mpi_exec.read_answer(raw)


def test_an_unreadable_answer_is_one_line_and_255(supervisor: Supervisor) -> None:
    supervisor.raw_answer = b"exitCode=0\n"
    code, _, err = finish(agent("w-0", "true", socket_path=supervisor.path))
    assert code == 255
    assert err == "kubexec: w-0: unreadable answer from the local supervisor: b'exitCode=0'\n"


def test_an_error_answer_is_one_line_naming_the_pod_and_its_exit_code(
    supervisor: Supervisor,
) -> None:
    supervisor.answer = lambda request: {"error": f"no worker {request.pod}", "exitCode": 7}
    code, out, err = finish(agent("job-worker-3.job", "true", socket_path=supervisor.path))
    assert (code, out) == (7, "")
    assert err == "kubexec: job-worker-3: no worker job-worker-3\n"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signalled_agent_closes_the_socket_and_the_supervisor_stops_the_process(
    supervisor: Supervisor, signum: int, code: int
) -> None:
    running = agent("w-0", "sleep", "300", socket_path=supervisor.path)
    eventually(
        lambda: supervisor.requests and supervisor.requests[0].process,
        "the process",
        timeout=HANG_GUARD,
    )
    running.send_signal(signum)
    assert finish(running)[0] == code
    request = supervisor.requests[0]
    eventually(
        lambda: request.stopped_on_close, "the supervisor to stop the process", timeout=HANG_GUARD
    )
    assert request.process is not None and request.process.poll() is not None


def test_an_unreachable_supervisor_is_ssh_s_255_with_the_path(socket_dir: Path) -> None:
    path = str(socket_dir / "nobody.sock")
    code, out, err = finish(agent("w-0", "true", socket_path=path))
    assert (code, out) == (255, "")
    assert err.startswith(f"kubexec: w-0: cannot reach the local supervisor at {path}: ")
    assert err.count("\n") == 1


def test_a_supervisor_that_hangs_up_without_an_answer_is_255(supervisor: Supervisor) -> None:
    supervisor.hang_up = True
    code, _, err = finish(agent("w-0", "true", socket_path=supervisor.path))
    assert code == 255
    assert err == "kubexec: w-0: the local supervisor closed the connection without an exit code\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "usage: kubexec <host>"),
        (("w-0",), "usage: kubexec <host>"),
        (("-l", "root", "w-0", "true"), "usage: kubexec <host>"),
        (("W-0", "true"), "does not start with a pod name"),
        (("w-0", " "), "no command to run"),
    ],
)
def test_bad_arguments_are_one_line_and_255(
    supervisor: Supervisor, args: tuple[str, ...], message: str
) -> None:
    code, out, err = finish(agent(*args, socket_path=supervisor.path))
    assert (code, out) == (255, "")
    assert message in err and err.startswith("kubexec: ") and err.count("\n") == 1
    assert supervisor.requests == []
