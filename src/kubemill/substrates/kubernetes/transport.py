"""The one way the Kubernetes substrate sends HTTP requests of its own: ``ApiClient.call_api``.

Requests go through the official client's generic ``ApiClient.call_api`` with plain JSON
bodies, so configuration, authentication (kubeconfig, service account, exec plugins), TLS,
proxies and connection pooling are the client's, and nothing else opens sockets to the API
server. Not the typed ``CoreV1Api``/``CustomObjectsApi`` methods: those validate arguments
and bodies against the client's own models (strictly, since ``kubernetes`` 35), refuse
fields a client version does not know, and turn pods into model objects that we would only
turn back into dicts.

Two outcomes besides a 2xx response, as exceptions that keep what the server said and leave
the wording to the caller: :class:`HttpAnswer` (the server answered with an error) and
:class:`NoAnswer` (refused, reset, DNS, TLS, timeout). The ``kubernetes`` package is
imported on the first request only, so importing this module stays cheap.

One exception, for a server reached with no credentials at all (``kubemill spark-submit
--master k8s://URL`` with no kubeconfig: a test server, ``kubectl proxy``): :class:`PlainClient`
sends the very requests ``ApiClient`` sends with a bare configuration (same method, path,
query, headers and JSON body) over a socket of its own, so that the submission does not
import the ``kubernetes`` package (a tenth of a second per process).
:func:`send` takes either.

(kopf keeps its own aiohttp session for its watches; leader election uses the client's
``CoordinationV1Api`` through ``kubernetes.leaderelection``. Both are libraries' own.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

if TYPE_CHECKING:
    import socket

DEFAULT_TIMEOUT = (5.0, 60.0)
"""(connect, read) seconds for one ordinary request."""


class HttpAnswer(Exception):
    """A non-2xx answer: its status, the HTTP reason phrase and the body (a ``Status``)."""

    def __init__(self, status: int, reason: str, body: bytes | str | None) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body


class NoAnswer(Exception):
    """No answer at all; the connection-level error is the ``__cause__``."""


def is_connection_error(exc: BaseException) -> bool:
    """urllib3's errors (refused, reset, timeouts, DNS) and the OS errors under them."""
    return isinstance(exc, OSError) or type(exc).__module__.startswith("urllib3")


def api_path(
    *, group: str, version: str, plural: str, namespace: str | None, name: str | None = None
) -> str:
    """``/api/v1/namespaces/NS/pods[/NAME]`` or ``/apis/GROUP/VERSION/...`` (names quoted)."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespace is not None:
        prefix = f"{prefix}/namespaces/{quote(namespace, safe='')}"
    path = f"{prefix}/{plural}"
    return path if name is None else f"{path}/{quote(name, safe='')}"


def send(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: Iterable[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = "application/json",
    timeout: tuple[float, float | None] = DEFAULT_TIMEOUT,
) -> Any:
    """The urllib3 response of a 2xx answer, not read yet (stream it or :func:`read` it).

    Raises :class:`HttpAnswer` or :class:`NoAnswer`.
    """
    if isinstance(api_client, PlainClient):
        return api_client.send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
    from kubernetes.client.exceptions import ApiException

    headers = {"Content-Type": content_type, "Accept": "application/json"}
    try:
        method_, url, header_params, payload, _ = api_client.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api_client.call_api(
            method_, url, header_params=header_params, body=payload, _request_timeout=timeout
        )
    except ApiException as exc:
        if not exc.status:  # the client's own "status 0": TLS and such
            raise NoAnswer(str(exc)) from exc
        raise HttpAnswer(int(exc.status), str(exc.reason or ""), exc.body) from exc
    except Exception as exc:
        if is_connection_error(exc):
            raise NoAnswer(str(exc)) from exc
        raise
    raw = response.response
    if not 200 <= response.status <= 299:
        raise HttpAnswer(int(response.status), str(response.reason or ""), read(raw))
    return raw


class PlainResponse:
    """A :class:`PlainClient`'s answer, read whole, shaped as the urllib3 response that
    :func:`read`, :func:`read_json` and :func:`lines` take."""

    def __init__(self, status: int, reason: str, data: bytes) -> None:
        self.status = status
        self.reason = reason
        self.data = data

    def release_conn(self) -> None:
        """Nothing to release: the body was read with the answer."""

    def stream(self, amount: int, decode_content: bool = True) -> Iterator[bytes]:
        """The body in chunks of ``amount`` bytes."""
        for start in range(0, len(self.data), amount):
            yield self.data[start : start + amount]


class PlainClient:
    """An API server reached with no credentials and no proxy, over a socket of its own.

    What goes over the wire is what ``kubernetes.client.ApiClient`` sends with a
    configuration naming only the host: the query as ``k=quoted(v)`` pairs, the headers
    ``Content-Type``, ``Accept`` and ``User-Agent``, a body as ``json.dumps`` writes it.
    HTTP/1.1 is written and read here, not by ``http.client``, whose imports (the ``email``
    package, ``ssl``) cost a CLI process more than the rest of its submission: answers
    with a ``Content-Length``, chunked, or ending with the connection. One connection is
    kept for the requests that follow (a submission sends four); one that the server
    closed meanwhile is opened again. ``https`` verifies the server with the system's
    certificates, as the client does without a certificate authority.
    """

    def __init__(self, server: str, *, user_agent: str) -> None:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{server!r} is not an http:// or https:// URL")
        self.server = server.rstrip("/")
        self.user_agent = user_agent
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        # As http.client writes it: the port only when it is not the scheme's own.
        host = f"[{self._host}]" if ":" in self._host else self._host
        default = 443 if self._tls else 80
        self._host_header = host if self._port == default else f"{host}:{self._port}"
        self._prefix = parts.path.rstrip("/")
        self._socket: socket.socket | None = None
        self._reader: Any = None
        self.sent = 0
        """Requests whose bytes started to leave (0: the server has seen nothing)."""

    def _connect(self, timeout: tuple[float, float | None]) -> None:
        import socket

        connect_timeout, read_timeout = timeout
        sock = socket.create_connection((self._host, self._port), timeout=connect_timeout)
        if self._tls:
            import ssl

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._host)
        sock.settimeout(read_timeout)
        self._socket = sock
        self._reader = sock.makefile("rb")

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float | None] = DEFAULT_TIMEOUT,
    ) -> PlainResponse:
        """The answer of a 2xx; raises :class:`HttpAnswer` or :class:`NoAnswer` (see
        :func:`send`)."""
        url = self._prefix + path
        pairs = list(query)
        if pairs:
            url += "?" + "&".join(f"{key}={quote(str(value))}" for key, value in pairs)
        payload = b"" if body is None else json.dumps(body).encode()
        head = [
            f"{method} {url} HTTP/1.1",
            f"Host: {self._host_header}",
            f"Content-Type: {content_type}",
            "Accept: application/json",
            f"User-Agent: {self.user_agent}",
        ]
        if body is not None or method in _EXPECTING_BODY:
            head.append(f"Content-Length: {len(payload)}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload
        for attempt in (1, 2):
            reused = self._socket is not None
            try:
                if self._socket is None:
                    self._connect(timeout)
                assert self._socket is not None
                self.sent += 1
                self._socket.sendall(request)
                status, reason, data, keep = self._answer(method)
            except (OSError, _Stale, ValueError) as exc:
                self.close()
                stale = isinstance(exc, _Stale | BrokenPipeError | ConnectionResetError)
                if reused and stale and attempt == 1:
                    continue  # a kept connection the server had closed: open a new one
                raise NoAnswer(str(exc) or type(exc).__name__) from exc
            if not keep:
                self.close()
            if not 200 <= status <= 299:
                raise HttpAnswer(status, reason, data)
            return PlainResponse(status, reason, data)
        raise AssertionError("not reached")  # pragma: no cover

    def _answer(self, method: str) -> tuple[int, str, bytes, bool]:
        """(status, reason, body, whether the connection stays open) of the next answer."""
        reader = self._reader
        while True:
            line = reader.readline(_MAX_LINE)
            if not line:
                raise _Stale("the server closed the connection without answering")
            version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/") or not code.isdigit():
                raise ValueError(f"not an HTTP answer: {line[:80]!r}")
            headers: dict[str, str] = {}
            while True:
                field = reader.readline(_MAX_LINE)
                if field in (b"\r\n", b"\n", b""):
                    break
                name, _, value = field.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            status = int(code)
            if not 100 <= status <= 199:
                break  # (an informational answer precedes the real one)
        connection = headers.get("connection", "").lower()
        keep = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
        if method == "HEAD" or status in (204, 304):
            return status, reason, b"", keep
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                size = int(reader.readline(_MAX_LINE).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while reader.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunks.append(_exactly(reader, size))
                reader.readline(_MAX_LINE)
            return status, reason, b"".join(chunks), keep
        if "content-length" in headers:
            return status, reason, _exactly(reader, int(headers["content-length"])), keep
        return status, reason, reader.read(), False  # the body ends with the connection

    def close(self) -> None:
        """Close the kept connection (a later request opens another)."""
        if self._socket is not None:
            self._reader.close()
            self._socket.close()
            self._socket = None
            self._reader = None


_EXPECTING_BODY = ("POST", "PUT", "PATCH")
"""Methods sent with ``Content-Length: 0`` when they carry no body (as http.client does)."""
_MAX_LINE = 65537


class _Stale(Exception):
    """The connection ended before an answer began."""


def _exactly(reader: Any, size: int) -> bytes:
    data = reader.read(size)
    if len(data) != size:
        raise ConnectionResetError(f"the answer ended after {len(data)} of {size} bytes")
    return bytes(data)


def read(raw: Any) -> bytes:
    """The whole body of a response, its connection back in the pool. Raises :class:`NoAnswer`."""
    try:
        return bytes(raw.data or b"")
    except Exception as exc:
        if is_connection_error(exc):
            raise NoAnswer(str(exc)) from exc
        raise
    finally:
        raw.release_conn()


def read_json(raw: Any) -> Any:
    """The body of a response as JSON (``{}`` when empty)."""
    data = read(raw)
    return json.loads(data) if data else {}


def lines(raw: Any) -> Iterator[str]:
    """Complete lines of a streamed response (a last line without newline included)."""
    partial = b""
    for chunk in raw.stream(4096, decode_content=True):
        partial += chunk
        *complete, partial = partial.split(b"\n")
        for line in complete:
            yield line.decode("utf-8", errors="replace").rstrip("\r")
    if partial:
        yield partial.decode("utf-8", errors="replace").rstrip("\r")


__all__ = [
    "DEFAULT_TIMEOUT",
    "HttpAnswer",
    "NoAnswer",
    "PlainClient",
    "PlainResponse",
    "api_path",
    "is_connection_error",
    "lines",
    "read",
    "read_json",
    "send",
]
