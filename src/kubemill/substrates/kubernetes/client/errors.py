"""Errors of the client side of the Kubernetes substrate, each saying what to do next.

The API server's own answer is never hidden: every :class:`KubeApiError` carries its
HTTP status, ``reason`` and message (and repeats them in its text), and adds what the
user can do about it. :class:`~.connection.Http` turns what the substrate's HTTP layer
reports (an error answer, no answer at all) into these errors with :func:`api_error` and
:func:`unreachable`; the caller says which verb it tried on which resource, so a refusal
can name what is missing.

Credentials never appear here: messages are built from the API's answer and from names
(server address, context, namespace, resource), never from headers or the kubeconfig's
user entry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kubemill.substrates.base import SubstrateError

INSTALL_HINT = "run `kubemill install` (or `kubemill install --print | kubectl apply -f -`)"


@dataclass(frozen=True)
class Request:
    """What the client tried: an RBAC verb on a resource (``plural.group`` or ``plural``)."""

    verb: str
    plural: str
    group: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    @property
    def resource(self) -> str:
        """As RBAC and kubectl name it: ``pods/log``, ``tfjobs.kubemill.dev``."""
        plural = f"{self.plural}/{self.subresource}" if self.subresource else self.plural
        return f"{plural}.{self.group}" if self.group else plural

    @property
    def where(self) -> str:
        return f'in namespace "{self.namespace}"' if self.namespace else "at the cluster scope"

    def __str__(self) -> str:
        target = f"{self.resource} {self.name}" if self.name else self.resource
        return f"{self.verb} {target} {self.where}"


class KubeconfigError(SubstrateError):
    """No usable kubeconfig (missing file, unknown context, broken auth entry)."""


class ClusterUnreachable(SubstrateError):
    """No answer from the API server (connection refused, DNS, TLS, timeout)."""


class CRDsNotInstalled(SubstrateError):
    """The kubemill job kinds are not served by this cluster."""

    def __init__(self, missing: list[str], server: str) -> None:
        self.missing = missing
        super().__init__(
            f"the kubemill CRDs are not installed in this cluster ({server}): "
            f"{', '.join(missing)} not served; {INSTALL_HINT}"
        )


class OperatorNotActing(SubstrateError):
    """A job was accepted by the API server but no operator has picked it up."""


class KubeApiError(SubstrateError):
    """An error answer of the API server, with its status, reason and message kept."""

    def __init__(
        self, text: str, *, request: Request, status: int, reason: str, api_message: str
    ) -> None:
        super().__init__(text)
        self.request = request
        self.status = status
        self.reason = reason
        self.api_message = api_message


class AccessDenied(KubeApiError):
    """401 or 403: who you are, or what you may do, is not enough for the request."""

    def __init__(
        self,
        text: str,
        *,
        request: Request,
        status: int,
        reason: str,
        api_message: str,
        verb: str,
        resource: str,
        group: str,
    ) -> None:
        super().__init__(
            text, request=request, status=status, reason=reason, api_message=api_message
        )
        self.verb = verb
        """The RBAC verb that is missing (``create``, ``list``, ...)."""
        self.resource = resource
        """The resource it is missing on (``tfjobs``, ``pods/log``, ...)."""
        self.group = group
        """The resource's API group (``""`` for core resources)."""


@dataclass(frozen=True)
class ApiAnswer:
    """The parts of an error answer the messages use (the body is a ``Status`` object)."""

    status: int
    reason: str
    message: str
    details: dict[str, Any]


def parse_answer(status: int, http_reason: str, body: bytes | str | None) -> ApiAnswer:
    """Status, reason, message and details of an error answer, whatever the body holds."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else (body or "")
    reason, message, details = http_reason, "", {}
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        reason = str(parsed.get("reason") or reason)
        message = str(parsed.get("message") or "")
        raw_details = parsed.get("details")
        details = raw_details if isinstance(raw_details, dict) else {}
    elif text:
        message = text.strip()[:500]
    return ApiAnswer(status=status, reason=reason, message=message, details=details)


# `User "alice" cannot create resource "tfjobs" in API group "kubemill.dev" in the namespace
# "default"` (or `... at the cluster scope`): the wording of the API server's RBAC authorizer.
_FORBIDDEN = re.compile(
    r'cannot (?P<verb>[\w-]+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<namespace>[^"]+)")?'
)


def access_denied(request: Request, answer: ApiAnswer) -> AccessDenied:
    """The 401/403 error: which verb on which resource is missing, and how to get it."""
    said = f"{answer.status} {answer.reason}: {answer.message}".rstrip(": ")
    asked = request.plural + (f"/{request.subresource}" if request.subresource else "")
    if answer.status == 401:
        return AccessDenied(
            f"the API server did not accept your credentials ({said}); log in again or fix "
            "the user of your kubeconfig context (`kubectl config view --minify`)",
            request=request,
            status=answer.status,
            reason=answer.reason,
            api_message=answer.message,
            verb=request.verb,
            resource=asked,
            group=request.group,
        )
    match = _FORBIDDEN.search(answer.message)
    if match:  # the RBAC authorizer's words name exactly what it checked
        verb, resource, namespace = match["verb"], match["resource"], match["namespace"]
        group = match["group"]
        if group is None:
            group = str(answer.details.get("group") or request.group)
    else:  # refused in other words (an admission policy, ...): name what we asked for
        verb, resource, namespace = request.verb, asked, request.namespace
        group = request.group
    full = f"{resource}.{group}" if group else resource
    where = f'in namespace "{namespace}"' if namespace else "at the cluster scope"
    role = "a Role or ClusterRole" if namespace else "a ClusterRole"
    hint = (
        f'ask a cluster admin for {role} {where} with apiGroups: ["{group}"], '
        f'resources: ["{resource}"], verbs: ["{verb}"]'
    )
    if namespace is None and verb in ("list", "watch"):
        hint += ", or name a namespace (`-n NAMESPACE`) you have access to"
    can_i = f"kubectl auth can-i {verb} {full}" + (f" -n {namespace}" if namespace else "")
    return AccessDenied(
        f'forbidden: you may not "{verb}" {full} {where} (API: {said}); {hint}; '
        f"`{can_i}` checks it",
        request=request,
        status=answer.status,
        reason=answer.reason,
        api_message=answer.message,
        verb=verb,
        resource=resource,
        group=group,
    )


def api_error(request: Request, answer: ApiAnswer) -> KubeApiError:
    """Any other error answer, with the API's words and the request that got it."""
    if answer.status in (401, 403):
        return access_denied(request, answer)
    said = f"{answer.status} {answer.reason}: {answer.message}".rstrip(": ")
    hint = ""
    if answer.status == 422 or answer.status == 400:
        hint = "; the API server refused the object: run `kubemill validate` on the manifest"
    elif answer.status in (429, 500, 502, 503, 504):
        hint = "; the API server is busy or failing: try again shortly"
    elif answer.status == 409:
        hint = "; someone changed it at the same time: try again"
    return KubeApiError(
        f"{request} failed: {said}{hint}",
        request=request,
        status=answer.status,
        reason=answer.reason,
        api_message=answer.message,
    )


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"()]+)")


def unreachable(exc: BaseException, *, server: str, context: str | None) -> ClusterUnreachable:
    """The connection-level failure, said in a few words, with what to check."""
    found = _ERRNO.search(str(exc))  # urllib3 keeps the OS error's words in its text
    if found:
        text = found.group(1).strip().rstrip(".,")
    elif "Timeout" in type(exc).__name__ or "timed out" in str(exc):
        text = "timed out"
    elif "SSL" in type(exc).__name__ or "CERTIFICATE" in str(exc).upper():
        text = "TLS handshake failed (check the cluster's certificate-authority in the kubeconfig)"
    else:
        text = type(exc).__name__
    ctx = f" (context {context!r})" if context else ""
    return ClusterUnreachable(
        f"cannot reach the Kubernetes API server at {server}{ctx}: {text}; is the cluster "
        "running and is this the right kubeconfig context? `kubectl cluster-info` checks it"
    )
