"""What a kubeconfig can hold reaches an https API server through the transport's one client.

:func:`~kubemill.substrates.kubernetes.client.connection.connect_to` (Spark's cluster mode)
and the operator's :class:`~kubemill.substrates.kubernetes.operator.kubeapi.KubeApi` read the
kubeconfig (or the pod's service account) with
:mod:`~kubemill.substrates.kubernetes.client.kubeconfig` and talk through
:class:`~kubemill.http_client.HttpClient`; every test runs through both. An https
server on 127.0.0.1 with certificates of a test CA (made by ``openssl``, as the control
plane's) and client certificates required records who each request came from: a client
certificate (PEM data, or files relative to the kubeconfig), a bearer token (in the
kubeconfig, a token file, an exec plugin's), a proxy tunnel; the server is verified by the
kubeconfig's CA, or not at all with insecure-skip-tls-verify, and refused otherwise.
Kubeconfigs merged from ``$KUBECONFIG``, and what cannot be used, said with the field.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.substrates.kubernetes.client import kubeconfig
from kubemill.substrates.kubernetes.client.connection import Http, connect_to
from kubemill.substrates.kubernetes.client.errors import (
    ClusterUnreachable,
    KubeconfigError,
    Request,
)
from kubemill.substrates.kubernetes.operator.kubeapi import (
    ApiError,
    KubeApi,
    ObjectRef,
    load_client_configuration,
)
from support.control_plane import Identity, Pki

LIST = Request("list", "namespaces", "", None)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    made = Pki(tmp_path_factory.mktemp("pki"))
    made.make(
        [
            Identity("server", "127.0.0.1", alt_names=("IP:127.0.0.1",), server=True),
            Identity("alice", "alice", organization="team"),
        ]
    )
    return made


class Seen(http.server.BaseHTTPRequestHandler):
    """Answers ``{"items": []}``, recording the client certificate's CN and Authorization."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str | None, str | None]]

    def do_GET(self) -> None:
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        common_name = None
        for rdn in (peer or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    common_name = value
        self.seen.append((self.path, common_name, self.headers.get("Authorization")))
        reply = b'{"items": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server(pki: Pki) -> Iterator[tuple[str, type[Seen]]]:
    handler = type("Handler", (Seen,), {"seen": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.path("server", "crt"), pki.path("server", "key"))
    context.load_verify_locations(pki.path("ca", "crt"))
    context.verify_mode = ssl.CERT_OPTIONAL  # a token alone is a client too
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write(path: Path, cluster: dict[str, Any], user: dict[str, Any], **extra: Any) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", **extra}}],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(config))
    return path


class Got:
    """What a client chose (``namespace``, ``context``), the ``path`` it asked, and ``again``
    to ask it once more on the same client."""

    def __init__(self, namespace: str, context: str | None, path: str, again: Callable[[], Any]):
        self.namespace = namespace
        self.context = context
        self.path = path
        self.again = again


Get = Callable[..., Got]

PODS = ObjectRef("v1", "pods", "default", "")


@pytest.fixture(params=["spark-submit", "operator"])
def get(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Get:
    """A request to ``url`` with ``config`` (``None``: the default files or the pod's service
    account) through Spark's ``connect_to`` or the operator's ``KubeApi`` (which reads the
    kubeconfig from ``$KUBECONFIG``, as in its pod or in the tests' subprocesses)."""

    def spark_submit(url: str, config: Path | None, context: str | None = None) -> Got:
        http = Http(connect_to(url, kubeconfig=config, context=context))

        def again() -> Any:
            assert http.json(LIST, "GET", "/api/v1/namespaces") == {"items": []}

        again()
        return Got(http.connection.namespace, http.connection.context, "/api/v1/namespaces", again)

    def operator(url: str, config: Path | None, context: str | None = None) -> Got:
        if config is not None:
            monkeypatch.setenv("KUBECONFIG", str(config))
        found = load_client_configuration(context=context)
        assert found.server == url
        api = KubeApi(found, concurrency=2)
        request.addfinalizer(api.close)

        def again() -> Any:
            assert asyncio.run(api.list(PODS, label_selector="a=b")) == []

        again()
        path = "/api/v1/namespaces/default/pods?labelSelector=a%3Db"
        return Got(found.namespace, found.context, path, again)

    return spark_submit if request.param == "spark-submit" else operator


def test_a_client_certificate_as_data_and_the_clusters_ca(
    server: tuple[str, type[Seen]], get: Get, pki: Pki, tmp_path: Path
) -> None:
    url, handler = server
    cluster = {"server": url, "certificate-authority-data": b64(pki.path("ca", "crt"))}
    user = {
        "client-certificate-data": b64(pki.path("alice", "crt")),
        "client-key-data": b64(pki.path("alice", "key")),
    }
    got = get(url, write(tmp_path / "config", cluster, user, namespace="team-a"))
    assert handler.seen == [(got.path, "alice", None)]
    assert got.namespace == "team-a"
    assert got.context == "ctx"


def test_files_relative_to_the_kubeconfig(
    server: tuple[str, type[Seen]], get: Get, pki: Pki, tmp_path: Path
) -> None:
    url, handler = server
    (tmp_path / "kube").mkdir()
    for name in ("ca.crt", "alice.crt", "alice.key"):
        (tmp_path / "kube" / name).write_bytes(pki.dir.joinpath(name).read_bytes())
    config = write(
        tmp_path / "kube" / "config",
        {"server": url, "certificate-authority": "ca.crt"},
        {"client-certificate": "alice.crt", "client-key": "alice.key"},
    )
    get(url, config)
    assert [who for _, who, _ in handler.seen] == ["alice"]


def test_a_token_a_token_file_and_an_exec_plugins_token(
    server: tuple[str, type[Seen]], get: Get, pki: Pki, tmp_path: Path
) -> None:
    url, handler = server
    cluster = {"server": url, "certificate-authority-data": b64(pki.path("ca", "crt"))}
    (tmp_path / "token").write_text("from-a-file\n")
    plugin = (
        "import json, os\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',\n"
        "  'status': {'token': os.environ['GIVEN'] + '-' + info['spec']['cluster']['server']}}))\n"
    )
    users: list[dict[str, Any]] = [
        {"token": "in-the-config"},
        {"tokenFile": str(tmp_path / "token")},
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": sys.executable,
                "args": ["-c", plugin],
                "env": [{"name": "GIVEN", "value": "issued"}],
                "provideClusterInfo": True,
                "interactiveMode": "Never",
            }
        },
    ]
    for index, user in enumerate(users):
        get(url, write(tmp_path / f"config-{index}", cluster, user))
    assert [said for _, _, said in handler.seen] == [
        "Bearer in-the-config",
        "Bearer from-a-file",
        f"Bearer issued-{url}",
    ]


def test_the_server_is_verified_unless_told_not_to(
    server: tuple[str, type[Seen]], get: Get, tmp_path: Path
) -> None:
    url, handler = server
    user = {"token": "t"}
    with pytest.raises(
        (ClusterUnreachable, ApiError), match=r"TLS handshake failed|CERTIFICATE_VERIFY_FAILED"
    ):
        get(url, write(tmp_path / "strict", {"server": url}, user))
    insecure = write(tmp_path / "insecure", {"server": url, "insecure-skip-tls-verify": True}, user)
    get(url, insecure)
    assert len(handler.seen) == 1


def test_kubeconfigs_merge_as_kubectl_merges_them(
    server: tuple[str, type[Seen]],
    get: Get,
    pki: Pki,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first file to name a cluster, user or context, or the current context, wins."""
    url, handler = server
    first = {
        "current-context": "ctx",
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "first"}}],
    }
    second = {
        "current-context": "other",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": url,
                    "certificate-authority-data": b64(pki.path("ca", "crt")),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "second"}}],
    }
    paths = []
    for name, document in (("first", first), ("second", second)):
        paths.append(tmp_path / name)
        paths[-1].write_text(yaml.safe_dump(document))
    monkeypatch.setenv("KUBECONFIG", f"{paths[0]}:{tmp_path / 'missing'}:{paths[1]}")
    get(url, None)
    assert [said for _, _, said in handler.seen] == ["Bearer first"]


def test_a_pods_service_account(
    server: tuple[str, type[Seen]],
    get: Get,
    pki: Pki,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, handler = server
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("pod-token")
    (account / "ca.crt").write_bytes(pki.path("ca", "crt").read_bytes())
    (account / "namespace").write_text("jobs")
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", url.rsplit(":", 1)[1])
    got = get(url, None)
    assert handler.seen[0][2] == "Bearer pod-token"
    assert got.namespace == "jobs"
    # The kubelet rotates the token: the next request carries the new one.
    (account / "token").write_text("rotated-token")
    got.again()
    assert handler.seen[1][2] == "Bearer rotated-token"


def test_an_https_server_through_a_proxy_tunnel(
    server: tuple[str, type[Seen]],
    get: Get,
    pki: Pki,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, handler = server
    asked: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def relay(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            target.close()

    def serve() -> None:
        client, _ = listener.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        asked.append(head.split(b"\r\n", 1)[0])
        host, port = head.split(b" ")[1].decode().rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=relay, args=(upstream, client), daemon=True).start()
        relay(client, upstream)

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{listener.getsockname()[1]}")
    cluster = {"server": url, "certificate-authority-data": b64(pki.path("ca", "crt"))}
    try:
        get(url, write(tmp_path / "config", cluster, {"token": "t"}))
    finally:
        listener.close()
    assert asked == [f"CONNECT {url.removeprefix('https://')} HTTP/1.1".encode()]
    assert handler.seen[0][2] == "Bearer t"


@pytest.mark.parametrize(
    ("cluster", "user", "context", "words"),
    [
        ({"server": "https://h"}, {}, "nope", "no context named 'nope'"),
        ({}, {}, None, "cluster 'c' has no server"),
        ({"server": "https://h"}, {"auth-provider": {"name": "gcp"}}, None, "auth-provider"),
        (
            {"server": "https://h", "proxy-url": "socks5://127.0.0.1:1080"},
            {},
            None,
            "not an http:// proxy",
        ),
        ({"server": "https://h", "certificate-authority": "nowhere.crt"}, {}, None, "no file"),
        (
            {"server": "https://h"},
            {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/no/such"}},
            None,
            "exec plugin /no/such",
        ),
    ],
    ids=["context", "server", "auth-provider", "socks", "ca-file", "exec"],
)
def test_what_cannot_be_used_is_said(
    tmp_path: Path,
    cluster: dict[str, Any],
    user: dict[str, Any],
    context: str | None,
    words: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = write(tmp_path / "config", cluster, user)
    with pytest.raises(KubeconfigError) as raised:
        connect_to("https://h", kubeconfig=config, context=context)
    assert words in str(raised.value)
    assert str(config) in str(raised.value)
    monkeypatch.setenv("KUBECONFIG", str(config))  # the operator's
    with pytest.raises(KubeconfigError) as raised:
        load_client_configuration(context=context)
    assert words in str(raised.value)
    assert str(config) in str(raised.value)


def test_the_exec_info_is_what_kubectl_gives(tmp_path: Path) -> None:
    """Not interactive; the apiVersion asked for."""
    out = tmp_path / "info.json"
    plugin = (
        "import os, pathlib, sys\n"
        f"pathlib.Path({str(out)!r}).write_text(os.environ['KUBERNETES_EXEC_INFO'])\n"
        'print(\'{"status": {"token": "x"}}\')\n'
    )
    exec_spec = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": ["-c", plugin],
    }
    config = write(tmp_path / "config", {"server": "https://h"}, {"exec": exec_spec})
    found = kubeconfig.load(kubeconfig=config, context=None)
    assert found.authorization is not None
    assert found.authorization() == "Bearer x"
    assert json.loads(out.read_text()) == {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }
