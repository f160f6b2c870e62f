"""A kubeconfig (or the pod's service account) read for kubemill's own HTTP client.

The operator, the SDK and Spark's cluster-mode submission talk to the API server through
kubemill's own client (see :mod:`kubemill.substrates.kubernetes.transport` for why), so
the credentials are read here, chosen as kubectl chooses them: ``--kubeconfig``, else
``$KUBECONFIG`` (several files merged, the first to name a cluster, user or context, or the
current context, wins), else ``~/.kube/config``; in a pod without any of those, its service
account. What a kubeconfig can hold:

- a cluster's ``server``, ``certificate-authority[-data]``, ``insecure-skip-tls-verify``,
  ``tls-server-name`` and ``proxy-url`` (else the environment's ``https_proxy`` and the
  like, bypassed by ``no_proxy``, as the official client reads them);
- a user's ``client-certificate[-data]`` and ``client-key[-data]``, ``token`` or
  ``tokenFile``, ``username``/``password``, or an ``exec`` plugin (its token renewed when it
  expires, or its client certificate). Files are relative to the kubeconfig's directory.

A legacy ``auth-provider`` or a SOCKS proxy is refused with what to use instead; any
other defect is a :class:`~.errors.KubeconfigError` naming the kubeconfig and the field.
PyYAML is imported only when there is a kubeconfig to read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubemill.http_client import HttpClient, HttpPool, Tls
from kubemill.substrates.kubernetes.client.errors import KubeconfigError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod finds its service account's token, CA and namespace."""
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class Credentials:
    """Where the chosen cluster is and how to talk to it (a plain class: see
    :class:`~kubemill.http_client.Tls`)."""

    __slots__ = ("authorization", "context", "namespace", "proxy", "server", "tls")

    def __init__(
        self,
        server: str,
        context: str | None,
        namespace: str,
        tls: Tls | None = None,
        authorization: Callable[[], str | None] | None = None,
        proxy: str | None = None,
    ) -> None:
        self.server = server
        self.context = context
        self.namespace = namespace
        self.tls = tls or Tls()
        self.authorization = authorization
        """The ``Authorization`` header's value, asked before each request."""
        self.proxy = proxy

    def client(self, *, user_agent: str) -> HttpClient:
        """One kept connection to the server, with these credentials."""
        return HttpClient(
            self.server,
            user_agent=user_agent,
            tls=self.tls,
            authorization=self.authorization,
            proxy=self.proxy,
        )

    def pool(self, *, size: int, user_agent: str) -> HttpPool:
        """Up to ``size`` kept connections to the server, with these credentials."""
        return HttpPool(
            self.server,
            size=size,
            user_agent=user_agent,
            tls=self.tls,
            authorization=self.authorization,
            proxy=self.proxy,
        )


def default_paths() -> list[Path]:
    """``$KUBECONFIG``'s files, else ``~/.kube/config`` (existing or not)."""
    given = os.environ.get("KUBECONFIG") or "~/.kube/config"
    return [Path(p).expanduser() for p in given.split(os.pathsep) if p]


def in_a_pod() -> bool:
    """Whether this runs in a cluster's pod (its API server's address is in the environment)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def load(*, kubeconfig: str | os.PathLike[str] | None, context: str | None) -> Credentials:
    """The credentials ``kubeconfig`` (else the default files, else the pod's service
    account) gives for ``context`` (else its current one)."""
    path = None if kubeconfig is None else Path(kubeconfig).expanduser()
    if path is not None and not path.is_file():
        raise KubeconfigError(
            f"no kubeconfig at {path}: pass --kubeconfig FILE (or set KUBECONFIG) for a "
            "cluster you can reach"
        )
    paths = [path] if path is not None else [p for p in default_paths() if p.is_file()]
    if not paths:
        if in_a_pod():
            return service_account()
        where = os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeconfigError(
            f"no kubeconfig found (looked at {where}): pass --kubeconfig FILE or set "
            "KUBECONFIG; `kubectl config current-context` shows what kubectl uses"
        )
    where = os.pathsep.join(str(p) for p in paths)
    try:
        return _Reader(paths).credentials(context)
    except KubeconfigError as exc:
        hint = (
            "; `kubectl config get-contexts` lists the contexts"
            if context
            else "; check it with `kubectl config view`"
        )
        raise KubeconfigError(f"cannot use the kubeconfig {where}: {exc}{hint}") from None


def service_account(directory: Path | None = None) -> Credentials:
    """The pod's own service account (in ``directory``, :data:`SERVICE_ACCOUNT` by default):
    its token (read again for each request, as the kubelet renews it), the cluster's CA and
    the pod's namespace."""
    directory = directory or SERVICE_ACCOUNT
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    token, ca = directory / "token", directory / "ca.crt"
    if not host or not token.is_file() or not ca.is_file():
        raise KubeconfigError(
            "no kubeconfig, and the in-cluster service account is unusable: "
            f"{'KUBERNETES_SERVICE_HOST is empty' if not host else f'no {token} or {ca}'}"
        )
    try:
        namespace = (directory / "namespace").read_text().strip() or "default"
    except OSError:
        namespace = "default"
    server = f"https://{f'[{host}]' if ':' in host else host}:{port}"

    def bearer() -> str:
        return f"Bearer {token.read_text().strip()}"

    return Credentials(
        server, None, namespace, Tls(ca_file=str(ca)), bearer, proxy_for(server, None)
    )


def proxy_for(server: str, configured: str | None) -> str | None:
    """The proxy to reach ``server`` by: the kubeconfig's ``proxy-url``, else the
    environment's for its scheme (``https_proxy``, ``HTTPS_PROXY``, ``all_proxy``), unless
    ``no_proxy`` names the host. A SOCKS proxy is refused."""
    proxy = configured or _environment_proxy(urlsplit(server).scheme)
    if proxy and not configured and _bypassed(server):
        proxy = None
    scheme = urlsplit(proxy).scheme if proxy and "://" in proxy else "http"
    if proxy and scheme != "http":
        raise KubeconfigError(
            f"the proxy {proxy} is not an http:// proxy, the only kind kubemill's client "
            "speaks (for SOCKS: `kubectl proxy`, and its http://127.0.0.1:8001 as the server, "
            "or --master k8s://http://127.0.0.1:8001)"
        )
    return proxy or None


def _environment_proxy(scheme: str) -> str | None:
    for name in (f"{scheme}_proxy", "all_proxy"):
        found = os.environ.get(name) or os.environ.get(name.upper())
        if found:
            return found
    return None


def _bypassed(server: str) -> bool:
    """Whether ``no_proxy`` names ``server``'s host: ``*``, the host or a parent domain,
    ``host:port``, or a network holding its address."""
    rules = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    parts = urlsplit(server)
    host = (parts.hostname or "").lower()
    host_port = parts.netloc.lower().rpartition("@")[2]
    for rule in (r.strip().lower() for r in rules.split(",")):
        if not rule:
            continue
        if rule == "*":
            return True
        if _in_network(host, rule):
            return True
        rule = rule.lstrip(".")
        if host in (rule, host_port) or rule == host_port or host.endswith(f".{rule}"):
            return True
        if host_port.endswith(f".{rule}"):
            return True
    return False


def _in_network(host: str, rule: str) -> bool:
    if not host or not (host[0].isdigit() or ":" in host):
        return False  # a name, not an address
    import ipaddress

    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(rule, strict=False)
    except ValueError:
        return False


class _Reader:
    """Several kubeconfig files merged as kubectl merges them."""

    def __init__(self, paths: list[Path]) -> None:
        import yaml

        self.current: str | None = None
        self.named: dict[str, dict[str, tuple[Mapping[str, Any], Path]]] = {
            "clusters": {},
            "users": {},
            "contexts": {},
        }
        for path in paths:
            try:
                document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                raise KubeconfigError(f"cannot read {path}: {exc}") from None
            if not isinstance(document, dict):
                raise KubeconfigError(f"{path} is not a kubeconfig (a YAML mapping)")
            self.current = self.current or document.get("current-context") or None
            for section, singular in (
                ("clusters", "cluster"),
                ("users", "user"),
                ("contexts", "context"),
            ):
                for index, item in enumerate(document.get(section) or ()):
                    name = item.get("name") if isinstance(item, dict) else None
                    if not isinstance(name, str):
                        raise KubeconfigError(f"{section}[{index}]: no name, in {path}")
                    value = item.get(singular) or {}
                    if not isinstance(value, dict):
                        raise KubeconfigError(f"{section}[{index}].{singular}: not a mapping")
                    self.named[section].setdefault(name, (value, path.parent))

    def find(self, section: str, name: str, what: str) -> tuple[Mapping[str, Any], Path]:
        try:
            return self.named[section][name]
        except KeyError:
            raise KubeconfigError(f"no {what} named {name!r} in its {section}") from None

    def credentials(self, context: str | None) -> Credentials:
        chosen = context or self.current
        if not chosen:
            raise KubeconfigError("no current-context, and no --context given")
        ctx, _ = self.find("contexts", chosen, "context")
        cluster, cluster_dir = self.find("clusters", str(ctx.get("cluster") or ""), "cluster")
        user: Mapping[str, Any] = {}
        user_dir = cluster_dir
        if ctx.get("user"):
            user, user_dir = self.find("users", str(ctx["user"]), "user")
        server = str(cluster.get("server") or "").rstrip("/")
        if not server:
            raise KubeconfigError(f"cluster {ctx.get('cluster')!r} has no server")
        cert_data, key_data = _data(user, "client-certificate-data"), _data(user, "client-key-data")
        authorization: Callable[[], str | None] | None = None
        if "auth-provider" in user:
            provider = (user.get("auth-provider") or {}).get("name", "?")
            raise KubeconfigError(
                f"user {ctx.get('user')!r}: the auth-provider {provider!r} is not supported "
                "(Kubernetes removed them); use its exec plugin (`kubectl` documents the "
                "replacement)"
            )
        if user.get("exec"):
            plugin = _ExecPlugin(user["exec"], user_dir, server, cluster)
            issued = plugin.credential()
            if issued.get("clientCertificateData"):
                cert_data = str(issued["clientCertificateData"]).encode()
                key_data = str(issued.get("clientKeyData") or "").encode()
            if issued.get("token"):
                authorization = plugin.bearer
        elif user.get("token"):
            token = str(user["token"])
            authorization = _constant(f"Bearer {token}")
        elif user.get("tokenFile"):
            token_file = _path(user, "tokenFile", user_dir)
            authorization = _reading(token_file)
        elif user.get("username"):
            import base64

            pair = f"{user['username']}:{user.get('password') or ''}"
            authorization = _constant("Basic " + base64.b64encode(pair.encode()).decode())
        tls = Tls(
            ca_data=_data(cluster, "certificate-authority-data"),
            ca_file=_path(cluster, "certificate-authority", cluster_dir),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            server_name=cluster.get("tls-server-name") or None,
            cert_data=cert_data,
            key_data=key_data,
            cert_file=None if cert_data else _path(user, "client-certificate", user_dir),
            key_file=None if key_data else _path(user, "client-key", user_dir),
        )
        return Credentials(
            server,
            chosen,
            str(ctx.get("namespace") or "default"),
            tls,
            authorization,
            proxy_for(server, cluster.get("proxy-url") or None),
        )


def _data(section: Mapping[str, Any], key: str) -> bytes | None:
    value = section.get(key)
    if not value:
        return None
    import base64  # here: a kubeconfig without PEM data (or none at all) does not need it

    try:
        return base64.b64decode(str(value), validate=False)
    except ValueError:
        raise KubeconfigError(f"{key}: not base64") from None


def _path(section: Mapping[str, Any], key: str, directory: Path) -> str | None:
    value = section.get(key)
    if not value:
        return None
    path = directory / Path(str(value)).expanduser()
    if not path.is_file():
        raise KubeconfigError(f"{key}: no file {path}")
    return str(path)


def _constant(value: str) -> Callable[[], str | None]:
    return lambda: value


def _reading(path: str | None) -> Callable[[], str | None]:
    """The bearer token of a file, read for each request (its owner may renew it)."""

    def bearer() -> str:
        return f"Bearer {Path(str(path)).read_text().strip()}"

    return bearer


class _ExecPlugin:
    """A kubeconfig user's ``exec`` plugin: the command run as kubectl runs it (argv,
    ``env`` added, ``KUBERNETES_EXEC_INFO`` set, never interactive), its ``ExecCredential``
    read; a token it issued is asked again once expired."""

    def __init__(
        self, spec: Mapping[str, Any], directory: Path, server: str, cluster: Mapping[str, Any]
    ) -> None:
        self.spec = spec
        self.api_version = str(spec.get("apiVersion") or "")
        if self.api_version not in EXEC_API_VERSIONS:
            raise KubeconfigError(
                f"exec.apiVersion {self.api_version!r}: one of {', '.join(EXEC_API_VERSIONS)}"
            )
        command = str(spec.get("command") or "")
        if not command:
            raise KubeconfigError("exec.command: empty")
        # As kubectl: a command with a slash is relative to the kubeconfig's directory.
        self.argv = [
            str(directory / command) if "/" in command else command,
            *(str(a) for a in spec.get("args") or ()),
        ]
        self.server = server
        self.cluster = cluster
        self._issued: dict[str, Any] = {}
        self._expires: float | None = None

    def credential(self) -> dict[str, Any]:
        if self._issued and (self._expires is None or time.time() < self._expires):
            return self._issued
        spec: dict[str, Any] = {"interactive": False}
        if self.spec.get("provideClusterInfo"):
            spec["cluster"] = {
                "server": self.server,
                **(
                    {"tls-server-name": self.cluster["tls-server-name"]}
                    if self.cluster.get("tls-server-name")
                    else {}
                ),
                "insecure-skip-tls-verify": bool(self.cluster.get("insecure-skip-tls-verify")),
                "certificate-authority-data": self.cluster.get("certificate-authority-data"),
            }
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        import subprocess

        env = {**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        for item in self.spec.get("env") or ():
            env[str(item.get("name"))] = str(item.get("value") or "")
        try:
            done = subprocess.run(
                self.argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False
            )
        except OSError as exc:
            raise KubeconfigError(f"exec plugin {self.argv[0]}: {exc.strerror}") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip()[-500:]
            raise KubeconfigError(
                f"exec plugin {self.argv[0]} exited with {done.returncode}: {said}"
            )
        try:
            status = json.loads(done.stdout)["status"]
        except (ValueError, KeyError, TypeError):
            raise KubeconfigError(
                f"exec plugin {self.argv[0]}: its output is no ExecCredential with a status"
            ) from None
        if not status.get("token") and not status.get("clientCertificateData"):
            raise KubeconfigError(f"exec plugin {self.argv[0]}: no token and no certificate")
        self._issued = dict(status)
        self._expires = _timestamp(status.get("expirationTimestamp"))
        return self._issued

    def bearer(self) -> str | None:
        return f"Bearer {self.credential()['token']}"


def _timestamp(text: Any) -> float | None:
    """An RFC 3339 time as seconds since the epoch (``None`` when absent)."""
    if not text:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise KubeconfigError(f"exec plugin: expirationTimestamp {text!r} is no time") from None


__all__ = ["Credentials", "default_paths", "in_a_pod", "load", "proxy_for", "service_account"]
