"""The operator's writes and reads to the API server, through kubemill's own HTTP client.

Requests go out as :mod:`kubemill.substrates.kubernetes.transport` sends them, bodies
exactly as :mod:`kubemill.substrates.kubernetes.build` returns them (``kubemill render``
shows the same), over an :class:`~kubemill.http_client.HttpPool` (a kept-alive connection
per thread of the pool) with the credentials :mod:`..client.kubeconfig` reads: in a pod its
service account (the token file read again for each request, as the kubelet rotates it),
else the kubeconfig's context. Not the official ``kubernetes`` client: importing it costs the
process ~20 MiB (every model class) and its per-request serialisation is Python work.

The client is synchronous; calls run on a bounded thread pool so the kopf event loop never
blocks. Errors are :class:`ApiError` with the API's own status, reason and message, and
:func:`classify` says what the reconcile should make of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import quote

from kubemill.substrates.kubernetes import transport
from kubemill.substrates.kubernetes.client import kubeconfig
from kubemill.version import __version__

USER_AGENT = f"kubemill-operator/{__version__}"
REQUEST_TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds for one request."""


@dataclass(frozen=True)
class ObjectRef:
    """Where one object lives in the API."""

    api_version: str
    plural: str
    namespace: str
    name: str

    @property
    def collection_path(self) -> str:
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{prefix}/namespaces/{quote(self.namespace, safe='')}/{self.plural}"

    @property
    def path(self) -> str:
        return f"{self.collection_path}/{quote(self.name, safe='')}"

    def __str__(self) -> str:
        return f"{self.plural} {self.namespace}/{self.name}"


class ApiError(Exception):
    """An error answer of the API server (or no answer at all: ``status`` 0)."""

    def __init__(self, *, verb: str, ref: ObjectRef, status: int, reason: str, message: str):
        super().__init__(f"{verb} {ref}: {status} {reason}: {message}")
        self.verb = verb
        self.ref = ref
        self.status = status
        self.reason = reason
        self.message = message


class Outcome(Enum):
    """What an API error means for the reconcile."""

    ALREADY_DONE = "already-done"
    """Create of an existing object, delete of a missing one: the goal holds."""
    RETRY = "retry"
    """Transient (5xx, 429, conflict, connection): try again with backoff."""
    BLOCKED = "blocked"
    """Forbidden or invalid: retrying soon will not help; tell the user and back off long."""


def classify(error: ApiError) -> Outcome:
    """Map an API error onto what to do next."""
    if error.verb == "create" and error.status == 409 and error.reason == "AlreadyExists":
        return Outcome.ALREADY_DONE
    if error.verb == "delete" and error.status == 404:
        return Outcome.ALREADY_DONE
    if error.verb == "delete" and error.status == 409:
        return Outcome.ALREADY_DONE  # precondition failed: the object we meant is gone
    if error.status in (401, 403, 400, 422) or (error.status == 404 and error.verb != "delete"):
        return Outcome.BLOCKED
    return Outcome.RETRY


def load_client_configuration(*, context: str | None) -> kubeconfig.Credentials:
    """The credentials: the service account in a pod, else the kubeconfig's ``context``
    (else its current one)."""
    if kubeconfig.in_a_pod():
        return kubeconfig.service_account()
    return kubeconfig.load(kubeconfig=None, context=context)


class KubeApi:
    """Writes and reads the reconcile needs, as blocking client calls on a thread pool."""

    def __init__(self, credentials: kubeconfig.Credentials, *, concurrency: int) -> None:
        self._client = credentials.pool(size=concurrency, user_agent=USER_AGENT)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="kubemill-api"
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    async def _run(
        self,
        verb: str,
        method: str,
        ref: ObjectRef,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        query: tuple[tuple[str, str], ...] = (),
        answer: bool = True,
    ) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self._call, verb, method, ref, path, body, content_type, query, answer
        )

    def _call(
        self,
        verb: str,
        method: str,
        ref: ObjectRef,
        path: str,
        body: Any,
        content_type: str,
        query: tuple[tuple[str, str], ...] = (),
        answer: bool = True,
    ) -> dict[str, Any]:
        """The request's answer, parsed (``answer``), else read whole and dropped (``{}``)."""
        try:
            raw = transport.send(
                self._client,
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                timeout=REQUEST_TIMEOUT,
            )
            if not answer:
                transport.read(raw)  # to the end: the connection is kept for the next request
                return {}
            parsed: dict[str, Any] = transport.read_json(raw)
        except transport.NoAnswer as exc:  # refused, reset, timeouts, TLS
            cause = exc.__cause__ or exc
            raise ApiError(
                verb=verb, ref=ref, status=0, reason=type(cause).__name__, message=str(cause)
            ) from None
        except transport.HttpAnswer as exc:
            body_text = (
                exc.body.decode("utf-8", "replace")
                if isinstance(exc.body, bytes)
                else (exc.body or "")
            )
            reason, message = exc.reason, body_text
            try:
                status_body = json.loads(body_text)
            except ValueError:
                status_body = None
            if isinstance(status_body, dict):  # a Status object
                reason = str(status_body.get("reason") or reason)
                message = str(status_body.get("message") or message)
            raise ApiError(
                verb=verb, ref=ref, status=exc.status, reason=reason, message=message
            ) from None
        return parsed

    # -- the verbs the operator uses ----------------------------------------------------------

    async def read(self, ref: ObjectRef) -> dict[str, Any]:
        """The object itself (for what the operator does not watch: its Lease)."""
        return await self._run("get", "GET", ref, ref.path)

    async def create(
        self, ref: ObjectRef, body: Mapping[str, Any], *, answer: bool = True
    ) -> dict[str, Any]:
        """The object created, as the server answered (``answer=False``: ``{}``, the answer
        read but not parsed: a pod comes back whole, managed fields and all, which the
        reconcile never reads, as the watch brings it to the cache anyway)."""
        return await self._run(
            "create", "POST", ref, ref.collection_path, body=dict(body), answer=answer
        )

    async def review_token(self, token: str, *, audience: str) -> dict[str, Any]:
        """The API server's TokenReview of ``token`` for ``audience`` (its whole answer)."""
        ref = ObjectRef("authentication.k8s.io/v1", "tokenreviews", "", "")
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        path = "/apis/authentication.k8s.io/v1/tokenreviews"
        return await self._run("create", "POST", ref, path, body=body)

    async def list(
        self, ref: ObjectRef, *, label_selector: str, field_selector: str = ""
    ) -> list[dict[str, Any]]:
        """The objects of ``ref``'s collection (its name unused) that ``label_selector`` (and
        ``field_selector``, if given) pick.

        For what the operator does not watch (its history records, read once at start), or
        whose content its cache does not keep (a Secret's data)."""
        query = [("labelSelector", label_selector)]
        if field_selector:
            query.append(("fieldSelector", field_selector))
        answer = await self._run("list", "GET", ref, ref.collection_path, query=tuple(query))
        return [dict(item) for item in answer.get("items") or ()]

    async def replace(self, ref: ObjectRef, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object; its ``metadata.resourceVersion`` (if any) makes it conditional."""
        return await self._run("update", "PUT", ref, ref.path, body=dict(body))

    async def delete(
        self, ref: ObjectRef, *, uid: str | None = None, propagation: str | None = None
    ) -> None:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            # Never delete a namesake that replaced the object we judged.
            options["preconditions"] = {"uid": uid}
        if propagation:
            options["propagationPolicy"] = propagation
        # The answer (the object, or a Status) is never read: not parsed either.
        await self._run("delete", "DELETE", ref, ref.path, body=options, answer=False)

    async def patch_status(
        self, ref: ObjectRef, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any]:
        """JSON merge patch of the status subresource (the only way status is written).

        With ``resource_version`` the server applies it only to that version of the object
        (``409 Conflict`` otherwise): a status decided on what a pass read never overwrites
        a newer one.
        """
        body: dict[str, Any] = {"status": dict(patch)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self._run(
            "patch",
            "PATCH",
            ref,
            ref.path + "/status",
            body=body,
            content_type="application/merge-patch+json",
        )

    async def patch_annotations(
        self, ref: ObjectRef, annotations: Mapping[str, str], *, resource_version: str | None
    ) -> dict[str, Any]:
        """JSON merge patch of the object's annotations (at ``resource_version``, if given)."""
        metadata: dict[str, Any] = {"annotations": dict(annotations)}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return await self._run(
            "patch",
            "PATCH",
            ref,
            ref.path,
            body={"metadata": metadata},
            content_type="application/merge-patch+json",
        )
