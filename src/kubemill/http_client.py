"""kubemill's own HTTP/1.1 client: the one way kubemill sends a request that no library sends
for it.

Who uses it: every request of the Kubernetes substrate to the API server (see
:mod:`kubemill.substrates.kubernetes.transport`): the operator's writes, reads and leader
election (an :class:`HttpPool`, a client per thread of its pool), the SDK's and the CLI's
requests, watches and followed logs (an :class:`HttpPool`; :meth:`HttpClient.open` streams
an answer as it comes), Spark's cluster-mode submission, all with what a kubeconfig or a
pod's service account gives (:class:`Tls`, a bearer token, a proxy); the local substrate
asks a job's service for its remote run (a Ray job's status, its submission); Mars's in-pod
program asks its supervisors' web API which nodes are ready. (kopf keeps its own aiohttp
session for the operator's watches.)

Standard library only, and cheap to import: a process that sends a few requests must not
pay for ``http.client``'s or urllib3's imports. Two outcomes besides a 2xx answer, as
exceptions that keep what the server said and leave the wording to the caller:
:class:`HttpAnswer` (the server answered with another status) and :class:`NoAnswer`
(refused, reset, DNS, TLS, timeout, not HTTP).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from kubemill.http_wire import EXPECTING_BODY, Proxy, Stale, read_head, read_pieces

if TYPE_CHECKING:
    import socket
    import ssl

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


class HttpResponse:
    """An :class:`HttpClient`'s answer, read whole (shaped as a urllib3 response, so the
    Kubernetes transport's ``read``, ``read_json`` and ``lines`` take either)."""

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


class HttpStream:
    """A 2xx answer whose body is read as it comes (``HttpClient.send(stream=True)``):
    :meth:`stream` yields what has arrived (chunked, sized, or ending with the connection);
    :meth:`release_conn` gives the connection back (kept if the body was read to its end,
    else closed); :meth:`shutdown`, from another thread, ends a read that waits."""

    def __init__(
        self, status: int, reason: str, client: HttpClient, size: int | None, keep: bool
    ) -> None:
        self.status = status
        self.reason = reason
        self._client = client
        self._reader = client._reader
        self._socket = client._socket
        self._size = size
        self._keep = keep
        self._ended = False
        self._released = False
        self.on_release: Callable[[], None] | None = None
        """Called once the connection is back (an :class:`HttpPool` takes its client back)."""

    def stream(self, amount: int, decode_content: bool = True) -> Iterator[bytes]:
        """The body in pieces of at most ``amount`` bytes, each as soon as it has come.
        A cut connection is a ``ConnectionResetError`` (an ``OSError``)."""
        if self._released:
            return
        yield from read_pieces(self._reader, self._size, amount)
        self._ended = True

    @property
    def data(self) -> bytes:
        """The rest of the body, read whole."""
        return b"".join(self.stream(65536))

    def shutdown(self) -> None:
        """End the connection under a read in progress (in another thread), which then
        ends as a cut connection does."""
        import contextlib
        import socket

        if not self._released and self._socket is not None:
            with contextlib.suppress(OSError):  # already ended
                self._socket.shutdown(socket.SHUT_RDWR)

    def release_conn(self) -> None:
        """Give the connection back to its client (once)."""
        if self._released:
            return
        self._released = True
        if not (self._ended and self._keep):
            self._client.close()
        if self.on_release is not None:
            self.on_release()


class Tls:
    """How an ``https`` server is trusted and told who we are: a kubeconfig cluster's
    certificate authority (PEM data or a file; the system's certificates when neither),
    ``insecure-skip-tls-verify``, ``tls-server-name``, and its user's client certificate
    and key (PEM data or files).

    (A plain class, not a dataclass: generating a dataclass's methods costs a CLI
    submission a millisecond at import.)"""

    __slots__ = (
        "ca_data",
        "ca_file",
        "cert_data",
        "cert_file",
        "insecure",
        "key_data",
        "key_file",
        "server_name",
    )

    def __init__(
        self,
        *,
        ca_data: bytes | None = None,
        ca_file: str | None = None,
        insecure: bool = False,
        server_name: str | None = None,
        cert_data: bytes | None = None,
        key_data: bytes | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
    ) -> None:
        self.ca_data = ca_data
        self.ca_file = ca_file
        self.insecure = insecure
        self.server_name = server_name
        self.cert_data = cert_data
        self.key_data = key_data
        self.cert_file = cert_file
        self.key_file = key_file

    def context(self) -> ssl.SSLContext:
        """An SSL context of these settings; ``OSError``/``ssl.SSLError`` if unusable."""
        import ssl

        context = ssl.create_default_context()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None or self.ca_file is not None:
            # The cluster's own authority only, as the official client trusts it.
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if self.ca_data is not None:
                context.load_verify_locations(cadata=self.ca_data.decode("ascii"))
            if self.ca_file is not None:
                context.load_verify_locations(cafile=self.ca_file)
        if self.cert_data is not None or self.cert_file is not None:
            _load_client_certificate(context, self)
        return context


def _load_client_certificate(context: ssl.SSLContext, tls: Tls) -> None:
    """The client certificate and key into ``context``: ``ssl`` loads them from files only,
    so PEM data goes through files of a private directory, removed at once."""
    if tls.cert_data is None and tls.key_data is None:
        context.load_cert_chain(str(tls.cert_file), tls.key_file)
        return
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="kubemill-tls-") as private:  # mode 0700
        cert = tls.cert_file
        if tls.cert_data is not None:
            cert = str(Path(private) / "client.crt")
            Path(cert).write_bytes(tls.cert_data)
        key = tls.key_file
        if tls.key_data is not None:
            key = str(Path(private) / "client.key")
            Path(key).write_bytes(tls.key_data)
        context.load_cert_chain(str(cert), key)


class _Sender:
    """:meth:`send` and :meth:`open` over the ``exchange`` of a client or a pool."""

    def exchange(
        self,
        method: str,
        path: str,
        query: Iterable[tuple[str, str]],
        body: Any,
        content_type: str,
        timeout: tuple[float, float | None],
        *,
        stream: bool,
    ) -> HttpResponse | HttpStream:
        raise NotImplementedError

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float | None] = DEFAULT_TIMEOUT,
    ) -> HttpResponse:
        """The answer of a 2xx, read whole; raises :class:`HttpAnswer` (any other status,
        with its body) or :class:`NoAnswer` (refused, reset, TLS, timeout, not HTTP)."""
        answer = self.exchange(method, path, query, body, content_type, timeout, stream=False)
        assert isinstance(answer, HttpResponse)
        return answer

    def open(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float | None] = DEFAULT_TIMEOUT,
    ) -> HttpStream:
        """As :meth:`send`, but the 2xx answer's body is read as it comes (a watch, a
        followed log): the connection is the stream's until it is released."""
        answer = self.exchange(method, path, query, body, content_type, timeout, stream=True)
        assert isinstance(answer, HttpStream)
        return answer


class HttpClient(_Sender):
    """One server (``http://`` or ``https://``, with an optional path prefix), reached over
    a socket of our own (see the module doc).

    What goes over the wire is what ``kubernetes.client.ApiClient`` sends with the same
    configuration: the query as ``k=quoted(v)`` pairs, the headers ``Content-Type``,
    ``Accept``, ``User-Agent`` and, with credentials, ``authorization``, a body as
    ``json.dumps`` writes it. HTTP/1.1 is written and read here, not by ``http.client``,
    whose imports (the ``email`` package) cost a CLI process more than the rest of its
    submission: answers with a ``Content-Length``, chunked, or ending with the connection.
    One connection is kept for the requests that follow (a submission sends four); one
    that the server closed meanwhile is opened again.

    ``tls``: how ``https`` is verified and which client certificate is shown (the system's
    certificates and none by default). ``authorization``: the ``Authorization`` header's
    value, asked before each request (an exec plugin's token may be renewed). ``proxy``:
    an ``http://`` proxy, tunnelled through with ``CONNECT`` for an ``https`` server.
    """

    def __init__(
        self,
        server: str,
        *,
        user_agent: str,
        tls: Tls | None = None,
        authorization: Callable[[], str | None] | None = None,
        proxy: str | None = None,
    ) -> None:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{server!r} is not an http:// or https:// URL")
        self.server = server.rstrip("/")
        self.user_agent = user_agent
        self.tls = tls or Tls()
        self.authorization = authorization
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        # As http.client writes it: the port only when it is not the scheme's own.
        host = f"[{self._host}]" if ":" in self._host else self._host
        default = 443 if self._tls else 80
        self._host_header = host if self._port == default else f"{host}:{self._port}"
        self._prefix = parts.path.rstrip("/")
        self._proxy = Proxy.of(proxy) if proxy else None
        self._context: ssl.SSLContext | None = None
        self._socket: socket.socket | None = None
        self._reader: Any = None
        self.sent = 0
        """Requests whose bytes started to leave (0: the server has seen nothing)."""

    def _connect(self, timeout: tuple[float, float | None]) -> None:
        import socket

        connect_timeout, read_timeout = timeout
        where = (self._host, self._port) if self._proxy is None else self._proxy.address
        sock = socket.create_connection(where, timeout=connect_timeout)
        try:
            if self._proxy is not None and self._tls:
                self._proxy.tunnel(sock, self._host_header)
            if self._tls:
                if self._context is None:
                    self._context = self.tls.context()
                sock = self._context.wrap_socket(
                    sock, server_hostname=self.tls.server_name or self._host
                )
        except BaseException:
            sock.close()
            raise
        sock.settimeout(read_timeout)
        self._socket = sock
        self._reader = sock.makefile("rb")

    def exchange(
        self,
        method: str,
        path: str,
        query: Iterable[tuple[str, str]],
        body: Any,
        content_type: str,
        timeout: tuple[float, float | None],
        *,
        stream: bool,
    ) -> HttpResponse | HttpStream:
        """:meth:`send` or :meth:`open`."""
        url = self._prefix + path
        pairs = list(query)
        if pairs:
            url += "?" + "&".join(f"{key}={quote(str(value))}" for key, value in pairs)
        if self._proxy is not None and not self._tls:
            url = f"http://{self._host_header}{url}"  # a proxy takes the absolute form
        payload = b"" if body is None else json.dumps(body).encode()
        head = [
            f"{method} {url} HTTP/1.1",
            f"Host: {self._host_header}",
            f"Content-Type: {content_type}",
            "Accept: application/json",
            f"User-Agent: {self.user_agent}",
        ]
        credentials = self.authorization() if self.authorization is not None else None
        if credentials:
            head.append(f"authorization: {credentials}")  # spelt as the official client does
        if self._proxy is not None and not self._tls and self._proxy.authorization:
            head.append(f"Proxy-Authorization: {self._proxy.authorization}")
        if body is not None or method in EXPECTING_BODY:
            head.append(f"Content-Length: {len(payload)}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload
        for attempt in (1, 2):
            reused = self._socket is not None
            try:
                if self._socket is None:
                    self._connect(timeout)
                assert self._socket is not None
                if self._socket.gettimeout() != timeout[1]:
                    self._socket.settimeout(timeout[1])  # a kept connection: this request's
                self.sent += 1
                self._socket.sendall(request)
                status, reason, size, keep = read_head(self._reader, method)
                ok = 200 <= status <= 299
                data = b"" if stream and ok else b"".join(read_pieces(self._reader, size, None))
            except (OSError, Stale, ValueError) as exc:
                self.close()
                stale = isinstance(exc, Stale | BrokenPipeError | ConnectionResetError)
                if reused and stale and attempt == 1:
                    continue  # a kept connection the server had closed: open a new one
                raise NoAnswer(str(exc) or type(exc).__name__) from exc
            if stream and ok:
                return HttpStream(status, reason, self, size, keep)
            if not keep:
                self.close()
            if not ok:
                raise HttpAnswer(status, reason, data)
            return HttpResponse(status, reason, data)
        raise AssertionError("not reached")  # pragma: no cover

    def close(self) -> None:
        """Close the kept connection (a later request opens another)."""
        if self._socket is not None:
            self._reader.close()
            self._socket.close()
            self._socket = None
            self._reader = None


class HttpPool(_Sender):
    """:class:`HttpClient` s of one server for several threads at once (the operator's
    writes, ``size`` threads on its pool): a request borrows an idle client, with its kept
    connection, or makes one, and gives it back after the answer; at most ``size`` stay idle.
    They share one SSL context (its certificates are read once). Arguments and the answer
    are :class:`HttpClient`'s."""

    def __init__(
        self,
        server: str,
        *,
        size: int,
        user_agent: str,
        tls: Tls | None = None,
        authorization: Callable[[], str | None] | None = None,
        proxy: str | None = None,
    ) -> None:
        import threading

        def make() -> HttpClient:
            return HttpClient(
                server,
                user_agent=self.user_agent,
                tls=tls,
                authorization=authorization,
                proxy=proxy,
            )

        self.user_agent = user_agent
        """Sent with each request (one may change it, as on an ``ApiClient``)."""

        self._make = make
        first = self._make()  # an unusable server or proxy is refused here, not per request
        self.server = first.server
        self.size = size
        self._idle = [first]
        self._lock = threading.Lock()
        self._context_lock = threading.Lock()
        self._context: ssl.SSLContext | None = None

    def exchange(
        self,
        method: str,
        path: str,
        query: Iterable[tuple[str, str]],
        body: Any,
        content_type: str,
        timeout: tuple[float, float | None],
        *,
        stream: bool,
    ) -> HttpResponse | HttpStream:
        """:meth:`send` or :meth:`open`."""
        with self._lock:
            client = self._idle.pop() if self._idle else self._make()
        client.user_agent = self.user_agent
        if client._context is None and client._tls:
            client._context = self._shared_context(client)
        try:
            answer = client.exchange(
                method, path, query, body, content_type, timeout, stream=stream
            )
        except BaseException:
            self._give_back(client)
            raise
        if isinstance(answer, HttpStream):
            answer.on_release = lambda: self._give_back(client)
        else:
            self._give_back(client)
        return answer

    def _shared_context(self, client: HttpClient) -> ssl.SSLContext | None:
        """The one SSL context of the pool's clients, made by the first that needs it: the
        clients a burst of requests makes at once would each make (and keep) their own,
        ~70 KiB each with a client certificate. None when it cannot be made: the client's
        own connect then says why, as an unpooled client's does."""
        with self._context_lock:
            if self._context is None:
                try:
                    self._context = client.tls.context()
                except (OSError, ValueError):
                    return None
            return self._context

    def _give_back(self, client: HttpClient) -> None:
        with self._lock:
            keep = len(self._idle) < self.size
            if keep:
                self._idle.append(client)
        if not keep:
            client.close()

    def close(self) -> None:
        """Close the idle clients' connections (a later request opens another)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for client in idle:
            client.close()


def request(
    method: str,
    url: str,
    *,
    body: Any = None,
    user_agent: str,
    timeout: tuple[float, float | None] = DEFAULT_TIMEOUT,
    authorization: str | None = None,
) -> HttpResponse:
    """One request to a whole ``url`` (its path and query sent as given) on a connection of
    its own, closed after the answer; a ``body`` is sent as JSON, ``authorization`` as the
    ``Authorization`` header. Raises :class:`HttpAnswer` or :class:`NoAnswer` as
    :meth:`HttpClient.send` does."""
    parts = urlsplit(url)
    client = HttpClient(
        f"{parts.scheme}://{parts.netloc}",
        user_agent=user_agent,
        authorization=None if authorization is None else lambda: authorization,
    )
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        return client.send(method, target, body=body, timeout=timeout)
    finally:
        client.close()


__all__ = [
    "DEFAULT_TIMEOUT",
    "HttpAnswer",
    "HttpClient",
    "HttpPool",
    "HttpResponse",
    "HttpStream",
    "NoAnswer",
    "Tls",
    "request",
]
