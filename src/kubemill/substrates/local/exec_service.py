"""The supervisor's exec service: ``kubectl exec`` into a local replica.

On Kubernetes, MPI's launcher starts ``orted`` in each worker pod through a remote-shell
agent (``plm_rsh_agent``) that asks the kubelet, through the API server, to exec a
command in the pod. Locally the supervisor is the job's kubelet, so it serves the same
request on a unix socket, given to every replica as ``KUBEMILL_EXEC_SOCKET``.

The protocol (the client is ``kubemill.engines.mpi.agent`` in local mode):

- connect a ``SOCK_STREAM`` unix socket at that path and send ONE message with
  ``socket.send_fds(sock, [line], [stdin, stdout, stderr])``, where ``line`` is a UTF-8
  JSON object and a newline: ``{"pod": "<replica name>", "command": ["argv", ...]}``;
- the service answers with one JSON line: ``{"exitCode": N}`` once the process has ended
  (128 + N for a process ended by signal N, as a container runtime reports it), or at
  once ``{"error": "<why>", "exitCode": 126}`` for a message it cannot read, a replica the
  job does not have (the answer names the job's replicas), or one that is not running.
  A program that cannot be found answers ``exitCode`` 127 and one that cannot be run
  126, as a shell would;
- if the client's connection closes before the process ends (the agent was killed), the
  process and everything it started get SIGTERM, then SIGKILL after :data:`EXEC_GRACE`.

The command runs as if exec'd into the replica's container: the replica's environment as
the supervisor built it (the framework's variables, its private ``TMPDIR``, the job's
mark ``KUBEMILL_REPLICA_ID``), its working directory, the cores it is pinned to, and the
three received descriptors as its stdin, stdout and stderr (the output goes to the
caller, not to the replica's log, as with ``kubectl exec``). The process is a child of
the supervisor's process and carries the replica's mark, so the supervisor knows it as
the replica's (:mod:`.supervisor`): it counts in the replica's memory, gets the replica's
signals, is killed when the replica's main process exits, and is swept when the job
ends. It also dies with the thread that waits for it (``PR_SET_PDEATHSIG``). Each exec is
recorded as an event of the job (reason ``Exec``).

Only this user can reach the socket: it is created 0600 in a directory of mode 0700, and a
peer whose ``SO_PEERCRED`` uid is not the supervisor's is refused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import stat
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.kubelet import (
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    ReplicaPod,
    exit_code_of,
)
from kubemill.substrates.local.spawn import start_tied
from kubemill.substrates.local.store import Store

log = logging.getLogger("kubemill.local.exec")

EXEC_GRACE = 2.0
"""SIGTERM-to-SIGKILL grace of an exec'd process whose client went away, or that is
still running when the service closes."""
READ_TIMEOUT = 10.0
"""How long a client may take to send its one message."""
MAX_MESSAGE = 1 << 20
"""Longest request line accepted (an ``orted`` command line is a few KiB)."""
REFUSED = EXIT_NOT_EXECUTABLE
"""The exit code of a refused request, as ``kubectl exec`` reports a failed exec."""
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class BadRequest(Exception):
    """A request the service cannot read; the message says why."""


@dataclass(frozen=True)
class ExecRequest:
    """One request: run ``command`` in replica ``pod``."""

    pod: str
    command: tuple[str, ...]


def parse_request(line: bytes) -> ExecRequest:
    """The request in one message line; :class:`BadRequest` says what is wrong with it."""
    try:
        data: Any = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the message is not a JSON line ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest('the message must be a JSON object {"pod": ..., "command": [...]}')
    unknown = sorted(set(data) - {"pod", "command"})
    if unknown:
        raise BadRequest(f"unknown fields {unknown}; a request has pod and command")
    pod, command = data.get("pod"), data.get("command")
    if not isinstance(pod, str) or not pod:
        raise BadRequest("pod: expected the name of one of the job's replicas")
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(word, str) for word in command)
        or not command[0]
    ):
        raise BadRequest("command: expected a non-empty list of strings (an argv)")
    if any("\0" in word for word in command):
        raise BadRequest("command: a word holds a NUL byte")
    return ExecRequest(pod, tuple(command))


def reply(conn: socket.socket, **fields: object) -> None:
    """Send one JSON line; a client that went away is not an error."""
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(fields).encode() + b"\n")


def prepare_socket_dir(path: Path) -> None:
    """Create the socket's directory 0700 (its parents too, private when kubemill's own),
    refusing one that another user could have prepared."""
    for directory in (path.parent, path):
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
        except FileNotFoundError:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(directory)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise SubstrateError(
                f"{directory} is not a directory of this user; the exec socket cannot go"
                " there (remove it, or set KUBEMILL_STATE_DIR to a shorter path)"
            )
        if info.st_mode & 0o077:
            directory.chmod(0o700)


@dataclass
class _Running:
    """An exec'd process and the thread that waits for it."""

    popen: subprocess.Popen[bytes] | None = None


class ExecService:
    """Serves exec requests for one job's replicas on a unix socket (see the module)."""

    def __init__(
        self,
        path: str,
        *,
        job: str,
        pods: Callable[[], Mapping[str, ReplicaPod]],
        replicas: Callable[[], Iterable[str]],
        store: Store | None = None,
        uid: str = "",
    ) -> None:
        self.path = Path(path)
        self.job = job
        """The job's name, for messages."""
        self._pods = pods
        """The supervisor's live pods by replica name (read with ``get`` only: the
        supervisor's loop changes the mapping)."""
        self._replicas = replicas
        """Every replica name the job has."""
        self._store = store
        self._uid = uid
        self._listener: socket.socket | None = None
        self._stop_r, self._stop_w = os.pipe()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._accepting: threading.Thread | None = None
        self._closed = False
        self._grace = EXEC_GRACE

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Listen on :attr:`path` and serve in background threads."""
        prepare_socket_dir(self.path.parent)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left by a supervisor that died
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            self.path.chmod(0o600)
            listener.listen(64)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._accepting = threading.Thread(
            target=self._accept_loop, name=f"kubemill-exec-{self.job}", daemon=True
        )
        self._accepting.start()

    def close(self, grace: float = EXEC_GRACE) -> None:
        """Stop serving: running processes get SIGTERM, then SIGKILL after ``grace``; the
        socket and its directory are removed."""
        if self._closed:
            return
        self._closed = True
        self._grace = grace
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")  # never read: stays readable for every thread
        if self._accepting is not None:
            self._accepting.join()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        if self._listener is not None:
            self._listener.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()
        for fd in (self._stop_r, self._stop_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # --- serving -----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None
        poller = select.poll()
        poller.register(self._listener.fileno(), select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._stop_r in ready:
                return
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            thread = threading.Thread(
                target=self._serve_quietly, args=(conn,), name=f"kubemill-exec-{self.job}"
            )
            with self._lock:
                self._threads.add(thread)
            thread.start()

    def _serve_quietly(self, conn: socket.socket) -> None:
        try:
            self._serve(conn)
        except Exception:
            log.exception("job %s: an exec request failed", self.job)
        finally:
            conn.close()
            if self._store is not None:
                self._store.close()  # this thread's connection
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
            _, peer_uid, _ = _CREDENTIALS.unpack(creds)
            if peer_uid != os.getuid():
                reply(conn, error=f"uid {peer_uid} may not exec here", exitCode=REFUSED)
                return
            try:
                line, fds = receive(conn, stop_fd=self._stop_r)
                request = parse_request(line)
                if len(fds) != 3:
                    raise BadRequest(
                        f"expected 3 file descriptors (stdin, stdout, stderr), got {len(fds)}"
                    )
            except BadRequest as exc:
                reply(conn, error=f"bad request: {exc}", exitCode=REFUSED)
                return
            target = self._target(request.pod)
            if isinstance(target, str):
                reply(conn, error=target, exitCode=REFUSED)
                return
            self._run(conn, request, target, fds)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _target(self, name: str) -> ReplicaPod | str:
        """The running pod of replica ``name``, or why there is none."""
        pod = self._pods().get(name)
        if pod is None or pod.deleting or pod.popen is None:
            replicas = sorted(self._replicas())
            if name not in replicas:
                return (
                    f"job {self.job} has no replica {name!r}; its replicas are"
                    f" {', '.join(replicas)}"
                )
            if pod is None:
                # Not created yet, or deleted (a suspended job, a finished one).
                return f"replica {name} is not running (it has no process now)"
            why = "being stopped" if pod.deleting else pod.state.reason or pod.state.phase
            return f"replica {name} is not running ({why})"
        return pod

    def _run(
        self, conn: socket.socket, request: ExecRequest, pod: ReplicaPod, fds: list[int]
    ) -> None:
        spec = pod.spec
        try:
            popen = start_tied(
                request.command,
                env=spec.env,
                cwd=spec.cwd,
                stdin=fds[0],
                stdout=fds[1],
                stderr=fds[2],
                cores=pod.cores,
            )
        except OSError as exc:
            code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
            what = exc.strerror or str(exc)
            if exc.filename is not None:
                what += f" ({exc.filename})"
            reply(
                conn,
                error=f"cannot run {request.command[0]!r} in {request.pod}: {what}",
                exitCode=code,
            )
            return
        with procinfo.waited_for(popen.pid):
            for fd in fds:
                os.close(fd)
            fds.clear()
            self._event(request, popen.pid)
            if self._target(request.pod) is not pod:
                # The replica stopped while this process started, perhaps after its
                # processes were signalled: it must not outlive the replica.
                code = self._stop(popen)
            else:
                code = self._wait(conn, popen)
        reply(conn, exitCode=code)

    def _wait(self, conn: socket.socket, popen: subprocess.Popen[bytes]) -> int:
        """Wait for the process; stop it if the client goes away or the service closes."""
        try:
            pidfd: int | None = os.pidfd_open(popen.pid)
        except OSError:
            pidfd = None
        try:
            poller = select.poll()
            if pidfd is not None:
                poller.register(pidfd, select.POLLIN)
            poller.register(conn.fileno(), select.POLLIN)
            poller.register(self._stop_r, select.POLLIN)
            while popen.poll() is None:
                events = dict(poller.poll(100 if pidfd is None else -1))
                if self._stop_r in events:
                    return self._stop(popen)
                event = events.get(conn.fileno(), 0)
                if event & (select.POLLHUP | select.POLLERR):
                    # Closed (the client exited or was killed); a client that only shut
                    # down its sending side still waits for the answer.
                    return self._stop(popen)
                if event & select.POLLIN and not _drain(conn):
                    poller.modify(conn.fileno(), 0)  # at EOF: only a hang-up matters now
            return exit_code_of(popen.returncode)
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _stop(self, popen: subprocess.Popen[bytes]) -> int:
        """SIGTERM the exec'd process and everything it started, SIGKILL what is left after
        the grace period; its exit code.

        Everything it started: not only its process group, as ``orted`` starts each rank
        in a session of its own. Descendants are remembered as they are seen, since once
        their parent dies they re-parent to the supervisor (a subreaper).
        """
        known: dict[int, int] = {}

        def descendants() -> set[int]:
            tree = procinfo.ProcessTree()
            for pid in {popen.pid} | tree.below(popen.pid, zombies=True):
                info = tree.table.get(pid)
                if info is not None:
                    known.setdefault(pid, info.start_ticks)
            return {
                pid
                for pid, ticks in known.items()
                if (info := tree.table.get(pid)) is not None and info.start_ticks == ticks
            }

        procinfo.stop_processes(descendants, grace=self._grace)
        popen.wait()
        return exit_code_of(popen.returncode)

    def _event(self, request: ExecRequest, pid: int) -> None:
        if self._store is None:
            return
        shown = " ".join(request.command)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        try:
            self._store.add_event(
                self._uid,
                type="Normal",
                reason="Exec",
                message=f"{request.pod}: exec {shown} (pid {pid})",
            )
        except SubstrateError:
            log.exception("job %s: could not record an exec", self.job)


def receive(
    conn: socket.socket, *, stop_fd: int | None = None, timeout: float = READ_TIMEOUT
) -> tuple[bytes, list[int]]:
    """One request line and the descriptors sent with it.

    :class:`BadRequest` if the message is too long, unfinished after ``timeout`` seconds
    or carries more than three descriptors, or if ``stop_fd`` becomes readable (the
    service is closing) first.
    """
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if stop_fd is not None:
        poller.register(stop_fd, select.POLLIN)
    data = b""
    fds: list[int] = []
    try:
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BadRequest(f"no whole message within {timeout:g}s")
            ready = dict(poller.poll(int(left * 1000) + 1))
            if stop_fd is not None and stop_fd in ready:
                raise BadRequest("the job's exec service is closing")
            if conn.fileno() not in ready:
                continue
            chunk, got, flags, _ = socket.recv_fds(conn, 65536, 4)
            fds.extend(got)
            if flags & socket.MSG_CTRUNC or len(fds) > 3:
                raise BadRequest("too many file descriptors (send stdin, stdout and stderr)")
            if not chunk:
                raise BadRequest("the connection closed before a whole line was sent")
            data += chunk
            if len(data) > MAX_MESSAGE:
                raise BadRequest(f"the message is longer than {MAX_MESSAGE} bytes")
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    line, _, _ = data.partition(b"\n")
    return line, fds


def _drain(conn: socket.socket) -> bool:
    """Drop what the client sent after its request; False once it sends no more (EOF)."""
    try:
        return conn.recv(65536, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
