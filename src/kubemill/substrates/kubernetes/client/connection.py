"""Which cluster the client talks to, and its requests with errors that say what to do.

:func:`connect` builds a ``kubernetes.client.ApiClient`` as kubectl chooses a cluster
(``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config`` and a context; in a pod without any
of those, its service account). :class:`Http` sends requests through it by the substrate's
one HTTP layer (:mod:`kubemill.substrates.kubernetes.transport`) and turns what goes wrong
into :mod:`.errors`: the API's status, reason and message kept, the verb and resource named.
:func:`connect_to` (Spark's cluster mode) chooses the same way but talks through kubemill's
own ``HttpClient`` (:mod:`kubemill.http_client`), the kubeconfig read by :mod:`.kubeconfig`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubemill.http_client import HttpClient
from kubemill.substrates.kubernetes import transport
from kubemill.substrates.kubernetes.client import kubeconfig as kubeconfig_files
from kubemill.substrates.kubernetes.client.errors import (
    KubeconfigError,
    Request,
    api_error,
    parse_answer,
    unreachable,
)
from kubemill.version import __version__

REQUEST_TIMEOUT = transport.DEFAULT_TIMEOUT
"""(connect, read) seconds for one ordinary request."""
USER_AGENT = f"kubemill/{__version__}"
CONNECTION_POOL_SIZE = 64
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class Connection:
    """A configured API client and where it points."""

    api_client: Any
    """A ``kubernetes.client.ApiClient`` (:func:`connect`), or the transport's
    ``HttpClient`` (:func:`connect_to`)."""
    server: str
    context: str | None
    namespace: str
    """The context's namespace (``default`` when it names none)."""


def connect(*, kubeconfig: str | os.PathLike[str] | None, context: str | None) -> Connection:
    """An API client from ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``, or the
    pod's service account when none of those exists and we run in a cluster)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    path = None if kubeconfig is None else str(Path(kubeconfig).expanduser())
    where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
    namespace = "default"
    if path is not None and not Path(path).is_file():
        raise KubeconfigError(
            f"no kubeconfig at {path}: pass --kubeconfig FILE (or set KUBECONFIG) for a "
            "cluster you can reach"
        )
    default_exists = any(
        Path(p).expanduser().is_file()
        for p in (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
        if p
    )
    if path is None and not default_exists and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except ConfigException as exc:
            raise KubeconfigError(
                f"no kubeconfig, and the in-cluster service account is unusable: {exc}"
            ) from exc
        with contextlib.suppress(OSError):
            namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or namespace
        context = None
    else:
        if path is None and not default_exists:
            raise KubeconfigError(
                f"no kubeconfig found (looked at {where}): pass --kubeconfig FILE or set "
                "KUBECONFIG; `kubectl config current-context` shows what kubectl uses"
            )
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
            contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        except ConfigException as exc:
            hint = (
                "; `kubectl config get-contexts` lists the contexts"
                if context
                else "; check it with `kubectl config view`"
            )
            raise KubeconfigError(f"cannot use the kubeconfig {where}: {exc}{hint}") from exc
        chosen = next((c for c in contexts or () if c.get("name") == context), active)
        if chosen:
            context = str(chosen.get("name") or "") or context
            namespace = str((chosen.get("context") or {}).get("namespace") or namespace)
    # Following logs holds a connection per replica; urllib3 would open extra ones past the
    # pool's size anyway, but warn about each.
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, CONNECTION_POOL_SIZE
    )
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return Connection(api_client, str(configuration.host), context, namespace)


def connect_to(
    server: str, *, kubeconfig: str | os.PathLike[str] | None, context: str | None
) -> Connection:
    """A :class:`~kubemill.http_client.HttpClient` of ``server`` (a
    ``spark-submit --master k8s://`` URL): with the kubeconfig's credentials when there is
    one, or the pod's service account (:mod:`.kubeconfig` reads them; the kubeconfig's
    cluster must be that server: its credentials belong to it), else with none, as Spark's
    client goes to its master when no kubeconfig says more (a local test server,
    ``kubectl proxy``)."""
    wanted = server.rstrip("/")
    if not uses_kubeconfig(kubeconfig):
        direct = HttpClient(
            wanted, user_agent=USER_AGENT, proxy=kubeconfig_files.proxy_for(wanted, None)
        )
        return Connection(direct, wanted, None, "default")
    found = kubeconfig_files.load(kubeconfig=kubeconfig, context=context)
    if found.server != wanted:
        raise KubeconfigError(
            f"--master k8s://{wanted}: the kubeconfig's cluster is {found.server}; "
            "choose the context of that server with `kubemill --context NAME ...`"
        )
    direct = HttpClient(
        found.server,
        user_agent=USER_AGENT,
        tls=found.tls,
        authorization=found.authorization,
        proxy=found.proxy,
    )
    return Connection(direct, found.server, found.context, found.namespace)


def uses_kubeconfig(kubeconfig: str | os.PathLike[str] | None) -> bool:
    """Whether :func:`connect_to` goes through a kubeconfig (or the pod's service account):
    one is given, ``$KUBECONFIG``/``~/.kube/config`` exists, or this runs in a cluster."""
    return (
        kubeconfig is not None
        or any(p.is_file() for p in kubeconfig_files.default_paths())
        or kubeconfig_files.in_a_pod()
    )


class Http:
    """JSON requests through the connection's ``ApiClient``, errors translated."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def _unreachable(self, exc: BaseException) -> Exception:
        return unreachable(
            exc.__cause__ or exc, server=self.connection.server, context=self.connection.context
        )

    def send(
        self,
        request: Request,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float | None] = REQUEST_TIMEOUT,
    ) -> Any:
        """The response (a urllib3 response, not yet read) of a 2xx answer."""
        try:
            return transport.send(
                self.connection.api_client,
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                timeout=timeout,
            )
        except transport.NoAnswer as exc:
            raise self._unreachable(exc) from exc.__cause__
        except transport.HttpAnswer as exc:
            raise api_error(request, parse_answer(exc.status, exc.reason, exc.body)) from exc

    def json(self, request: Request, method: str, path: str, **kwargs: Any) -> Any:
        """The parsed body of a 2xx answer (``{}`` when empty)."""
        raw = self.send(request, method, path, **kwargs)
        try:
            return transport.read_json(raw)
        except transport.NoAnswer as exc:
            raise self._unreachable(exc) from exc.__cause__

    def read(self, raw: Any) -> bytes:
        """The rest of a response :meth:`send` returned, its connection released."""
        try:
            return transport.read(raw)
        except transport.NoAnswer as exc:
            raise self._unreachable(exc) from exc.__cause__
