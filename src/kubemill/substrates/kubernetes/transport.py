"""The one way the Kubernetes substrate sends HTTP requests of its own: :func:`send`.

Every request goes through kubemill's own client, :mod:`kubemill.http_client`: the
operator's writes, reads and Lease (:mod:`.operator.kubeapi`, an ``HttpPool``), the SDK's
and the CLI's requests, watches and followed logs (:mod:`.client.connection`, an
``HttpPool`` whose streamed answers are read as they come), and Spark's cluster-mode
submission (``kubemill spark-submit --master k8s://URL``: one ``HttpClient``). Each with
what a kubeconfig or a pod's service account gives (:mod:`.client.kubeconfig` reads it: a
certificate authority, a client certificate and key, a bearer token, a token file read
again for each request, an exec plugin, insecure-skip-tls-verify, a proxy), sending the
very requests the official client's ``ApiClient`` sends (same method, path, query, headers
and JSON body; ``tests/substrates/kubernetes/client/test_transport_direct.py`` compares
them) over sockets of its own. Why not ``ApiClient``: importing the ``kubernetes`` package
costs a process ~20 MiB (every model class) and a tenth of a second, and its per-request
serialisation is Python work the operator paid on every write. So the ``kubernetes``
package is needed only inside pods (the MPI agent's exec, Mars's discovery) and when a
caller of the SDK hands in an ``ApiClient`` of its own (``KubernetesBackend(api_client=)``),
which :func:`send` still takes, through ``ApiClient.call_api`` with plain JSON bodies (never
the typed ``CoreV1Api`` methods, which validate bodies against the client's own models and
refuse fields a client version does not know); the package is imported on such a client's
first request only. kopf keeps its own aiohttp session for the operator's watches.

Two outcomes besides a 2xx response, as exceptions that keep what the server said and leave
the wording to the caller: :class:`~kubemill.http_client.HttpAnswer` (the server answered
with an error) and :class:`~kubemill.http_client.NoAnswer` (refused, reset, DNS, TLS,
timeout), the same for either client.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote

from kubemill.http_client import DEFAULT_TIMEOUT, HttpAnswer, HttpClient, HttpPool, NoAnswer


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
    stream: bool = False,
) -> Any:
    """The response of a 2xx answer (:func:`read` it; with ``stream``, its body is read as
    it comes: :func:`lines`, and release it).

    Raises :class:`HttpAnswer` or :class:`NoAnswer`.
    """
    if isinstance(api_client, HttpClient | HttpPool):
        return (api_client.open if stream else api_client.send)(
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
    "api_path",
    "is_connection_error",
    "lines",
    "read",
    "read_json",
    "send",
]
