#!/usr/bin/env python3
"""kubexec: the remote-shell agent through which ``mpirun`` starts ``orted`` in a worker pod
(MPI's agent: standalone, delivered as a file; see :mod:`kubemill.engines`).

OpenMPI's launcher (``plm_rsh``) runs its agent once per host, as it would run ssh::

    AGENT <host> <word>...

where the words are a shell command line (`` orted -mca ess "env" ... -mca orte_hnp_uri
"...;tcp://10.0.0.5:41119" ...``); it expects the agent to run that command on the host, relay
its stdout and stderr, and exit with its exit code. The seed's launcher used ``kubectl exec
<pod> -- /bin/sh -c ...`` for this; kubexec does the same through the Kubernetes exec API
with the official Python client, so no kubectl binary has to be delivered into the launcher.
It arrives in the job's ConfigMap (mode 0755) and runs as ``<mountPath>/kubexec <host> <words>``
(``OMPI_MCA_plm_rsh_agent``) through its ``#!/usr/bin/env python3`` line. The image's
``python3`` needs only the standard library and the ``kubernetes`` client: the agent must not
import kubemill, which is not installed in the job's image.

- **Where.** The pod is the first DNS label of ``<host>`` (``job-worker-0.job.ns.svc`` ->
  ``job-worker-0``), as the hostfile names workers. Its namespace is the third label of a
  qualified host, else the pod's own (the service-account namespace file), else
  ``default``. The container is ``$KUBEMILL_EXEC_CONTAINER``, else the API's default.
- **What.** ``["/bin/sh", "-c", " ".join(words)]``. This is the remote-shell contract, not
  a shell string built from user input: the words come from ``mpirun`` itself, already
  quoted for a POSIX shell on the far side, exactly as ssh (and kubectl exec in the seed)
  would hand them over; running them any other way would break ``orted``'s quoted options.
- **How.** In-cluster configuration, else ``$KUBECONFIG``/``~/.kube/config``; the exec
  websocket with stdout and stderr only (``orted`` reads no stdin: none is sent);
  bytes are relayed as they arrive; the exit code is the one in the final ``Status`` on
  the error channel (``Success`` -> 0, ``NonZeroExitCode`` -> its ``ExitCode`` cause).
- **Failures** as ssh reports its own: one line ``kubexec: <pod>: <reason>`` on stderr and
  exit 255 (``mpirun`` then reports the daemon as failed to start). SIGTERM and SIGINT close
  the stream and exit 143 and 130. Closing an exec stream does not stop the process on a
  real cluster; ``orted`` exits by itself once it loses its connection to ``mpirun``.
- **Locally** (``$KUBEMILL_EXEC_SOCKET`` set by the local substrate) there is no API: the
  agent connects to that unix socket, sends one line ``{"pod": ..., "command": [...]}``
  with its stdin, stdout and stderr attached (``SCM_RIGHTS``), so the process the local
  supervisor starts in the worker's environment writes straight to ``mpirun``; it then
  reads one line back, ``{"exitCode": N}`` or ``{"error": "...", "exitCode": N}``.
  Closing the socket (on a signal) asks the supervisor to stop the process.
"""

from __future__ import annotations

import os
import sys

# mpirun starts one agent per host and waits for each: what it imports is paid on every
# job's start, so modules needed only for type checking are not imported at run time
# (typing and pathlib were a third of the local agent's start-up), and the local path
# imports nothing that pure-Python modules build at import time before its request is
# sent: the C ``_socket`` rather than ``socket`` (which imports ``selectors`` and builds
# its enums), json's C string encoder rather than ``json`` (which compiles ``re``
# patterns), ``signal``'s C module rather than ``signal`` (three enums); those were
# two thirds of what the agent cost on top of the interpreter before ``orted`` could start.
# Nor after it: the answer arrives as ``orted`` and its ranks start, on the same cores, and
# is read with json's C scanner (:func:`read_answer`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from _socket import socket
    from collections.abc import Callable, Sequence
    from types import FrameType
    from typing import Any

try:
    signals: Any = __import__("_signal")  # loaded with the interpreter: no stub to type it
except ImportError:  # an interpreter without it (not CPython)
    import signal as signals

NAME = "kubexec"
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
CONTAINER_ENV = "KUBEMILL_EXEC_CONTAINER"
SOCKET_ENV = "KUBEMILL_EXEC_SOCKET"
AGENT_FAILED = 255
"""What ssh exits with when it, not the remote command, failed."""
EXIT_ON_SIGNAL: dict[int, int] = {signals.SIGTERM: 143, signals.SIGINT: 130}
STDOUT, STDERR, STATUS = 1, 2, 3
"""The ``channel.k8s.io`` channels kubexec reads."""
_C_INT = 4
"""Bytes of a C ``int`` (a file descriptor in an ``SCM_RIGHTS`` message) on Linux."""
MAX_ANSWER = 64 * 1024
"""Bytes of the local supervisor's one-line answer read at most."""

_LABEL_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
USAGE = f"usage: {NAME} <host> <command word>... (mpirun's plm_rsh_agent)"


class AgentError(Exception):
    """Something kept the command from running; reported as one line, exit 255."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived: close the stream and exit with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


# --- where and what ---------------------------------------------------------------------------


def _is_dns_label(text: str) -> bool:
    """Lower-case letters, digits and inner hyphens (a DNS label, its length aside)."""
    return bool(text) and set(text) <= _LABEL_CHARACTERS and "-" not in (text[0], text[-1])


def pod_name(host: str) -> str:
    """The pod a hostfile entry names: its first DNS label."""
    pod = host.split(".", 1)[0]
    if len(pod) > 63 or not _is_dns_label(pod):
        raise AgentError(f"host {host!r} does not start with a pod name (a DNS label)")
    return pod


def namespace_of(host: str, namespace_file: str = NAMESPACE_FILE) -> str:
    """The namespace of a qualified host (``pod.service.namespace[.svc...]``), else this
    pod's own namespace, else ``default``."""
    labels = host.split(".")
    if len(labels) >= 3 and labels[2]:
        if not _is_dns_label(labels[2]):
            raise AgentError(f"host {host!r}: {labels[2]!r} is not a namespace name")
        return labels[2]
    from pathlib import Path  # only here: the local agent never needs it (see the imports)

    try:
        own = Path(namespace_file).read_text(encoding="utf-8").strip()
    except OSError:
        own = ""
    return own or "default"


def remote_command(words: Sequence[str]) -> list[str]:
    """The argv that runs ``words`` on the far side: ssh's contract (``/bin/sh -c`` of the
    words joined by spaces). The words are mpirun's own, quoted by it for a POSIX shell."""
    if not words or not "".join(words).strip():
        raise AgentError(f"no command to run ({USAGE})")
    return ["/bin/sh", "-c", " ".join(words)]


# --- relaying bytes ---------------------------------------------------------------------------


class _Sink:
    """One of our output descriptors; once its reader is gone, output is dropped (the exit
    code still matters to mpirun)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.broken = False

    def write(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        view = memoryview(data)
        while view and not self.broken:
            try:
                written = os.write(self.fd, view)
            except (BrokenPipeError, OSError):
                self.broken = True
                return
            view = view[written:]


def _say(line: str) -> None:
    _Sink(2).write(line.rstrip("\n") + "\n")


# --- the Kubernetes exec API ------------------------------------------------------------------


def _status_exit_code(raw: bytes | str) -> int:
    """The exit code in the exec's final ``Status`` (channel 3)."""
    import json

    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    if not text.strip():
        raise AgentError("the exec stream closed before the command's exit status arrived")
    try:
        status = json.loads(text)
    except ValueError:
        raise AgentError(f"unreadable exit status from the API server: {text[:200]}") from None
    if not isinstance(status, dict):
        raise AgentError(f"unreadable exit status from the API server: {text[:200]}")
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                try:
                    return min(max(int(cause.get("message")), 0), 255)
                except (TypeError, ValueError):
                    break
    raise AgentError(str(status.get("message") or text[:200]))


def _api_failure(exc: Any) -> str:
    """Why the exec websocket could not be opened: the API server's Status message and
    HTTP code when it answered, else the connection error."""
    import json

    handshake = exc.__context__
    code = getattr(handshake, "status_code", None)
    if code is not None:
        body = getattr(handshake, "resp_body", b"") or b""
        try:
            message = str(json.loads(body).get("message") or "")
        except (ValueError, AttributeError):
            message = ""
        if not message:
            message = body.decode(errors="replace").strip() if isinstance(body, bytes) else ""
        return f"{message or 'exec refused'} (HTTP {code})"
    return str(getattr(exc, "reason", "") or exc)


def _relay(ws: Any) -> int:
    """Copy stdout and stderr as frames arrive until the stream closes; the exit code."""
    from websocket import WebSocketException  # the kubernetes client's own dependency

    out, err = _Sink(1), _Sink(2)

    def drain() -> None:
        for channel, sink in ((STDOUT, out), (STDERR, err)):
            data = ws.read_channel(channel)
            if data:
                sink.write(data)

    try:
        while ws.is_open():
            ws.update(timeout=None)  # blocks until frames arrive or the stream closes
            drain()
    except (WebSocketException, OSError) as exc:
        drain()
        raise AgentError(f"the exec stream broke: {exc}") from None
    drain()
    return _status_exit_code(ws.read_channel(STATUS))


def run_kubernetes(pod: str, namespace: str, command: list[str], container: str | None) -> int:
    """Run ``command`` in the pod through the exec API; its exit code."""
    import contextlib

    try:
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream
    except ImportError as exc:
        raise AgentError(f"the kubernetes client is not installed ({exc})") from None
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        try:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError, TypeError, ValueError) as exc:
            raise AgentError(
                f"no cluster to reach: not in a pod, and no kubeconfig ({exc})"
            ) from None
    options: dict[str, Any] = {
        "command": command,
        "stdin": False,
        "stdout": True,
        "stderr": True,
        "tty": False,
        "binary": True,
        "_preload_content": False,
    }
    if container:
        options["container"] = container
    # orted reads nothing: let go of mpirun's stdin (fd 0 stays valid, on /dev/null).
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    try:
        ws = stream(client.CoreV1Api().connect_get_namespaced_pod_exec, pod, namespace, **options)
    except ApiException as exc:
        raise AgentError(_api_failure(exc)) from None
    try:
        return _relay(ws)
    finally:
        with contextlib.suppress(Exception):
            ws.close()


# --- the local supervisor ---------------------------------------------------------------------


def _passable(fd: int) -> int:
    """``fd`` if it is open, else /dev/null in its place (a closed descriptor cannot be
    passed)."""
    try:
        os.fstat(fd)
    except OSError:
        return os.open(os.devnull, os.O_RDWR)
    return fd


def _answer_line(sock: socket) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < MAX_ANSWER:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def _request_line(pod: str, command: list[str]) -> bytes:
    """``{"pod": ..., "command": [...]}`` and a newline, as ``json.dumps`` writes it (with
    the C string encoder json itself uses, when the interpreter has it)."""
    try:
        from _json import encode_basestring_ascii as quoted
    except ImportError:
        from json.encoder import encode_basestring_ascii as quoted
    words = ", ".join(map(quoted, command))
    return f'{{"pod": {quoted(pod)}, "command": [{words}]}}\n'.encode()


class _JsonDefaults:
    """What ``_json.make_scanner`` reads of a decoder: ``json.loads``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity: float() reads them as json does


def read_answer(raw: bytes) -> Any:
    """The supervisor's answer line, read as ``json.loads`` reads it (``ValueError`` if it
    is not one JSON value), with the C scanner ``json.loads`` itself uses when the
    interpreter has it: importing ``json`` compiles ``re`` patterns, some 8 ms of CPU per
    agent, spent just as the orted it started and that orted's ranks start."""
    try:
        from _json import make_scanner
    except ImportError:
        import json

        return json.loads(raw)
    text = raw.decode()  # UnicodeDecodeError is a ValueError
    blank = " \t\n\r"  # JSON's whitespace
    start = len(text) - len(text.lstrip(blank))
    try:
        # typeshed types the context as a scanner; the C code reads only these attributes
        # of it (json.decoder passes a JSONDecoder).
        scan = make_scanner(_JsonDefaults())  # type: ignore[arg-type]
        value, end = scan(text, start)
    except StopIteration:
        raise ValueError(f"no JSON value at {start}") from None
    if text[end:].strip(blank):
        raise ValueError(f"extra data after the JSON value, at {end}")
    return value


def run_local(path: str, pod: str, command: list[str]) -> int:
    """Ask the local supervisor at ``path`` to run ``command`` in the pod's environment,
    with our stdin, stdout and stderr; its exit code."""
    import _socket

    line = _request_line(pod, command)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError as exc:
            raise AgentError(
                f"cannot reach the local supervisor at {path}: {exc.strerror or exc}"
            ) from None
        try:
            # The descriptors ride with the first bytes (SCM_RIGHTS), as C ints, as
            # socket.send_fds sends them.
            fds = b"".join(
                _passable(fd).to_bytes(_C_INT, sys.byteorder, signed=True) for fd in (0, 1, 2)
            )
            sent = sock.sendmsg([line], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
            if sent < len(line):
                sock.sendall(line[sent:])
            raw = _answer_line(sock)
        except OSError as exc:
            raise AgentError(f"the local supervisor connection broke: {exc}") from None
    finally:
        sock.close()
    if not raw:
        raise AgentError("the local supervisor closed the connection without an exit code")
    try:
        answer = read_answer(raw)
        code = int(answer["exitCode"])
    except (ValueError, TypeError, KeyError):
        raise AgentError(f"unreadable answer from the local supervisor: {raw[:200]!r}") from None
    if answer.get("error"):
        _say(f"{NAME}: {pod}: {answer['error']}")
    return min(max(code, 0), 255)


# --- the program ------------------------------------------------------------------------------


def _interrupt(code: int) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(code)

    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """``kubexec <host> <word>...``: run the words on the host's pod; the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    who = args[0].split(".", 1)[0] if args else "?"
    for signum, code in EXIT_ON_SIGNAL.items():
        signals.signal(signum, _interrupt(code))
    try:
        if len(args) < 2 or args[0].startswith("-"):
            raise AgentError(USAGE)
        host, words = args[0], args[1:]
        command = remote_command(words)
        who = pod_name(host)
        socket_path = os.environ.get(SOCKET_ENV)
        if socket_path:
            return run_local(socket_path, who, command)
        container = os.environ.get(CONTAINER_ENV) or None
        return run_kubernetes(who, namespace_of(host), command, container)
    except Interrupted as stop:
        return stop.code
    except AgentError as exc:
        _say(f"{NAME}: {who}: {exc}")
        return AGENT_FAILED
    except Exception as exc:  # whatever else, mpirun must get one line and ssh's 255
        _say(f"{NAME}: {who}: {type(exc).__name__}: {exc}")
        return AGENT_FAILED


if __name__ == "__main__":
    sys.exit(main())
