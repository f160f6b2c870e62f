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
query, headers and JSON body) over the standard library's ``http.client``, so that the
submission does not import the ``kubernetes`` package (a tenth of a second per process).
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
    import http.client

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
    """An API server reached with no credentials and no proxy, through ``http.client``.

    What goes over the wire is what ``kubernetes.client.ApiClient`` sends with a
    configuration naming only the host: the query as ``k=quoted(v)`` pairs, the headers
    ``Content-Type``, ``Accept`` and ``User-Agent``, a body as ``json.dumps`` writes it. One
    connection is kept open for the requests that follow (a submission sends four); one
    that the server closed meanwhile is opened again. ``https`` verifies the server with
    the system's certificates, as the client does without a certificate authority.
    """

    def __init__(self, server: str, *, user_agent: str) -> None:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{server!r} is not an http:// or https:// URL")
        self.server = server.rstrip("/")
        self.user_agent = user_agent
        self._parts = parts
        self._prefix = parts.path.rstrip("/")
        self._connection: http.client.HTTPConnection | None = None
        self.sent = 0
        """Requests whose bytes started to leave (0: the server has seen nothing)."""

    def _connect(self, timeout: tuple[float, float | None]) -> http.client.HTTPConnection:
        import http.client

        connect_timeout, read_timeout = timeout
        parts = self._parts
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            import ssl

            connection = http.client.HTTPSConnection(
                parts.hostname or "",
                parts.port,
                timeout=connect_timeout,
                context=ssl.create_default_context(),
            )
        else:
            connection = http.client.HTTPConnection(
                parts.hostname or "", parts.port, timeout=connect_timeout
            )
        connection.connect()
        if connection.sock is not None:
            connection.sock.settimeout(read_timeout)
        return connection

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
        import http.client

        url = self._prefix + path
        pairs = list(query)
        if pairs:
            url += "?" + "&".join(f"{key}={quote(str(value))}" for key, value in pairs)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        headers["User-Agent"] = self.user_agent
        payload = None if body is None else json.dumps(body).encode()
        for attempt in (1, 2):
            reused = self._connection is not None
            try:
                if self._connection is None:
                    self._connection = self._connect(timeout)
                self.sent += 1
                self._connection.request(method, url, body=payload, headers=headers)
                answer = self._connection.getresponse()
                data = answer.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                stale = isinstance(
                    exc, http.client.RemoteDisconnected | BrokenPipeError | ConnectionResetError
                )
                if reused and stale and attempt == 1:
                    continue  # a kept connection the server had closed: open a new one
                raise NoAnswer(str(exc) or type(exc).__name__) from exc
            if answer.will_close:
                self.close()
            if not 200 <= answer.status <= 299:
                raise HttpAnswer(answer.status, answer.reason, data)
            return PlainResponse(answer.status, answer.reason, data)
        raise AssertionError("not reached")  # pragma: no cover

    def close(self) -> None:
        """Close the kept connection (a later request opens another)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


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
