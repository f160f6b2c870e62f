"""The SDK backend of the Kubernetes substrate: what ``JobClient(substrate="kubernetes")`` calls.

:class:`KubernetesBackend` implements :class:`~kubemill.substrates.base.Backend` against a
cluster through kubemill's own HTTP client, with what a kubeconfig or a pod's service account
gives (see :mod:`.connection`; the ``kubernetes`` package is not needed):

- ``submit`` creates the job object (``kubemill.dev/v1``, plural from the CRD registry, see
  :mod:`.kinds`; a manifest in an upstream group is created in ours too); the operator does
  the rest;
- every other call finds the job by name in our group and in the upstream groups the
  cluster serves (the operator's ``--serve-upstream-groups``: KubeRay's, Kubeflow's, ...; a
  name qualified with a group looks there only), and reads and writes it in the group it
  was found in; ``list`` lists them all (see :meth:`.lookup.JobLookup.find` for a name
  present in two groups);
- ``get``/``list`` map the object's status, and each replica from its pod (labelled
  ``kubemill.dev/job-name``, controlled by the job) as the core sees it (:mod:`.views`);
  a replica run through a child controller from its batch/v1 Job (labelled and controlled
  alike; listed only for a Plan that has such a replica);
- ``wait`` watches the job until it is Succeeded or Failed (or a timeout);
- ``logs`` reads each replica's pod log; ``follow`` streams every replica at once, picks
  up pods that are (re)created and containers that restart, until the job has finished
  (:mod:`.logs`);
- ``events`` lists the ``core/v1`` Events whose ``involvedObject`` is the job;
- ``interrupt`` sets the stop annotation (the core fails the job, ``Interrupted``) and
  waits for its pods to go; ``suspend``/``resume`` merge-patch ``runPolicy.suspend``;
- ``delete`` deletes the job object; its pods, services and PodGroup go with it through
  the garbage collector (they carry an ``ownerReference`` to the job);
- ``history`` reads the operator's records of deleted jobs (:mod:`.history`).

Errors say what to do (see :mod:`.errors`): CRDs missing, no operator acting on a new job
within ``operator_timeout`` seconds, which verb on which resource RBAC refuses, an
unreachable cluster or an unusable kubeconfig. The API server's status, reason and message
are always kept in them.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubemill.api import STOP_ANNOTATION, Job
from kubemill.frameworks import LABEL_JOB_NAME
from kubemill.kinds import child_pods_of
from kubemill.substrates.base import (
    Children,
    EventRecord,
    JobExists,
    JobNotFound,
    JobView,
    LogLine,
    LogQuery,
    Patch,
    ProgressPoint,
    ResourceReport,
    SubmitOptions,
    SubstrateError,
    status_point,
)
from kubemill.substrates.history import JobRecord
from kubemill.substrates.kubernetes.client.children import child_view
from kubemill.substrates.kubernetes.client.connection import Connection, Http, connect
from kubemill.substrates.kubernetes.client.errors import (
    INSTALL_HINT,
    KubeApiError,
    OperatorNotActing,
    Request,
)
from kubemill.substrates.kubernetes.client.events import event_record, event_selector
from kubemill.substrates.kubernetes.client.history import read_records
from kubemill.substrates.kubernetes.client.kinds import (
    Found,
    job_body,
    kind_of,
)
from kubemill.substrates.kubernetes.client.logs import LogFollower, log_sources, read_logs
from kubemill.substrates.kubernetes.client.lookup import JobLookup
from kubemill.substrates.kubernetes.client.metrics import pod_metrics
from kubemill.substrates.kubernetes.client.patches import patch_job
from kubemill.substrates.kubernetes.client.replica_reads import (
    job_pods,
    list_pods,
    listed_replica_pods,
    replica_pods,
)
from kubemill.substrates.kubernetes.client.views import (
    ReplicaPods,
    job_plan,
    pick_replica,
    replica_names,
    replica_views,
)
from kubemill.substrates.kubernetes.client.watch import refetch, watch_once
from kubemill.substrates.kubernetes.install.names import DEFAULT_NAMESPACE as OPERATOR_NAMESPACE
from kubemill.substrates.kubernetes.observe import parse_time
from kubemill.substrates.kubernetes.transport import api_path

DEFAULT_OPERATOR_TIMEOUT = 30.0
"""Seconds a new job may go without a condition or a pod before we say no operator acts."""
DEFAULT_POLL_INTERVAL = 1.0
"""Seconds between looks at pods while following logs."""
WATCH_SECONDS = 300.0
"""Longest single watch request; a new one starts after it (servers end them anyway)."""


class KubernetesBackend:
    """Jobs on a Kubernetes cluster that runs the kubemill operator.

    ``kubeconfig``/``context`` choose the cluster as kubectl does (defaults: ``$KUBECONFIG``
    or ``~/.kube/config`` and its current context; in a pod without either, its service
    account). ``namespace`` is the default namespace (else the context's, else
    ``default``). ``operator_timeout`` is how long a new job may go without any sign of
    the operator (a condition or a pod) before ``submit(detach=False)``, ``wait`` and
    ``logs(follow=True)`` raise :class:`OperatorNotActing` (``0`` or ``None``: never).
    ``api_client`` uses a ready ``kubernetes.client.ApiClient`` instead of a kubeconfig.
    ``operator_namespace`` is where the operator keeps its history records.
    """

    def __init__(
        self,
        *,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        namespace: str | None = None,
        operator_timeout: float | None = DEFAULT_OPERATOR_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        api_client: Any = None,
        operator_namespace: str = OPERATOR_NAMESPACE,
    ) -> None:
        self.operator_namespace = operator_namespace
        if api_client is not None:
            connection = Connection(
                api_client, str(api_client.configuration.host), context, namespace or "default"
            )
        else:
            connection = connect(kubeconfig=kubeconfig, context=context)
        self.connection = connection
        self.http = Http(connection)
        self.default_namespace = namespace or connection.namespace
        self.operator_timeout = operator_timeout or 0.0
        self.poll_interval = poll_interval
        self._submitted: dict[str, float] = {}
        """uid -> monotonic time of our submit: the operator check counts from there."""
        self.lookup = JobLookup(self.http, connection.server)
        """Where jobs are found and listed (our group, then the upstream ones served)."""

    def close(self) -> None:
        """Release the connection pool."""
        self.connection.api_client.close()

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.default_namespace

    # --- submit --------------------------------------------------------------------------

    def submit(self, job: Job, options: SubmitOptions) -> JobView:
        """Create the job object; returns at once with it as created (no replicas yet).

        ``detach=False`` (a foreground run) also waits until the operator has acted on it
        (a condition or a pod) and raises :class:`OperatorNotActing` after
        ``operator_timeout`` seconds without; the job stays in the cluster then.
        """
        kind = kind_of(job)
        namespace = self._target_namespace(job, options.namespace)
        body = job_body(job, namespace)
        request = kind.request_for("create", namespace, job.name)
        try:
            raw = self.http.json(request, "POST", kind.path(namespace), body=body)
        except KubeApiError as exc:
            if exc.status == 409:
                raise JobExists(
                    f"a {job.KIND} named {job.name!r} already exists in namespace "
                    f"{namespace!r}; delete it first (`kubemill delete {job.name} -n "
                    f"{namespace}`) or "
                    f"choose another metadata.name (API: {exc.status} {exc.reason})"
                ) from exc
            if exc.status == 404:
                self.lookup.require_crds([kind])
            raise
        found = Found(kind, raw)
        self._submitted[found.uid] = time.monotonic()
        if not options.detach and self.operator_timeout:
            found = self._until(found, done=_acted, deadline=None, pods_suffice=True)
        return self._view(found, self._replica_pods(found) if not options.detach else None)

    def _target_namespace(self, job: Job, namespace: str | None) -> str:
        given = job.metadata.namespace
        if namespace is not None and given and given != namespace:
            raise SubstrateError(
                f"the manifest says namespace {given!r} but {namespace!r} was asked for;"
                " remove metadata.namespace or ask for the same one"
            )
        return namespace or given or self.default_namespace

    # --- reads ---------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> JobView:
        """The job now, with a replica per pod the spec asks for. Raises ``JobNotFound``."""
        found = self._find(name, self._ns(namespace))
        return self._view(found, self._replica_pods(found))

    def list(self, namespace: str | None = None) -> builtins.list[JobView]:
        """Every job of ``namespace`` (every namespace when ``None``), oldest first: those
        of our group, and those of each upstream group the cluster serves.

        An object of an upstream group that kubemill cannot load (another operator's, or one
        using a field kubemill refuses) is left out: it is no job kubemill runs, and one such
        object must not hide the others; ``get`` of its name says what is wrong with it.
        """
        objects = self.lookup.listed(namespace)
        seen = listed_replica_pods(self.http, namespace, objects)
        views = [self._view(f, seen[f.uid]) for f in objects]
        return sorted(
            views,
            key=lambda v: (v.created or datetime.min.replace(tzinfo=UTC), v.namespace, v.name),
        )

    def wait(
        self, name: str, namespace: str | None = None, timeout: float | None = None
    ) -> JobView:
        """Watch the job until it has Succeeded or Failed, or ``timeout`` seconds passed.

        Returns the job as it is then (check ``view.finished`` after a timeout). Raises
        :class:`OperatorNotActing` if it has had neither a condition nor a pod for
        ``operator_timeout`` seconds, and ``JobNotFound`` if it is deleted meanwhile.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        found = self._find(name, self._ns(namespace))
        found = self._until(found, done=_finished, deadline=deadline)
        return self._view(found, self._replica_pods(found))

    def progress(self, name: str, namespace: str | None = None) -> builtins.list[ProgressPoint]:
        """The one report the job's status holds: no history of reports is kept on
        Kubernetes (the operator keeps each pod's latest only; see :mod:`kubemill.progress`)."""
        return status_point(self.get(name, namespace).status)

    def children(self, name: str, namespace: str | None = None) -> Children | None:
        """The pods the job's program created, selected as its engine's record says."""
        found = self._find(name, self._ns(namespace))
        hook = child_pods_of(found.kind.kind)
        if hook is None:
            return None
        pods = list_pods(self.http, found.namespace, hook.selector(found.job()))
        return Children(hook.title, tuple(sorted(map(child_view, pods), key=lambda p: p.name)))

    def resources(self, name: str, namespace: str | None = None) -> ResourceReport:
        """The latest CPU and memory of the job's replicas, from the metrics API if the
        cluster has one (else a report that says it has none): each pod the job controls,
        and a replica run through a batch/v1 Job as its Job's newest pod, under the
        replica's name as ``get`` and ``logs`` show it."""
        found = self._find(name, self._ns(namespace))
        seen = self._replica_pods(found)
        if seen.plan is None:  # not plannable: its own pods, by their names
            names = (str((p.get("metadata") or {}).get("name", "")) for p in seen.pods)
            pods = {pod: pod for pod in names}
        else:  # the same pod of each replica as its logs
            sources = log_sources(found.job(), seen.plan, seen)
            pods = {source.pod_name: source.replica for source in sources}
        selector = f"{LABEL_JOB_NAME}={found.name}"
        return pod_metrics(self.http, found.namespace, selector, pods)

    def history(self, namespace: str | None = None) -> builtins.list[JobRecord]:
        """The operator's records of deleted jobs of ``namespace`` (every namespace when
        ``None``), oldest deletion first."""
        return read_records(
            self.http, operator_namespace=self.operator_namespace, namespace=namespace
        )

    def events(self, name: str, namespace: str | None = None) -> builtins.list[EventRecord]:
        """The Events whose ``involvedObject`` is the job, oldest first."""
        found = self._find(name, self._ns(namespace))
        request = Request("list", "events", "", found.namespace)
        path = api_path(group="", version="v1", plural="events", namespace=found.namespace)
        query = [("fieldSelector", event_selector(found))]
        answer = self.http.json(request, "GET", path, query=query)
        records = [event_record(item) for item in answer.get("items") or ()]
        return sorted(records, key=lambda e: e.time)

    # --- logs ----------------------------------------------------------------------------

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        replica: str | None = None,
        follow: bool = False,
        query: LogQuery | None = None,
    ) -> Iterator[LogLine]:
        """Each replica's pod log (its framework container), replica after replica.

        ``query`` is passed on to the API per pod (``tailLines``, ``sinceSeconds`` or
        ``sinceTime``, ``limitBytes``); ``timestamps`` keeps each line's time.

        ``replica`` picks one (``worker-1`` or the pod's name). ``follow`` streams every
        replica at once as lines are written, following pods the operator recreates and
        containers that restart, until the job has finished and its pods are done.
        Replicas whose pods do not exist (yet, or any more) have no lines. A replica run
        through a batch/v1 Job is read from the Job's newest pod, under the replica's name
        (see :mod:`.logs`: the pods the Job retried are earlier attempts).
        """
        found = self._find(name, self._ns(namespace))
        job = found.job()
        wanted = None
        if replica is not None:
            names = replica_names(job_plan(job))
            extra = sorted(
                str(p["metadata"]["name"])
                for p in self._pods(found)
                if p["metadata"]["name"] not in names
            )
            wanted = pick_replica(job.name, names + extra, replica)
        if follow:
            return LogFollower(_FollowedJobs(self), found, wanted, query).lines()
        return self._read_logs(found, wanted, query)

    def _read_logs(
        self, found: Found, wanted: str | None, query: LogQuery | None
    ) -> Iterator[LogLine]:
        # A generator, so the pods are listed when the first line is asked for.
        yield from read_logs(self.http, found, self._replica_pods(found), wanted, query)

    # --- delete --------------------------------------------------------------------------

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Delete the job object; returns once the API server has accepted it.

        Its pods, services and PodGroup are deleted by the cluster's garbage collector
        (each carries an ``ownerReference`` to the job); pods get their grace period.
        Only the object we found is deleted (a ``uid`` precondition), never a namesake
        created meanwhile.
        """
        found = self._find(name, self._ns(namespace))
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if found.uid:
            options["preconditions"] = {"uid": found.uid}
        request = found.request_for("delete")
        try:
            self.http.json(
                request, "DELETE", found.kind.path(found.namespace, found.name), body=options
            )
        except KubeApiError as exc:
            if exc.status in (404, 409):  # gone already (409: the precondition's namesake)
                raise JobNotFound(
                    f"{found.kind.kind} {found.namespace}/{found.name} was deleted meanwhile"
                ) from exc
            raise

    # --- finding jobs and their pods -----------------------------------------------------

    def _find(self, name: str, namespace: str) -> Found:
        return self.lookup.find(name, namespace)

    def _pods(self, found: Found) -> builtins.list[dict[str, Any]]:
        return job_pods(self.http, found)

    def _replica_pods(self, found: Found) -> ReplicaPods:
        return replica_pods(self.http, found)

    def _view(self, found: Found, seen: ReplicaPods | None) -> JobView:
        """The job as ``get`` shows it; ``seen`` None: no replica has a pod yet (a job just
        submitted)."""
        job = found.job()
        seen = seen if seen is not None else ReplicaPods()
        return JobView(
            job=job,
            status=job.status,
            replicas=replica_views(job, seen.pods, plan=seen.plan, controlled=seen.controlled),
            created=parse_time(job.metadata.creation_timestamp),
        )

    # --- watching a job ------------------------------------------------------------------

    def _until(
        self,
        found: Found,
        *,
        done: Callable[[Job], bool],
        deadline: float | None,
        pods_suffice: bool = False,
    ) -> Found:
        """Watch ``found`` until ``done(job)`` or ``deadline``; check the operator acts.

        The check comes ``operator_timeout`` seconds after our own submit of the job (or
        after we started watching it): no condition by then, and no pod, means no operator
        has picked it up. ``pods_suffice``: pods found then also end the watch.
        """
        check_at = None
        if self.operator_timeout:
            since = self._submitted.get(found.uid, time.monotonic())
            check_at = since + self.operator_timeout
        while True:
            job = found.job()
            if done(job):
                return found
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return found
            if check_at is not None and now >= check_at:
                if not job.status.conditions and not self._pods(found):
                    raise self._not_acting(found)
                check_at = None
                if pods_suffice:
                    return found  # pods exist: the operator is at work
            ends = [t for t in (deadline, check_at) if t is not None]
            seconds = min([WATCH_SECONDS, *(t - now for t in ends)])
            changed = watch_once(self.http, found, max(seconds, 0.05))
            found = changed if changed is not None else refetch(self.http, found)

    def _not_acting(self, found: Found) -> OperatorNotActing:
        return OperatorNotActing(
            f"{found.kind.kind} {found.namespace}/{found.name} has not been picked up: "
            f"{self.operator_timeout:g} s after it was submitted it has no condition and no "
            "pods. Is the kubemill operator running? see `kubectl -n "
            f"{OPERATOR_NAMESPACE} get pods` (not installed: {INSTALL_HINT}; watching "
            "another namespace: check its --namespace flags). The job stays in the cluster "
            f"until `kubemill delete {found.name} -n {found.namespace}`"
        )

    # --- interrupt (Ctrl-C of a foreground run), suspend, resume ---------------------------

    def interrupt(
        self,
        name: str,
        namespace: str | None = None,
        *,
        force: bool = False,
        why: str = "kubemill interrupt",
    ) -> JobView:
        """Stop the job for good: set the stop annotation (``kubemill.dev/stop: why``).

        The operator's core records it Failed with reason ``Interrupted`` and deletes its
        pods, as the local substrate does. Waits until the pods are gone (at most
        ``operator_timeout`` seconds; ``force`` deletes them at once without a grace
        period). A job that already finished is left as it is.
        """
        found = self._find(name, self._ns(namespace))
        if found.job().status.finished:
            return self._view(found, self._replica_pods(found))
        found = self._merge_patch(found, {"metadata": {"annotations": {STOP_ANNOTATION: why}}})
        deadline = time.monotonic() + max(self.operator_timeout, 1.0)
        while True:
            seen = self._replica_pods(found)
            pods = seen.pods
            if not pods or time.monotonic() >= deadline:
                return self._view(refetch(self.http, found), seen)
            if force:
                for pod in pods:
                    self._delete_pod(found.namespace, str(pod["metadata"]["name"]))
            time.sleep(min(self.poll_interval, 0.5))

    def suspend(self, name: str, namespace: str | None = None) -> JobView:
        """Suspend the job (``spec.runPolicy.suspend: true``); the operator deletes its pods."""
        return self._set_suspend(name, namespace, suspend=True)

    def resume(self, name: str, namespace: str | None = None) -> JobView:
        """Resume the job (``spec.runPolicy.suspend: false``); the operator creates its pods."""
        return self._set_suspend(name, namespace, suspend=False)

    def patch(self, name: str, patch: Patch, namespace: str | None = None) -> JobView:
        """Patch the job (the API server validates it and applies it whole, a JSON patch's
        ``test`` operations first among its own); the operator plans from it."""
        found = patch_job(self.http, self._find(name, self._ns(namespace)), patch)
        return self._view(found, self._replica_pods(found))

    def _set_suspend(self, name: str, namespace: str | None, *, suspend: bool) -> JobView:
        found = self._find(name, self._ns(namespace))
        if found.job().status.finished:
            verb = "suspended" if suspend else "resumed"
            raise SubstrateError(
                f"{found.kind.kind} {found.namespace}/{found.name} has already finished"
                f" ({found.job().status.phase}); only a running or suspended job can be {verb}"
            )
        # Each kind says where its suspend field is (Spark's is spec.suspend).
        found = self._merge_patch(found, type(found.job()).suspend_patch(suspend))
        return self._view(found, self._replica_pods(found))

    def _merge_patch(self, found: Found, body: dict[str, Any]) -> Found:
        return patch_job(self.http, found, body)

    def _delete_pod(self, namespace: str, pod: str) -> None:
        request = Request("delete", "pods", "", namespace, pod)
        path = api_path(group="", version="v1", plural="pods", namespace=namespace, name=pod)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        try:
            self.http.json(request, "DELETE", path, body=body)
        except KubeApiError as exc:
            if exc.status != 404:
                raise


def _finished(job: Job) -> bool:
    return job.status.finished


def _acted(job: Job) -> bool:
    return bool(job.status.conditions)


@dataclass(frozen=True)
class _FollowedJobs:
    """The backend as following logs sees it (:class:`~.logs.JobSource`)."""

    backend: KubernetesBackend

    @property
    def http(self) -> Http:
        return self.backend.http

    @property
    def poll_interval(self) -> float:
        return self.backend.poll_interval

    def refetch(self, found: Found) -> Found:
        return refetch(self.backend.http, found)

    def replica_pods(self, found: Found) -> ReplicaPods:
        return self.backend._replica_pods(found)

    def acting_deadline(self, found: Found) -> float | None:
        timeout = self.backend.operator_timeout
        if not timeout:
            return None
        return self.backend._submitted.get(found.uid, time.monotonic()) + timeout

    def not_acting(self, found: Found) -> Exception:
        return self.backend._not_acting(found)
