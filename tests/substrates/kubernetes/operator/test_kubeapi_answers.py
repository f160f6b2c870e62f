"""The operator's API client: which answers it parses (against the test API server), and
the one SSL context its connections share (against a TLS server of a test CA)."""

from __future__ import annotations

import asyncio
import http.server
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest

from kubemill.http_client import Tls
from kubemill.substrates.kubernetes.client.kubeconfig import Credentials
from kubemill.substrates.kubernetes.operator.kubeapi import (
    ApiError,
    KubeApi,
    ObjectRef,
    load_client_configuration,
)
from support.control_plane import Identity, Pki
from support.kmock_cluster import ClusterThread, write_kubeconfig


def test_an_answer_not_wanted_is_read_but_not_parsed_and_the_connection_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A created pod comes back whole (managed fields and all): the reconcile drops it
    unparsed. The next request on the same kept connection still gets its own answer, and
    an error answer is still the API's own."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with ClusterThread() as cluster:
        cluster.create_namespaces("ns")
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kc", cluster.url)))
        api = KubeApi(load_client_configuration(context=None), concurrency=1)
        try:

            def config_map(name: str) -> tuple[ObjectRef, dict[str, object]]:
                body = {"metadata": {"name": name}, "data": {"k": "v" * 10_000}}
                return ObjectRef("v1", "configmaps", "ns", name), body

            async def calls() -> tuple[object, ...]:
                dropped = await api.create(*config_map("a"), answer=False)
                kept = await api.create(*config_map("b"))
                try:
                    await api.create(*config_map("a"), answer=False)
                except ApiError as exc:
                    refused: object = (exc.status, exc.reason)
                await api.delete(config_map("a")[0])
                return dropped, kept["metadata"]["name"], refused

            dropped, kept, refused = asyncio.run(calls())
        finally:
            api.close()
        assert (dropped, kept, refused) == ({}, "b", (409, "AlreadyExists"))
        assert cluster.get("/api/v1/namespaces/ns/configmaps/b")["data"]["k"] == "v" * 10_000
        made = [c for c in cluster.calls() if not c.from_tests and c.plural == "configmaps"]
        assert [(c.method, c.name or "", c.status) for c in made] == [
            ("POST", "", 201),
            ("POST", "", 201),
            ("POST", "", 409),
            ("DELETE", "a", 200),
        ]


def test_requests_at_once_over_tls_share_one_ssl_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of requests opens a connection per thread of the pool; every connection is
    made with the one SSL context (the CA and the client certificate read once), not with
    one of its own that its client then keeps."""
    pki = Pki(tmp_path / "pki")
    pki.make(
        [
            Identity("server", "127.0.0.1", alt_names=("IP:127.0.0.1",), server=True),
            Identity("operator", "operator"),
        ]
    )
    peers: set[int] = set()
    everyone_in = threading.Barrier(8, timeout=30)

    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            peers.add(self.client_address[1])
            everyone_in.wait()  # eight requests in flight at once: eight connections
            reply = b'{"kind": "Lease"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.path("server", "crt"), pki.path("server", "key"))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    made: list[object] = []
    original = Tls.context

    def counted(self: Tls) -> ssl.SSLContext:
        made.append(self)
        return original(self)

    monkeypatch.setattr(Tls, "context", counted)
    credentials = Credentials(
        server=f"https://127.0.0.1:{httpd.server_address[1]}",
        context=None,
        namespace="ns",
        tls=Tls(
            ca_file=str(pki.path("ca", "crt")),
            cert_file=str(pki.path("operator", "crt")),
            key_file=str(pki.path("operator", "key")),
        ),
    )
    api = KubeApi(credentials, concurrency=8)
    try:

        async def burst() -> list[dict[str, Any]]:
            refs = [ObjectRef("coordination.k8s.io/v1", "leases", "ns", f"l{i}") for i in range(8)]
            return await asyncio.gather(*(api.read(ref) for ref in refs))

        answers = asyncio.run(burst())
    finally:
        api.close()
        httpd.shutdown()
        httpd.server_close()
    assert answers == [{"kind": "Lease"}] * 8
    assert len(peers) == 8
    assert len(made) == 1
