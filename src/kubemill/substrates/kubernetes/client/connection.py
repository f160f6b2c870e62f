"""Which cluster the client talks to, and its requests with errors that say what to do.

:func:`connect` chooses a cluster as kubectl does (``--kubeconfig``, ``$KUBECONFIG``,
``~/.kube/config`` and a context; in a pod without any of those, its service account),
the kubeconfig read by :mod:`.kubeconfig`, and talks to it through kubemill's own
:class:`~kubemill.http_client.HttpPool` (a kept-alive connection per thread asking at once;
watches and followed logs stream on connections of their own until released).
:func:`connect_to` (Spark's cluster mode) chooses the same way for one ``--master`` server,
through a single :class:`~kubemill.http_client.HttpClient`. :class:`Http` sends requests by
the substrate's one HTTP layer (:mod:`kubemill.substrates.kubernetes.transport`) and turns
what goes wrong into :mod:`.errors`: the API's status, reason and message kept, the verb and
resource named.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
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
"""Idle connections kept (following logs holds one per replica while it streams)."""


@dataclass(frozen=True)
class Connection:
    """A configured API client and where it points."""

    api_client: Any
    """kubemill's ``HttpPool`` (:func:`connect`) or ``HttpClient`` (:func:`connect_to`); or
    a ``kubernetes.client.ApiClient`` a caller of the SDK hands in."""
    server: str
    context: str | None
    namespace: str
    """The context's namespace (``default`` when it names none)."""


def connect(*, kubeconfig: str | os.PathLike[str] | None, context: str | None) -> Connection:
    """A client of the cluster ``kubeconfig`` names (else ``$KUBECONFIG``,
    ``~/.kube/config``, or the pod's service account when none of those exists and we run
    in a cluster), for ``context`` (else the current one)."""
    found = kubeconfig_files.load(kubeconfig=kubeconfig, context=context)
    pool = found.pool(size=CONNECTION_POOL_SIZE, user_agent=USER_AGENT)
    return Connection(pool, found.server, found.context, found.namespace)


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
    direct = found.client(user_agent=USER_AGENT)
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
    """JSON requests through the connection's client, errors translated."""

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
        stream: bool = False,
    ) -> Any:
        """The response of a 2xx answer (with ``stream``, its body is read as it comes)."""
        try:
            return transport.send(
                self.connection.api_client,
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                timeout=timeout,
                stream=stream,
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
