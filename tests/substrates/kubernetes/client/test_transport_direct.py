"""kubemill's :class:`~kubemill.http_client.HttpClient` sends the bytes ``ApiClient`` sends.

A recording HTTP server on 127.0.0.1 takes the same requests from both clients through
:func:`kubemill.substrates.kubernetes.transport.send` (the official client configured with
only the host, as ``connect_to`` makes it without a kubeconfig): the request line, the
headers an API server reads and the body are byte for byte the same, and so are the
outcomes (a 2xx's body, :class:`HttpAnswer` with the server's status and body,
:class:`NoAnswer` when nothing listens). A kept connection the server closed is opened
again; chunked answers and answers that end with the connection are read whole.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kubemill.http_client import HttpClient
from kubemill.substrates.kubernetes import transport
from kubemill.substrates.kubernetes.client.connection import USER_AGENT
from kubemill.substrates.kubernetes.client.errors import unreachable
from support.kube_client_support import closed_port

READ_HEADERS = ("Host", "Content-Type", "Accept", "User-Agent", "Content-Length", "authorization")
"""What an API server reads of a request's headers (the official client spells the last so)."""

REQUESTS: list[dict[str, Any]] = [
    {
        "method": "POST",
        "path": "/api/v1/namespaces/default/pods",
        "body": {"metadata": {"name": "p", "labels": {"a": "é"}}, "spec": {"x": [1, True, None]}},
    },
    {
        "method": "PATCH",
        "path": "/api/v1/namespaces/default/configmaps/c",
        "query": [("fieldManager", "kubemill"), ("force", "true")],
        "body": {"data": {"spark.properties": "a=b\n#x: y\n"}, "immutable": True},
        "content_type": "application/apply-patch+yaml",
    },
    {
        "method": "GET",
        "path": "/api/v1/namespaces/default/pods",
        "query": [("labelSelector", "spark-role=driver,a in (b c)")],
    },
    {
        "method": "DELETE",
        "path": "/api/v1/namespaces/default/pods/p",
        "query": [("gracePeriodSeconds", "0")],
    },
]


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with a JSON body (or the status asked in ``answer``)."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, dict[str, str], bytes]]
    answer = 200
    close_after = False

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k in READ_HEADERS}
        self.seen.append((self.requestline, headers, body))
        reply = b'{"kind": "Status", "code": %d}' % self.answer
        self.send_response(self.answer)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        self.wfile.flush()
        if self.close_after:
            # Closed without saying so (no "Connection: close"), as an idle timeout does.
            self.close_connection = True

    do_GET = do_POST = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Recorder]]]:
    handler = type("Handler", (Recorder,), {"seen": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def official(url: str) -> Any:
    """The client ``connect_to`` makes for a server without a kubeconfig."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = url
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return api_client


def send_all(api_client: Any) -> list[Any]:
    out = []
    for request in REQUESTS:
        raw = transport.send(
            api_client,
            request["method"],
            request["path"],
            query=request.get("query", ()),
            body=request.get("body"),
            content_type=request.get("content_type", "application/json"),
        )
        out.append(transport.read_json(raw))
    return out


def test_the_same_bytes_as_the_official_client(server: tuple[str, type[Recorder]]) -> None:
    url, handler = server
    answers = send_all(official(url))
    by_official = list(handler.seen)
    handler.seen.clear()
    direct = HttpClient(url, user_agent=USER_AGENT)
    assert send_all(direct) == answers
    assert handler.seen == by_official
    assert len(by_official) == len(REQUESTS)
    assert by_official[1][0].startswith(
        "PATCH /api/v1/namespaces/default/configmaps/c?fieldManager=kubemill&force=true "
    )
    assert direct.sent == len(REQUESTS)


def test_with_a_token_the_same_bytes_too(server: tuple[str, type[Recorder]]) -> None:
    """A kubeconfig user's token, as the official client sends it."""
    url, handler = server
    api_client = official(url)
    api_client.configuration.api_key = {"BearerToken": "Bearer s3cret"}
    answers = send_all(api_client)
    by_official = list(handler.seen)
    handler.seen.clear()
    direct = HttpClient(url, user_agent=USER_AGENT, authorization=lambda: "Bearer s3cret")
    assert send_all(direct) == answers
    assert handler.seen == by_official
    assert all(headers["authorization"] == "Bearer s3cret" for _, headers, _ in by_official)


def test_an_error_answer_is_the_same(server: tuple[str, type[Recorder]]) -> None:
    url, handler = server
    handler.answer = 409
    answers = []
    for api_client in (official(url), HttpClient(url, user_agent=USER_AGENT)):
        with pytest.raises(transport.HttpAnswer) as raised:
            transport.send(api_client, "POST", "/api/v1/namespaces/default/pods", body={})
        answers.append((raised.value.status, raised.value.reason, bytes(raised.value.body or b"")))
    assert answers[0] == answers[1]
    assert answers[0][0] == 409


def test_nothing_listening_is_no_answer_with_the_same_words() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    said = []
    for api_client in (official(url), HttpClient(url, user_agent=USER_AGENT)):
        with pytest.raises(transport.NoAnswer) as raised:
            transport.send(api_client, "GET", "/api/v1/namespaces", timeout=(2.0, 2.0))
        cause = raised.value.__cause__ or raised.value
        said.append(str(unreachable(cause, server=url, context=None)))
    assert said[0] == said[1]
    assert "Connection refused" in said[1]


def test_a_kept_connection_the_server_closed_is_opened_again(
    server: tuple[str, type[Recorder]],
) -> None:
    url, handler = server
    handler.close_after = True
    direct = HttpClient(url, user_agent=USER_AGENT)
    for _ in range(3):
        transport.read(transport.send(direct, "GET", "/api/v1/namespaces"))
    assert len(handler.seen) == 3


def test_a_server_that_is_no_http_url_is_refused() -> None:
    with pytest.raises(ValueError, match="not an http"):
        HttpClient("ftp://host", user_agent=USER_AGENT)


CHUNKED = (
    b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
    b'5\r\n{"a":\r\n4;ext=1\r\n 1, \r\n7\r\n"b": 2}\r\n0\r\nX-Trailer: t\r\n\r\n'
)
UNTIL_CLOSED = b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"a": 1, "b": 2}'


@pytest.mark.parametrize("answer", [CHUNKED, UNTIL_CLOSED], ids=["chunked", "until-closed"])
def test_answers_without_a_length_are_read_whole(answer: bytes) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        for _ in range(2):  # the second request comes on a connection of its own when closed
            connection, _ = listener.accept()
            with connection:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += connection.recv(65536)
                received.append(data)
                connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    direct = HttpClient(url, user_agent=USER_AGENT)
    try:
        for _ in range(2):
            raw = transport.send(direct, "GET", "/api/v1/namespaces", timeout=(5.0, 5.0))
            assert transport.read_json(raw) == {"a": 1, "b": 2}
            direct.close()
    finally:
        listener.close()
    thread.join(timeout=5)
    assert len(received) == 2
    assert received[0].startswith(b"GET /api/v1/namespaces HTTP/1.1\r\n")
