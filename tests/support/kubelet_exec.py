"""The kubelet's ``exec`` endpoint as the node stand-in serves it (tests/support/node.py).

What the real kube-apiserver v1.36 sends to a kubelet for ``pods/exec`` (read in its code:
``pkg/registry/core/pod/rest/subresources.go``, ``ExecREST.Connect``, and
``k8s.io/apiserver/pkg/util/proxy``):

- ``GET /exec/<namespace>/<pod>/<container>?command=<argv0>&command=<argv1>...&error=1
  &input=1&output=1&tty=1`` (only the flags asked for; ``url.Values.Encode`` sorts the
  keys), over TLS with the API server's kubelet-client certificate.
- If the Node declares ``ExtendWebSocketsToKubelet`` in ``status.declaredFeatures`` (a 1.36
  kubelet does, its feature gate being on by default), every WebSocket upgrade is proxied to
  the kubelet byte for byte (``UpgradeAwareHandler``): the client's own handshake, with its
  ``Sec-WebSocket-Protocol`` offer. The Python ``kubernetes`` client (37.x) offers
  ``v5.channel.k8s.io,v4.channel.k8s.io``; kubectl 1.36 offers ``v5.channel.k8s.io`` only.
  The kubelet serves v5 itself (its stream translator, only v5) and hands any other upgrade
  to the container runtime's streaming server (v4 and older).
- If the Node does not declare it, the API server itself translates a v5 WebSocket into
  SPDY/3.1 toward the kubelet; only an upgrade offering no v5 (a v4-only client) is proxied
  as is. SPDY is not served here: the stand-in declares the feature, as a 1.36 kubelet does.

The channel protocol (``k8s.io/streaming`` ``wsstream``): binary messages whose first byte is
the channel: 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize; in v5 a message ``[255, n]``
from the client closes its channel ``n`` (stdin's end of file). The server first sends an
empty message on the lowest channel it writes (stdout, else stderr, else error), relays the
output as it comes, and once the command has ended writes one JSON ``Status`` on the error
channel (``Success``; ``Failure`` with reason ``NonZeroExitCode`` and an ``ExitCode`` cause;
``InternalError`` when the command could not run), then closes the WebSocket.

Closing the stream (a close frame, or the connection gone) stops the command: SIGTERM to its
process group, SIGKILL after :data:`STOP_GRACE`. (A real container runtime leaves a non-tty
exec's process running; the stand-in stops it so that no test leaves one behind.)
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import os
import queue
import select
import signal
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE_SIGNAL = 255
"""v5: a client message ``[255, channel]`` half-closes that channel."""
WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
STOP_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when a stream closes under a running command."""
MAX_MESSAGE = 16 * 1024 * 1024


class ExecRefused(Exception):
    """The request is answered with an HTTP error before any upgrade, as the kubelet does."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ExecRequest:
    """What the API server asked the node to run."""

    namespace: str
    pod: str
    container: str
    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def parse_exec(path: str, query: str) -> ExecRequest:
    """``/exec/<ns>/<pod>/<container>`` and its query, as the API server builds them."""
    import urllib.parse

    parts = path.strip("/").split("/")
    if len(parts) != 4 or parts[0] != "exec":
        raise ExecRefused(404, f"not an exec path: {path}")
    values = urllib.parse.parse_qs(query, keep_blank_values=True)

    def flag(name: str) -> bool:
        return values.get(name, [""])[-1] in ("1", "true")

    request = ExecRequest(
        namespace=parts[1],
        pod=parts[2],
        container=parts[3],
        command=values.get("command", []),
        stdin=flag("input"),
        stdout=flag("output"),
        stderr=flag("error"),
        tty=flag("tty"),
    )
    if not (request.stdin or request.stdout or request.stderr):
        raise ExecRefused(400, "you must specify at least 1 of stdin, stdout, stderr")
    if not request.command:
        raise ExecRefused(400, "no command given (the 'command' query parameter)")
    if request.tty:
        raise ExecRefused(400, "the node stand-in does not allocate terminals (tty=1)")
    return request


def negotiate(offer: str) -> str:
    """The channel protocol the kubelet side chooses from a ``Sec-WebSocket-Protocol`` offer:
    v5 when offered (the kubelet's translator serves only v5), else v4 (the runtime's)."""
    offered = [p.strip() for p in offer.split(",") if p.strip()]
    for protocol in (V5, V4):
        if protocol in offered:
            return protocol
    raise ExecRefused(
        403, f"requested protocol(s) are not supported: {offered}; supports {[V5, V4]}"
    )


def status_json(
    command: list[str], protocol: str, exit_code: int | None, error: str | None = None
) -> bytes:
    """The ``Status`` a kubelet writes on the error channel once the command has ended."""
    status: dict[str, Any] = {"metadata": {}}
    if error is not None:
        message = f"error executing command in container: {error}"
        status |= {
            "status": "Failure",
            "message": f"Internal error occurred: {message}",
            "reason": "InternalError",
            "details": {"causes": [{"message": message}]},
            "code": 500,
        }
    elif exit_code == 0:
        status["status"] = "Success"
    else:
        # v5 goes through the kubelet's translator, which words the runtime's answer as
        # client-go does; v4 reaches the runtime's own server (containerd's wording).
        inner = (
            f"command terminated with exit code {exit_code}"
            if protocol == V5
            else f"error executing command [{' '.join(command)}], exit code {exit_code}"
        )
        status |= {
            "status": "Failure",
            "message": f"command terminated with non-zero exit code: {inner}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]},
        }
    return json.dumps(status, separators=(",", ":")).encode()


# --- WebSocket framing (RFC 6455, server side) --------------------------------------------


def frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked, final frame (a server never masks)."""
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x80 | opcode, size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 126, size)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 127, size)
    return header + payload


class FrameReader:
    """Client frames from a byte stream: whole messages and control frames, in order."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._message = bytearray()
        self._message_opcode = 0

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        self._buffer += data
        while True:
            parsed = self._one_frame()
            if parsed is None:
                return
            fin, opcode, payload = parsed
            if opcode >= OP_CLOSE:  # control frames come whole, even between fragments
                yield opcode, payload
                continue
            if opcode != OP_CONTINUATION:
                self._message_opcode = opcode
                self._message = bytearray()
            self._message += payload
            if len(self._message) > MAX_MESSAGE:
                raise ValueError(f"a WebSocket message over {MAX_MESSAGE} bytes")
            if fin:
                yield self._message_opcode, bytes(self._message)
                self._message = bytearray()

    def _one_frame(self) -> tuple[bool, int, bytes] | None:
        buf = self._buffer
        if len(buf) < 2:
            return None
        fin, opcode = bool(buf[0] & 0x80), buf[0] & 0x0F
        masked, size = bool(buf[1] & 0x80), buf[1] & 0x7F
        at = 2
        if size == 126:
            if len(buf) < 4:
                return None
            size, at = struct.unpack_from("!H", buf, 2)[0], 4
        elif size == 127:
            if len(buf) < 10:
                return None
            size, at = struct.unpack_from("!Q", buf, 2)[0], 10
        if not masked:
            raise ValueError("a client frame without a mask (RFC 6455 5.1)")
        if len(buf) < at + 4 + size:
            return None
        mask = buf[at : at + 4]
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(buf[at + 4 : at + 4 + size]))
        del buf[: at + 4 + size]
        return fin, opcode, payload


# --- one exec session -------------------------------------------------------------------------


StartCommand = Callable[[ExecRequest], subprocess.Popen[bytes]]
"""Starts the request's command in the container (the stand-in's runtime); raises
:class:`OSError` (or :class:`ExecRefused`) when it cannot run."""


def serve_exec(
    handler: http.server.BaseHTTPRequestHandler, request: ExecRequest, start: StartCommand
) -> None:
    """Upgrade ``handler``'s connection and run ``request`` over it (see the module doc)."""
    headers = handler.headers
    upgrade = headers.get("Upgrade", "").lower() == "websocket"
    connection = "upgrade" in headers.get("Connection", "").lower()
    if not (upgrade and connection):
        what = headers.get("Upgrade") or "none"
        raise ExecRefused(
            400,
            f"Upgrade request required (a WebSocket; the stand-in serves "
            f"no SPDY; this request's Upgrade: {what})",
        )
    key = headers.get("Sec-WebSocket-Key", "")
    if headers.get("Sec-WebSocket-Version") != "13" or not key:
        raise ExecRefused(400, "not a WebSocket version 13 handshake")
    protocol = negotiate(headers.get("Sec-WebSocket-Protocol", ""))
    accept = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.send_header("Sec-WebSocket-Protocol", protocol)
    handler.end_headers()
    handler.wfile.flush()
    handler.close_connection = True
    sock = handler.connection
    assert isinstance(sock, ssl.SSLSocket)
    ExecSession(sock, protocol, request, start).run()


class ExecSession:
    """One upgraded exec stream: a process and its channels, served by one thread (a TLS
    socket is read and written from this thread only)."""

    def __init__(
        self, sock: ssl.SSLSocket, protocol: str, request: ExecRequest, start: StartCommand
    ) -> None:
        self.sock = sock
        self.protocol = protocol
        self.request = request
        self.start = start
        self.reader = FrameReader()
        self.stdin: queue.Queue[bytes | None] | None = None

    def send(self, channel: int, data: bytes) -> None:
        self.sock.sendall(frame(OP_BINARY, bytes([channel]) + data))

    def run(self) -> None:
        request = self.request
        first = STDOUT if request.stdout else STDERR if request.stderr else ERROR
        try:
            self.send(first, b"")
            try:
                process = self.start(request)
            except (OSError, ExecRefused) as exc:
                self.send(ERROR, status_json(request.command, self.protocol, None, str(exc)))
                self.close(1000)
                return
            try:
                code = self._relay(process)
            finally:
                stop(process)
                for pipe in (process.stdin, process.stdout, process.stderr):
                    if pipe is not None:
                        with contextlib.suppress(OSError):
                            pipe.close()
            if code is not None:
                self.send(ERROR, status_json(request.command, self.protocol, code))
                self.close(1000)
        except (OSError, ValueError):
            return  # the API server's side went away: the process was stopped above

    def close(self, code: int) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(frame(OP_CLOSE, struct.pack("!H", code)))

    def _relay(self, process: subprocess.Popen[bytes]) -> int | None:
        """Output out, input in, until the process has ended and its output is drained;
        its exit code, or None if the client closed the stream first."""
        outputs = {
            pipe.fileno(): channel
            for pipe, channel in ((process.stdout, STDOUT), (process.stderr, STDERR))
            if pipe is not None
        }
        if process.stdin is not None:
            self.stdin = queue.Queue()
            threading.Thread(
                target=feed_stdin, args=(process.stdin, self.stdin), daemon=True
            ).start()
        try:
            while outputs or process.poll() is None:
                # Decrypted bytes the TLS layer holds do not make the socket readable.
                ready: list[int] = [self.sock.fileno()] if self.sock.pending() else []
                if not ready:
                    watched = [self.sock.fileno(), *outputs]
                    ready, _, _ = select.select(watched, [], [], 0.2)
                for source in ready:
                    if source == self.sock.fileno():
                        if not self._from_client():
                            return None
                        continue
                    chunk = os.read(source, 65536)
                    if chunk:
                        self.send(outputs[source], chunk)
                    else:
                        del outputs[source]
            return exit_code(process.wait())
        finally:
            if self.stdin is not None:
                self.stdin.put(None)

    def _from_client(self) -> bool:
        """Read what the client sent; False once it closed the stream."""
        data = self.sock.recv(65536)
        if not data:
            return False
        for opcode, payload in self.reader.feed(data):
            if opcode == OP_CLOSE:
                self.close(1000)
                return False
            if opcode == OP_PING:
                self.sock.sendall(frame(OP_PONG, payload))
            elif opcode in (OP_BINARY, OP_TEXT) and payload:
                self._on_message(payload)
        return True

    def _on_message(self, payload: bytes) -> None:
        channel, data = payload[0], payload[1:]
        if self.protocol == V5 and channel == CLOSE_SIGNAL:
            if data[:1] == bytes([STDIN]) and self.stdin is not None:
                self.stdin.put(None)
        elif channel == STDIN and self.stdin is not None and data:
            self.stdin.put(data)
        # resize (4) needs a terminal; other channels are not the client's to write


def feed_stdin(pipe: Any, chunks: queue.Queue[bytes | None]) -> None:
    """Write the client's stdin to the process (its own thread: a full pipe must not stall
    the stream); end of file on None."""
    with contextlib.suppress(OSError):
        while (chunk := chunks.get()) is not None:
            pipe.write(chunk)
            pipe.flush()
    with contextlib.suppress(OSError):
        pipe.close()


def exit_code(returncode: int) -> int:
    """As a container runtime reports it: 128 + N for a process ended by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def stop(process: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> None:
    """SIGTERM to the process's group (it leads one), SIGKILL after ``grace`` seconds."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        deadline = time.monotonic() + wait
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if process.poll() is not None:
            return
