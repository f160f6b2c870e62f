"""Patching a job object on the cluster (the SDK's ``patch``, ``scale``, ``suspend``,
``resume`` and ``interrupt``): a JSON merge patch (an object) or a JSON patch (RFC 6902, a
list of operations), through kubemill's one HTTP client; the API server validates the result
and applies a JSON patch whole or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubemill.substrates.base import Patch, SubstrateError
from kubemill.substrates.kubernetes.client.connection import Http
from kubemill.substrates.kubernetes.client.errors import KubeApiError
from kubemill.substrates.kubernetes.client.kinds import Found

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def patch_job(http: Http, found: Found, patch: Patch) -> Found:
    """The job ``found`` once ``patch`` is applied. A JSON patch with a ``test`` that the
    server refuses (422: the job changed since it was read, or the result is invalid) is a
    :class:`SubstrateError` that says so; any other refusal is the API server's error."""
    request = found.request_for("patch")
    path = found.kind.path(found.namespace, found.name)
    body: Any
    if isinstance(patch, Mapping):
        body, content_type = dict(patch), MERGE_PATCH
    else:
        body, content_type = [dict(op) for op in patch], JSON_PATCH
    try:
        raw = http.json(request, "PATCH", path, body=body, content_type=content_type)
    except KubeApiError as exc:
        tested = content_type == JSON_PATCH and any(op.get("op") == "test" for op in body)
        if exc.status != 422 or not tested:
            raise
        raise SubstrateError(
            f"{found.kind.kind} {found.namespace}/{found.name} was not patched: it changed "
            f"since it was read, or the change is invalid ({exc}); read it and try again"
        ) from exc
    return Found(found.kind, raw)


__all__ = ["JSON_PATCH", "MERGE_PATCH", "patch_job"]
