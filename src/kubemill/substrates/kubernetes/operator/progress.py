"""The operator's progress endpoint: replicas' reports in, :class:`ObservedProgress` out.

A job pod's sidecar (:mod:`..progress`) POSTs its replica's latest report to
``/progress`` with the pod's service-account token of the ``kubemill-progress`` audience.
Nothing of the request is believed but what the API server vouches for:

1. a bearer token, and a body naming the job (``apiVersion``, ``kind``, ``namespace``,
   ``name``) and a report that follows the protocol (:func:`kubemill.progress.validate`);
2. a TokenReview of the token for the kubemill audience (the operator's one extra grant,
   ``tokenreviews/create``) says it is authenticated, is a service account's of the job's
   namespace, and is bound to a pod (the ``authentication.kubernetes.io/pod-name`` and
   ``pod-uid`` extras the API server adds to a pod-bound token);
3. that pod, by name and uid, is in the operator's pod cache as a child of that job (its
   controller is the job, by uid).

The pod is the one the token names, never one the body names: a pod can speak for itself
only. An accepted report is kept as the pod's latest (``Caches.progress``) and wakes
the job's reconcile, which hands it to the core as ``Observed.progress``; the core decides
what ``trainerStatus`` says and how often it is written, as for a local job. Only the
leading replica takes reports (a follower answers 503 and the sidecar tries again, through
the Service, until the leader has it). A successful review is remembered for
:data:`REVIEW_SECONDS` by the token's hash, so a pod reporting every 2 s costs one
TokenReview a minute; the pod check is made on every request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from kubemill.core import ObservedProgress
from kubemill.progress import FORWARD_AUDIENCE, BadReport, validate
from kubemill.substrates.kubernetes.operator.caches import Caches, JobKey
from kubemill.substrates.kubernetes.operator.settings import JobResource
from kubemill.substrates.kubernetes.progress import PROGRESS_PATH

logger = logging.getLogger("kubemill.operator.progress")

POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
MAX_BODY = 16 * 1024
"""The largest request body: a report line is at most 4 KiB, its JSON state about as much."""
REVIEW_SECONDS = 60.0
"""How long a successful TokenReview is taken as said (the token lives 10 minutes)."""
REVIEWS_KEPT = 10_000
"""The most reviews remembered at once (the oldest are forgotten first)."""


class Refused(Exception):
    """A request the endpoint does not take: its HTTP status and why (no secret in it)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


@dataclass(frozen=True)
class BoundPod:
    """Whom a token speaks for, as its TokenReview said."""

    namespace: str
    name: str
    uid: str


def _stamp(seconds: object, what: str) -> datetime:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise BadReport(f"{what} must be a time in seconds since the epoch")
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise BadReport(f"{what} is not a time: {seconds!r}") from None


def observed_progress(pod: str, report: object) -> ObservedProgress:
    """The forwarder's state of ``pod`` (:func:`kubemill.progress.merge`'s keys) as the
    core's :class:`ObservedProgress`; raises :class:`BadReport` naming what is wrong."""
    if not isinstance(report, Mapping):
        raise BadReport("report: a JSON object is needed")
    metrics = report.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise BadReport("report.metrics: a JSON object is needed")
    clash = [name for name in metrics if name in ("step", "total", "time")]
    if clash:
        raise BadReport(f"report.metrics: {clash[0]!r} is not a metric name")
    checked = validate(
        {**metrics, "step": report.get("step"), "total": report.get("total"), "time": 0}
    )
    when = _stamp(report.get("time"), "report.time")
    origin = report.get("origin")
    since: tuple[datetime, int] | None = None
    if origin is not None:
        if not isinstance(origin, list) or len(origin) != 2:
            raise BadReport("report.origin: [time, step] is needed")
        first = validate({"step": origin[1]})["step"]
        since = (_stamp(origin[0], "report.origin's time"), first)
    return ObservedProgress(
        pod=pod,
        time=when,
        step=checked["step"],
        total=checked["total"],
        metrics=tuple(sorted(checked["metrics"].items())),
        origin=since,
    )


def _token(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused(401, "no bearer token")
    return token.strip()


def _job_named(body: object) -> tuple[str, str, str, str]:
    if not isinstance(body, Mapping):
        raise Refused(400, "the body is a JSON object")
    named = tuple(body.get(field) for field in ("apiVersion", "kind", "namespace", "name"))
    for field, value in zip(("apiVersion", "kind", "namespace", "name"), named, strict=True):
        if not isinstance(value, str) or not value:
            raise Refused(400, f"{field}: a non-empty string is needed")
    return named  # type: ignore[return-value]  # four strings, checked above


def bound_pod(review: Mapping[str, Any]) -> BoundPod:
    """Whom a TokenReview's answer says the token speaks for; :class:`Refused` unless it is
    authenticated for the kubemill audience and bound to a pod."""
    status = review.get("status") or {}
    if not status.get("authenticated"):
        raise Refused(401, "the token is not valid for the kubemill-progress audience")
    if FORWARD_AUDIENCE not in (status.get("audiences") or ()):
        raise Refused(401, "the token is not of the kubemill-progress audience")
    user = status.get("user") or {}
    parts = str(user.get("username", "")).split(":")
    if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
        raise Refused(403, "the token is not a service account's")
    extra = user.get("extra") or {}
    names, uids = extra.get(POD_NAME_EXTRA) or [], extra.get(POD_UID_EXTRA) or []
    if len(names) != 1 or len(uids) != 1:
        raise Refused(403, "the token is not bound to a pod")
    return BoundPod(namespace=parts[2], name=names[0], uid=uids[0])


class ProgressEndpoint:
    """``POST /progress`` (see the module's docstring); served by :meth:`start`."""

    def __init__(
        self,
        *,
        review: Callable[[str], Awaitable[Mapping[str, Any]]],
        caches: Caches,
        resources: Mapping[tuple[str, str], JobResource],
        reports: MutableMapping[JobKey, dict[str, ObservedProgress]],
        leading: Callable[[], bool],
        wake: Callable[[JobKey], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``review``: a TokenReview of a token for the kubemill audience (its answer);
        ``resources``: the served kinds by (apiVersion, kind); ``reports``: where each
        replica's latest report is kept, by job; ``wake``: queue a job."""
        self._review = review
        self._caches = caches
        self._resources = resources
        self._reports = reports
        self._leading = leading
        self._wake = wake
        self._clock = clock
        self._reviewed: dict[str, tuple[BoundPod, float]] = {}
        self._runner: web.AppRunner | None = None

    async def start(self, *, address: str, port: int) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(PROGRESS_PATH, self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, address, port).start()
        logger.info("progress endpoint on %s:%d%s", address, port, PROGRESS_PATH)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def handle(self, request: web.Request) -> web.Response:
        try:
            token = _token(request)
            try:
                body = json.loads(await request.read())
            except (ValueError, UnicodeDecodeError):
                raise Refused(400, "the body is not JSON") from None
            except web.HTTPRequestEntityTooLarge:
                raise Refused(413, f"the body is over {MAX_BODY} bytes") from None
            key, report = await self.accept(token, body)
        except Refused as refused:
            if refused.status != 503:
                logger.info("progress report refused (%d): %s", refused.status, refused.why)
            return web.json_response({"error": refused.why}, status=refused.status)
        self._reports.setdefault(key, {})[report.pod] = report
        self._wake(key)
        return web.json_response({"accepted": report.pod}, status=202)

    async def accept(self, token: str, body: object) -> tuple[JobKey, ObservedProgress]:
        """The job and the report a request carries, if it is to be taken; else
        :class:`Refused`."""
        api_version, kind, namespace, name = _job_named(body)
        assert isinstance(body, Mapping)
        if not self._leading():
            raise Refused(503, "this operator replica is not leading; try again")
        pod = await self._bound(token)
        resource = self._resources.get((api_version, kind))
        if pod.namespace != namespace or resource is None:
            raise Refused(403, f"the token's pod is not one of {kind} {namespace}/{name}")
        key: JobKey = (resource.group, resource.plural, namespace, name)
        job = self._caches.job(key)
        job_uid = (job or {}).get("metadata", {}).get("uid")
        pods = self._caches.children("pods", (namespace, name))
        if not job_uid or not any(
            p.name == pod.name and p.uid == pod.uid and p.owner_uid == job_uid for p in pods
        ):
            raise Refused(403, f"the token's pod is not one of {kind} {namespace}/{name}")
        try:
            report = observed_progress(pod.name, body.get("report"))
        except BadReport as exc:
            raise Refused(400, f"report: {exc}") from None
        return key, report

    async def _bound(self, token: str) -> BoundPod:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        known = self._reviewed.get(digest)
        if known is not None and known[1] > now:
            return known[0]
        try:
            answer = await self._review(token)
        except Exception as exc:  # the API server did not answer: the sender tries again
            logger.warning("TokenReview failed: %s", exc)
            raise Refused(503, "the token could not be reviewed now; try again") from None
        pod = bound_pod(answer)
        if len(self._reviewed) >= REVIEWS_KEPT:
            self._reviewed = {d: v for d, v in self._reviewed.items() if v[1] > now}
            while len(self._reviewed) >= REVIEWS_KEPT:
                del self._reviewed[next(iter(self._reviewed))]
        self._reviewed[digest] = (pod, now + REVIEW_SECONDS)
        return pod
