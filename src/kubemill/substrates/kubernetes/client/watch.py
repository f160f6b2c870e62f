"""Reading one job again from the API server: as it is now (:func:`refetch`), or after its
next change, through a watch of that one object (:func:`watch_once`).
"""

from __future__ import annotations

import contextlib
import json

from kubemill.substrates.base import JobNotFound
from kubemill.substrates.kubernetes.client.connection import REQUEST_TIMEOUT, Http
from kubemill.substrates.kubernetes.client.errors import KubeApiError
from kubemill.substrates.kubernetes.client.kinds import Found
from kubemill.substrates.kubernetes.transport import is_connection_error, lines


def refetch(http: Http, found: Found) -> Found:
    """The job as the API has it now; ``JobNotFound`` once it is deleted (or replaced)."""
    request = found.request_for("get")
    try:
        raw = http.json(request, "GET", found.kind.path(found.namespace, found.name))
    except KubeApiError as exc:
        if exc.status == 404:
            raise deleted(found) from exc
        raise
    if found.uid and raw.get("metadata", {}).get("uid") != found.uid:
        raise deleted(found)
    return Found(found.kind, raw)


def deleted(found: Found) -> JobNotFound:
    """The error for a job deleted while it was waited for."""
    return JobNotFound(
        f"{found.kind.kind} {found.namespace}/{found.name} was deleted while we waited"
    )


def watch_once(http: Http, found: Found, seconds: float) -> Found | None:
    """The job after its next change, or ``None`` when nothing came in ``seconds``."""
    query = [
        ("watch", "true"),
        ("fieldSelector", f"metadata.name={found.name}"),
        ("timeoutSeconds", str(max(1, int(seconds)))),
        ("allowWatchBookmarks", "false"),
    ]
    version = (found.raw.get("metadata") or {}).get("resourceVersion")
    if version:
        query.append(("resourceVersion", str(version)))
    request = found.kind.request_for("watch", found.namespace)
    try:
        # The read timeout ends a quiet watch on servers that ignore timeoutSeconds.
        raw = http.send(
            request,
            "GET",
            found.kind.path(found.namespace),
            query=query,
            timeout=(REQUEST_TIMEOUT[0], seconds),
            stream=True,
        )
    except KubeApiError as exc:
        if exc.status == 410:
            return None  # our resourceVersion is too old: the caller reads afresh
        raise
    try:
        for line in lines(raw):
            event = json.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                return None  # e.g. 410 Gone: start over from a fresh read
            meta = obj.get("metadata") or {}
            if meta.get("name") != found.name:
                continue
            if kind == "DELETED" or (found.uid and meta.get("uid") != found.uid):
                raise deleted(found)
            obj.setdefault("apiVersion", found.kind.api_version)
            obj.setdefault("kind", found.kind.kind)
            if obj == found.raw:
                continue  # the current state again (a watch from "now")
            return Found(found.kind, obj)
    except Exception as exc:
        if is_connection_error(exc):
            return None  # timed out or cut: the caller reads afresh
        raise
    finally:
        with contextlib.suppress(Exception):
            raw.release_conn()
    return None
