"""The kopf side: which resources are watched, what is cached, what wakes a reconcile.

Everything is registered on a fresh ``kopf.OperatorRegistry`` (no import-time global
state). Only kopf's low-level handlers are used — indexes and ``on.event`` — which never
write to the API: no finalizers (daemons and timers would add one to every job), no
``last-handled-configuration`` annotations (``on.create``/``on.update`` would), no progress
in status. kopf provides the watches (re-established on errors and 410 Gone), the caches,
login and the health endpoint; the reconcile itself runs on the
:class:`~.runtime.Runtime`'s workers.

Indexes (the informer cache):

- ``kubemill_jobs``: (group, plural, namespace, name) -> the job's body (as
  :func:`~.caches.cached_job` keeps it);
- ``kubemill_runs``: (group, namespace, controller name) -> the bodies of the jobs a
  controller kind created, found by its rules' run label (a Spark schedule's applications by
  ``sparkoperator.k8s.io/scheduled-app-name``);
- ``kubemill_pods`` / ``kubemill_services``: (namespace, job name) -> snapshots of the
  children labelled ``kubemill.dev/job-name`` (a server-side label selector keeps other
  pods out of the operator's memory);
- ``kubemill_podgroups`` (with a gang scheduler): (namespace, name) -> PodGroup snapshot;
- ``kubemill_controllers``: (namespace, job name) -> snapshots of the batch/v1 Jobs that
  run replicas with a child controller (``ReplicaPlan.controller``), watched when a
  registered engine's grants let the operator list and watch Jobs (:func:`watches_controllers`);
- ``kubemill_configmaps``, ``kubemill_secrets``, ``kubemill_serviceaccounts``,
  ``kubemill_roles``, ``kubemill_rolebindings``: (namespace, job name) -> snapshots of the
  delivered files and per-job access, each watched only when a registered engine's grants
  let the operator list and watch it (:func:`watched_children`): the RBAC decides the
  watches, so the two cannot disagree.

Objects the jobs of an engine name (training runtimes: an engine's install
extra that makes objects known) are read from the cluster the same way, when the grants let
the operator list and watch them (:func:`watched_known_objects`): an index makes every one
known before the first reconcile, and each change makes it known again (or forgets it) and
reconciles that engine's jobs again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from kubemill.core import ChildKind
from kubemill.engines.base import InstallExtra
from kubemill.frameworks import LABEL_JOB_NAME
from kubemill.kinds import controllers, engines
from kubemill.substrates.kubernetes.build import CHILD_RESOURCES, GangScheduler
from kubemill.substrates.kubernetes.client.kubeconfig import Credentials
from kubemill.substrates.kubernetes.controlled import JOB_API_VERSION, JOBS, ControllerSnapshot
from kubemill.substrates.kubernetes.install import all_rules, permits
from kubemill.substrates.kubernetes.observe import ChildSnapshot, PodSnapshot
from kubemill.substrates.kubernetes.operator.caches import Caches, cached_job
from kubemill.substrates.kubernetes.operator.kubeapi import load_client_configuration
from kubemill.substrates.kubernetes.operator.runtime import Runtime
from kubemill.substrates.kubernetes.operator.schedules import RunKey, run_key, run_labels
from kubemill.substrates.kubernetes.operator.settings import JobResource

JOBS_INDEX = "kubemill_jobs"
PODS_INDEX = "kubemill_pods"
SERVICES_INDEX = "kubemill_services"
PODGROUPS_INDEX = "kubemill_podgroups"
RUNS_INDEX = "kubemill_runs"
CONTROLLERS_INDEX = "kubemill_controllers"

WORKER_IDLE_SECONDS = 0.2
"""How long kopf keeps an object's worker after its last event (kopf's default: 5 s).

A worker waits for the object's next event holding the last one, the whole parsed body; in
a burst of new jobs (each with its pods and services) that was every object's body at once,
the operator's peak memory, which it keeps as resident memory afterwards (freed small objects
rarely give whole arenas back): ``bench/operator_throughput.py`` 500 x 4, 124 -> 92 MiB. The
handlers only update an index and queue a key, so a worker has nothing to wait for; an
event after the worker ended starts a new one (a task, no API call)."""


def _child_key(body: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = body.get("metadata", {})
    job = (meta.get("labels") or {}).get(LABEL_JOB_NAME)
    return (meta.get("namespace", ""), job) if job else None


def watched_children() -> dict[ChildKind, tuple[str, str, str]]:
    """Child kinds the operator's RBAC lets it list and watch: kind -> (group, version, plural).

    Derived from the registered engines' grants (:func:`.install.all_rules`).
    """
    rules = all_rules()
    watched: dict[ChildKind, tuple[str, str, str]] = {}
    for kind, (api_version, plural) in CHILD_RESOURCES.items():
        group, _, version = api_version.rpartition("/")
        if all(permits(rules, group=group, resource=plural, verb=v) for v in ("list", "watch")):
            watched[kind] = (group, version, plural)
    return watched


def watches_controllers() -> bool:
    """Whether the operator's RBAC lets it list and watch batch/v1 Jobs (an engine whose
    Plans run a replica through a child controller grants it)."""
    group = JOB_API_VERSION.partition("/")[0]
    rules = all_rules()
    return all(permits(rules, group=group, resource=JOBS, verb=v) for v in ("list", "watch"))


@dataclass(frozen=True)
class KnownResource:
    """A resource whose objects an engine's jobs name, read from the cluster."""

    extra: InstallExtra
    kind: str
    """The kind of the engine whose jobs name them (reconciled again when one changes)."""
    group: str
    version: str
    plural: str
    namespaced: bool


def watched_known_objects(*, clusterwide: bool) -> list[KnownResource]:
    """The resources of the engines' install extras that make objects known, which the
    operator's RBAC lets it list and watch (cluster-wide ones only when it serves every
    namespace: a Role cannot grant them)."""
    rules = all_rules()
    found: list[KnownResource] = []
    for engine in engines():
        for extra in engine.extras:
            if extra.known is None or extra.forget is None:
                continue
            for crd in extra.crds():
                spec = crd["spec"]
                group, plural = spec["group"], spec["names"]["plural"]
                namespaced = spec.get("scope") != "Cluster"
                stored = [v["name"] for v in spec["versions"] if v.get("storage")]
                allowed = all(
                    permits(rules, group=group, resource=plural, verb=verb)
                    for verb in ("list", "watch")
                )
                if allowed and stored and (namespaced or clusterwide):
                    found.append(
                        KnownResource(extra, engine.kind, group, stored[0], plural, namespaced)
                    )
    return found


def child_index(plural: str) -> str:
    """The kopf index id of one child resource."""
    return f"kubemill_{plural}"


def _selector_key(group: str, version: str, plural: str) -> tuple[str, str]:
    # kopf's resource selectors name the core group by its version ("v1", "pods").
    return (group or version, plural)


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf's "diff base" when no handler reads diffs: an empty essence, stored nowhere.

    kopf computes, on every event of every watched object, the object's essence (a deep
    copy of its body less metadata and status) and its diff against the last handled one,
    for ``on.create``/``on.update`` handlers and daemons. The operator has none of them
    (indexes and ``on.event`` only), so the default storage's deep copies (a sixth of the
    operator's CPU under cProfile) bought nothing. Like the default without such handlers,
    it writes nothing to the object.
    """

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


class NoProgress(kopf.ProgressStorage):
    """kopf's handler progress when no handler has any: nothing read, nothing stored.

    kopf keeps the progress of ``on.create``/``on.update`` handlers and daemons (retries,
    started times) in the object's annotations and status, and on every event of every
    watched object clears it out of the essences it compares; the default storage does so
    by walking both of its places in a copy of the essence. The operator's indexes and
    ``on.event`` handlers have no progress to keep (kopf writes none for them), so there is
    nothing to clear: the essence is returned as it is.
    """

    def fetch(self, *, key: Any, body: Any) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        return None

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        return None

    def touch(self, *, body: Any, patch: Any, value: Any) -> None:
        return None

    def clear(self, *, essence: Any) -> Any:
        return essence


def configure(settings: Any, runtime: Runtime) -> None:
    """kopf settings: label selectors on the server, no dynamic scanning, no event posting."""
    selector = LABEL_JOB_NAME  # "has the label"
    settings.watching.label_selectors["v1", "pods"] = selector
    settings.watching.label_selectors["v1", "services"] = selector
    for group, version, plural in watched_children().values():
        settings.watching.label_selectors[_selector_key(group, version, plural)] = selector
    if watches_controllers():
        settings.watching.label_selectors[JOB_API_VERSION.partition("/")[0], JOBS] = selector
    gang = runtime.settings.gang_scheduler_name
    if gang:
        scheduler = GangScheduler.named(gang)
        settings.watching.label_selectors[scheduler.api_group, scheduler.plural] = selector
    # The served resources and namespaces are fixed at start: no list/watch of CRDs and
    # namespaces, so a namespaced install needs nothing cluster-wide.
    settings.scanning.disabled = True
    # kubemill posts its own Events (see .events); kopf's would be about kopf.
    settings.posting.enabled = False
    settings.peering.standalone = True
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.persistence.progress_storage = NoProgress()
    settings.queueing.idle_timeout = WORKER_IDLE_SECONDS


def connection_info(credentials: Credentials) -> Any:
    """kopf's credentials from those the operator's writes use (:mod:`..client.kubeconfig`).

    kopf's own ``login_via_client`` cannot take a kubeconfig context, and needs the
    ``kubernetes`` package; from the same credentials, both always talk to the same cluster.
    """
    header = credentials.authorization() if credentials.authorization else None
    scheme, _, token = (header or "").partition(" ")
    tls = credentials.tls
    return kopf.ConnectionInfo(
        server=credentials.server,
        ca_path=tls.ca_file,
        ca_data=tls.ca_data,
        insecure=tls.insecure,
        scheme=scheme or None,
        token=token or None,
        certificate_path=tls.cert_file,
        certificate_data=tls.cert_data,
        private_key_path=tls.key_file,
        private_key_data=tls.key_data,
        proxy_url=credentials.proxy,
    )


def build_registry(runtime: Runtime) -> Any:
    """A kopf registry with every handler of the operator."""
    registry = kopf.OperatorRegistry()

    async def startup(**kwargs: Any) -> None:
        caches = Caches(
            jobs=kwargs[JOBS_INDEX],
            pods=kwargs[PODS_INDEX],
            services=kwargs[SERVICES_INDEX],
            pod_groups=kwargs.get(PODGROUPS_INDEX, {}),
            files_and_access={
                kind: kwargs[child_index(plural)]
                for kind, (_, _, plural) in watched_children().items()
            },
            progress=runtime.progress,
            controllers=kwargs.get(CONTROLLERS_INDEX, {}),
        )
        await runtime.start(caches, runs=kwargs.get(RUNS_INDEX, {}))

    async def cleanup(**_: Any) -> None:
        await runtime.stop()

    def probe(**_: Any) -> dict[str, Any]:
        return runtime.probe()

    def login(**_: Any) -> Any:
        return connection_info(load_client_configuration(context=runtime.settings.context))

    kopf.on.startup(registry=registry)(startup)
    kopf.on.cleanup(registry=registry)(cleanup)
    kopf.on.probe(registry=registry, id="kubemill")(probe)
    kopf.on.login(registry=registry)(login)

    controlled = {c.controls for c in controllers()}
    for resource in runtime.settings.job_resources():
        _register_job(registry, runtime, resource)
        if resource.kind in controlled:
            _register_runs(registry, resource)

    # Every handler is a coroutine: kopf runs a plain function on its thread pool, a hop
    # there and back on every event (most of its per-event cost), and the queue the
    # handlers feed belongs to the event loop.
    async def index_pod(body: Any, **indexes: Any) -> dict[tuple[str, str], PodSnapshot]:
        key = _child_key(body)
        if not key:
            return {}
        snapshot = PodSnapshot.of(body)
        # kopf indexes an event before it calls the event handlers, and hands every handler
        # the indexes as they are: the pod's snapshot before this event, if any.
        cached = indexes.get(PODS_INDEX)
        if cached is not None and key in cached and snapshot in cached[key]:
            runtime.unchanged_child(snapshot.uid)
        return {key: snapshot}

    async def index_child(body: Any, **_: Any) -> dict[tuple[str, str], ChildSnapshot]:
        key = _child_key(body)
        return {key: ChildSnapshot.of(body)} if key else {}

    async def index_controller(body: Any, **_: Any) -> dict[tuple[str, str], ControllerSnapshot]:
        key = _child_key(body)
        return {key: ControllerSnapshot.of(body)} if key else {}

    async def index_pod_group(body: Any, **_: Any) -> dict[tuple[str, str], ChildSnapshot]:
        meta = body.get("metadata", {})
        return {(meta.get("namespace", ""), meta.get("name", "")): ChildSnapshot.of(body)}

    async def child_event(body: Any, type: str | None = None, **_: Any) -> None:
        runtime.child_changed(body, deleted=type == "DELETED")

    labels = {LABEL_JOB_NAME: kopf.PRESENT}
    kopf.index("v1", "pods", registry=registry, id=PODS_INDEX, labels=labels)(index_pod)
    kopf.on.event("v1", "pods", registry=registry, id="pod-events", labels=labels)(child_event)
    kopf.index("v1", "services", registry=registry, id=SERVICES_INDEX, labels=labels)(index_child)
    kopf.on.event("v1", "services", registry=registry, id="service-events", labels=labels)(
        child_event
    )
    for group, version, plural in watched_children().values():
        where = (group, version, plural) if group else (version, plural)
        kopf.index(*where, registry=registry, id=child_index(plural), labels=labels)(index_child)
        kopf.on.event(*where, registry=registry, id=f"{plural}-events", labels=labels)(child_event)
    if watches_controllers():
        group, _, version = JOB_API_VERSION.partition("/")
        kopf.index(group, version, JOBS, registry=registry, id=CONTROLLERS_INDEX, labels=labels)(
            index_controller
        )
        kopf.on.event(group, version, JOBS, registry=registry, id="jobs-events", labels=labels)(
            child_event
        )
    for known in watched_known_objects(clusterwide=runtime.settings.clusterwide):
        _register_known(registry, runtime, known)
    gang = runtime.settings.gang_scheduler_name
    if gang:
        scheduler = GangScheduler.named(gang)
        group, version = scheduler.api_version.split("/")
        kopf.index(group, version, scheduler.plural, registry=registry, id=PODGROUPS_INDEX)(
            index_pod_group
        )
        kopf.on.event(
            group,
            version,
            scheduler.plural,
            registry=registry,
            id="podgroup-events",
            labels=labels,
        )(child_event)
    return registry


def _register_known(registry: Any, runtime: Runtime, known: KnownResource) -> None:
    """Make the cluster's objects of ``known`` known: kopf fills an index before the first
    reconcile (its handler makes each object known as a side effect), and each event
    makes the object known again, or forgets it."""

    async def index_known(body: Any, **_: Any) -> dict[str, None]:
        runtime.known_object(known.extra, body)
        return {}

    async def known_event(event: Any, **_: Any) -> None:
        runtime.known_object_changed(known.extra, known.kind, event)

    where = (known.group, known.version, known.plural)
    kopf.index(*where, registry=registry, id=f"kubemill_known_{known.plural}")(index_known)
    kopf.on.event(*where, registry=registry, id=f"{known.plural}-known-events")(known_event)


def _register_runs(registry: Any, resource: JobResource) -> None:
    """Index the jobs of ``resource`` that a controller created, by their controller."""
    labels = run_labels(resource.kind)

    async def index_run(body: Any, **_: Any) -> dict[RunKey, dict[str, Any]]:
        key = run_key(body, resource.group, labels)
        return {key: cached_job(body)} if key else {}

    # The API server filters by one label; runs of several controller kinds (labels) are
    # told apart by run_key.
    kopf.index(
        resource.group,
        resource.version,
        resource.plural,
        registry=registry,
        id=RUNS_INDEX,
        labels={labels[0]: kopf.PRESENT} if len(labels) == 1 else None,
    )(index_run)


def _register_job(registry: Any, runtime: Runtime, resource: JobResource) -> None:
    async def index_job(body: Any, **_: Any) -> dict[tuple[str, str, str, str], dict[str, Any]]:
        meta = body.get("metadata", {})
        key = (resource.group, resource.plural, meta.get("namespace", ""), meta.get("name", ""))
        return {key: cached_job(body)}

    async def job_event(event: Any, **_: Any) -> None:
        runtime.job_changed(resource, event)

    kopf.index(resource.group, resource.version, resource.plural, registry=registry, id=JOBS_INDEX)(
        index_job
    )
    kopf.on.event(
        resource.group,
        resource.version,
        resource.plural,
        registry=registry,
        id=f"{resource.plural}.{resource.group}-events",
    )(job_event)
