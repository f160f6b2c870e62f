"""kubemill's one HTTP client, asked for a whole URL (``http_client.request``) as the local
substrate asks a job's service and Mars's pod program asks its supervisors: the path and
query arrive as given, a body arrives as JSON, another status is an :class:`HttpAnswer`
with the server's words, and a port nothing listens on is a :class:`NoAnswer`. The
operator's :class:`HttpPool` serves threads at once, each answer its own, on kept connections.
A streamed answer (a watch, a followed log: ``open``) gives each chunk as it comes, frees
its connection for the next request once read to its end, and ends a waiting read when shut.
(Spark's submission through :class:`HttpClient` is compared byte for byte with the official
client in ``tests/substrates/kubernetes/client/test_transport_direct.py``.)"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubemill import http_client
from support.kube_client_support import closed_port


class Echo(http.server.BaseHTTPRequestHandler):
    """Answers with what it was asked, as JSON; a path under /missing is a 404."""

    protocol_version = "HTTP/1.1"
    peers: list[int] = []
    """The client port of each request (one per connection)."""

    def _answer(self) -> None:
        Echo.peers.append(self.client_address[1])
        if self.path.startswith("/slow"):
            time.sleep(1)
        size = int(self.headers.get("Content-Length") or 0)
        asked = {
            "method": self.command,
            "target": self.path,
            "type": self.headers.get("Content-Type"),
            "body": json.loads(self.rfile.read(size)) if size else None,
        }
        status = 404 if self.path.startswith("/missing") else 200
        data = json.dumps(asked).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def do_PUT(self) -> None:
        """A chunked answer: ``first``, then ``second`` once the test lets it go."""
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in (b"first\n", b"second\n"):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            if piece == b"first\n" and not Echo.go_on.wait(timeout=30):
                return  # the test stopped waiting: end without the last chunk
        self.wfile.write(b"0\r\n\r\n")

    go_on = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the answers."""


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_a_get_sends_the_path_and_query_as_given(server: str) -> None:
    answer = http_client.request(
        "GET", f"{server}/api/cluster/nodes?role=1&statuses=a%20b", user_agent="t"
    )
    assert answer.status == 200
    assert json.loads(answer.data) == {
        "method": "GET",
        "target": "/api/cluster/nodes?role=1&statuses=a%20b",
        "type": "application/json",
        "body": None,
    }


def test_a_post_sends_its_body_as_json(server: str) -> None:
    body = {"entrypoint": "python -c 'print(1)'", "metadata": {"a": "é"}}
    answer = http_client.request("POST", f"{server}/api/jobs/", body=body, user_agent="t")
    assert json.loads(answer.data)["body"] == body


def test_another_status_keeps_the_servers_words(server: str) -> None:
    with pytest.raises(http_client.HttpAnswer) as refused:
        http_client.request("GET", f"{server}/missing/job", user_agent="t")
    assert refused.value.status == 404
    assert isinstance(refused.value.body, bytes)
    assert json.loads(refused.value.body)["target"] == "/missing/job"


def test_nothing_listening_is_no_answer() -> None:
    with pytest.raises(http_client.NoAnswer):
        http_client.request("GET", f"http://127.0.0.1:{closed_port()}/", user_agent="t")


def test_a_pool_answers_each_thread_its_own_on_kept_connections(server: str) -> None:
    Echo.peers.clear()
    pool = http_client.HttpPool(server, size=3, user_agent="t")
    for number in range(5):  # one at a time: one connection, kept
        assert json.loads(pool.send("GET", f"/one/{number}").data)["target"] == f"/one/{number}"
    assert len(set(Echo.peers)) == 1

    Echo.peers.clear()
    start = threading.Barrier(6)
    mixed: list[str] = []

    def ask(thread: int) -> None:
        start.wait()
        for number in range(20):
            target = f"/thread/{thread}/{number}"
            answer = json.loads(pool.send("POST", target, body={"n": number}).data)
            if (answer["target"], answer["body"]) != (target, {"n": number}):
                mixed.append(f"{target}: {answer}")

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert mixed == []
    assert len(Echo.peers) == 120
    assert len(set(Echo.peers)) < 30  # connections kept, not one a request
    assert len(pool._idle) <= 3
    pool.close()
    assert pool._idle == []


def test_a_streamed_answer_comes_as_it_is_written_and_frees_its_connection(server: str) -> None:
    Echo.peers.clear()
    Echo.go_on.clear()
    pool = http_client.HttpPool(server, size=2, user_agent="t")
    answer = pool.open("PUT", "/watch")
    pieces = answer.stream(4096)
    assert next(pieces) == b"first\n"  # before the server has written the rest
    Echo.go_on.set()
    assert b"".join(pieces) == b"second\n"
    answer.release_conn()
    assert json.loads(pool.send("GET", "/after").data)["target"] == "/after"
    assert len(set(Echo.peers)) == 1  # the streamed answer's connection, reused


def test_shutting_a_stream_ends_a_read_that_waits(server: str) -> None:
    Echo.go_on.clear()
    pool = http_client.HttpPool(server, size=2, user_agent="t")
    answer = pool.open("PUT", "/watch", timeout=(5.0, None))  # no read timeout, as a log
    pieces = answer.stream(4096)
    assert next(pieces) == b"first\n"
    threading.Timer(0.2, answer.shutdown).start()
    with pytest.raises(OSError):
        b"".join(pieces)  # waits for "second" until shut
    answer.release_conn()
    Echo.go_on.set()
    assert json.loads(pool.send("GET", "/again").data)["target"] == "/again"


def test_each_request_has_its_own_read_timeout_on_a_kept_connection(server: str) -> None:
    client = http_client.HttpClient(server, user_agent="t")
    assert client.send("GET", "/first", timeout=(5.0, 60.0)).status == 200
    with pytest.raises(http_client.NoAnswer):
        client.send("GET", "/slow", timeout=(5.0, 0.2))  # (a watch's own deadline)
    assert client.send("GET", "/slow", timeout=(5.0, 30.0)).status == 200
