"""The operator's pure parts, without a cluster: tables of inputs and expected outputs."""

from __future__ import annotations

import asyncio
import inspect
import json
from datetime import UTC, datetime
from typing import Any

import kopf
import pytest

from kubemill.core import CreatePod, DeleteJob, DeletePod, RecordEvent
from kubemill.kinds import load_document, load_one
from kubemill.substrates.kubernetes.observe import ChildSnapshot, PodSnapshot, observe
from kubemill.substrates.kubernetes.operator import OperatorSettings, SettingsError
from kubemill.substrates.kubernetes.operator.caches import cached_job
from kubemill.substrates.kubernetes.operator.events import build_event
from kubemill.substrates.kubernetes.operator.handlers import (
    JOBS_INDEX,
    PODS_INDEX,
    WORKER_IDLE_SECONDS,
    build_registry,
    configure,
    connection_info,
)
from kubemill.substrates.kubernetes.operator.kubeapi import (
    ApiError,
    ObjectRef,
    Outcome,
    classify,
    load_client_configuration,
)
from kubemill.substrates.kubernetes.operator.leader import timings
from kubemill.substrates.kubernetes.operator.metrics import Metrics
from kubemill.substrates.kubernetes.operator.reconciler import (
    RESTARTS_ANNOTATION,
    Caches,
    Reconciler,
    RetryLater,
    coalesce_events,
    merge_patch,
    pair_events,
)
from kubemill.substrates.kubernetes.operator.runtime import Runtime
from kubemill.substrates.kubernetes.operator.workqueue import WorkQueue
from kubemill.substrates.kubernetes.render import plan_on_kubernetes
from support.operator_jobs import pytorchjob, tfjob

# --- status patches ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        pytest.param({"a": 1}, {"a": 1}, {}, id="equal"),
        pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="changed-scalar"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, {"b": None}, id="removed-key"),
        pytest.param({}, {"c": {"x": 1}}, {"c": {"x": 1}}, id="added-dict"),
        pytest.param(
            {"r": {"W": {"active": 1, "failed": 0}}},
            {"r": {"W": {"active": 2, "failed": 0}}},
            {"r": {"W": {"active": 2}}},
            id="nested-only-the-difference",
        ),
        pytest.param(
            {"conditions": [{"type": "Created"}]},
            {"conditions": [{"type": "Created"}, {"type": "Running"}]},
            {"conditions": [{"type": "Created"}, {"type": "Running"}]},
            id="lists-replaced-whole",
        ),
    ],
)
def test_merge_patch_sends_only_what_changed(
    old: dict[str, Any], new: dict[str, Any], patch: dict[str, Any]
) -> None:
    assert merge_patch(old, new) == patch


# --- events --------------------------------------------------------------------------------


def test_actions_keep_their_own_event_and_other_events_go_with_the_status() -> None:
    actions = [
        RecordEvent("Normal", "TFJobCreated", "created"),
        CreatePod("a"),
        RecordEvent("Normal", "SuccessfulCreatePod", "Created pod: a"),
        DeletePod("b"),
        RecordEvent("Normal", "SuccessfulDeletePod", "Deleted pod: b"),
        RecordEvent("Warning", "TFJobRestarting", "restarting"),
        DeleteJob(),
        RecordEvent("Normal", "TTLExpired", "deleting"),
    ]
    steps, status_events = pair_events(actions)
    assert steps == [
        (CreatePod("a"), [RecordEvent("Normal", "SuccessfulCreatePod", "Created pod: a")]),
        (DeletePod("b"), [RecordEvent("Normal", "SuccessfulDeletePod", "Deleted pod: b")]),
        (DeleteJob(), [RecordEvent("Normal", "TTLExpired", "deleting")]),
    ]
    assert status_events == [
        RecordEvent("Normal", "TFJobCreated", "created"),
        RecordEvent("Warning", "TFJobRestarting", "restarting"),
    ]


def test_one_event_per_type_and_reason_with_the_messages_in_order() -> None:
    events = [
        RecordEvent("Normal", "SuccessfulCreatePod", "Created pod: a"),
        RecordEvent("Normal", "SuccessfulCreateService", "Created service: a"),
        RecordEvent("Normal", "SuccessfulCreatePod", "Created pod: b"),
        RecordEvent("Warning", "SuccessfulCreatePod", "odd but distinct"),
    ]
    assert coalesce_events(events) == [
        ("Normal", "SuccessfulCreatePod", "Created pod: a; Created pod: b"),
        ("Normal", "SuccessfulCreateService", "Created service: a"),
        ("Warning", "SuccessfulCreatePod", "odd but distinct"),
    ]


def test_an_event_names_the_job_it_is_about() -> None:
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-1"},
    }
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    event = build_event(job, type="Warning", reason="R", message="m", instance="op-1", now=now)
    assert event["metadata"]["namespace"] == "ns"
    assert event["metadata"]["name"].startswith("j.")
    assert event["involvedObject"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "name": "j",
        "namespace": "ns",
        "uid": "u-1",
    }
    assert (event["type"], event["reason"], event["message"], event["count"]) == (
        "Warning",
        "R",
        "m",
        1,
    )
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-02T03:04:05Z"
    assert event["reportingInstance"] == "op-1"
    again = build_event(job, type="Warning", reason="R", message="m", instance="op-1", now=now)
    assert again["metadata"]["name"] != event["metadata"]["name"]


# --- API errors ----------------------------------------------------------------------------

REF = ObjectRef("v1", "pods", "ns", "p")


@pytest.mark.parametrize(
    ("verb", "status", "reason", "outcome"),
    [
        pytest.param("create", 409, "AlreadyExists", Outcome.ALREADY_DONE, id="create-exists"),
        pytest.param("create", 409, "Conflict", Outcome.RETRY, id="create-conflict"),
        pytest.param("delete", 404, "NotFound", Outcome.ALREADY_DONE, id="delete-gone"),
        pytest.param("delete", 409, "Conflict", Outcome.ALREADY_DONE, id="delete-precondition"),
        pytest.param("patch", 409, "Conflict", Outcome.RETRY, id="patch-conflict"),
        pytest.param("patch", 404, "NotFound", Outcome.BLOCKED, id="patch-missing"),
        pytest.param("create", 500, "InternalError", Outcome.RETRY, id="server-error"),
        pytest.param("create", 429, "TooManyRequests", Outcome.RETRY, id="throttled"),
        pytest.param("create", 0, "ConnectionRefusedError", Outcome.RETRY, id="no-answer"),
        pytest.param("create", 403, "Forbidden", Outcome.BLOCKED, id="forbidden"),
        pytest.param("create", 422, "Invalid", Outcome.BLOCKED, id="invalid"),
    ],
)
def test_api_errors_are_classified(verb: str, status: int, reason: str, outcome: Outcome) -> None:
    error = ApiError(verb=verb, ref=REF, status=status, reason=reason, message="m")
    assert classify(error) is outcome


# --- observation ---------------------------------------------------------------------------


def pod_body(
    name: str,
    *,
    owner: str = "uid-1",
    phase: str = "Running",
    state: dict[str, Any] | None = None,
    last: dict[str, Any] | None = None,
    restarts: int = 0,
    reason: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    kind, index = name.rsplit("-", 2)[1:]
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": [
            {"name": "sidecar", "restartCount": 9, "state": {"terminated": {"exitCode": 2}}},
            {
                "name": "tensorflow",
                "restartCount": restarts,
                "state": state or {"running": {}},
                "lastState": last or {},
            },
        ],
        "conditions": [{"type": "Ready", "status": "True" if phase == "Running" else "False"}],
    }
    if reason:
        status["reason"] = reason
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"pod-{name}",
        "labels": {
            "kubemill.dev/job-name": "j",
            "kubemill.dev/replica-type": kind,
            "kubemill.dev/replica-index": index,
        },
        "ownerReferences": [{"uid": owner, "controller": True}],
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {"metadata": meta, "status": status}


JOB = load_one(
    {**tfjob("j", workers=2), "metadata": {"name": "j", "namespace": "ns", "uid": "uid-1"}}
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            pod_body("j-worker-0"),
            {"phase": "Running", "exit_code": None, "restart_count": 0, "ready": True},
            id="running",
        ),
        pytest.param(
            pod_body("j-worker-0", restarts=2, last={"terminated": {"exitCode": 3}}),
            {"phase": "Running", "exit_code": None, "restart_count": 2},
            id="restarted-in-place-still-running",
        ),
        pytest.param(
            pod_body(
                "j-worker-0",
                phase="Failed",
                state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            ),
            {"phase": "Failed", "exit_code": 137, "reason": "OOMKilled", "ready": False},
            id="killed-main-container-not-the-sidecar",
        ),
        pytest.param(
            pod_body("j-worker-1", phase="Failed", reason="Evicted"),
            {"phase": "Failed", "exit_code": None, "reason": "Evicted", "index": 1},
            id="evicted",
        ),
        pytest.param(
            pod_body("j-worker-0", deleting=True),
            {"deleting": True},
            id="being-deleted",
        ),
        pytest.param(
            pod_body("j-worker-7", phase="Succeeded"),
            {"replica_type": "Worker", "index": 7},
            id="stray-typed-by-its-labels",
        ),
    ],
)
def test_pods_are_observed_as_the_core_expects(
    body: dict[str, Any], expected: dict[str, Any]
) -> None:
    plan = plan_on_kubernetes(JOB)
    observed = observe(JOB, plan, pods=[PodSnapshot.of(body)], services=[], pod_group=None)
    (pod,) = observed.pods
    assert {key: getattr(pod, key) for key in expected} == expected
    assert pod.created == datetime(2026, 1, 1, tzinfo=UTC)


def test_only_children_the_job_controls_are_observed() -> None:
    plan = plan_on_kubernetes(JOB)
    mine, foreign = pod_body("j-worker-0"), pod_body("j-worker-1", owner="someone-else")
    services = [
        ChildSnapshot("j-worker-0", "s1", "uid-1"),
        ChildSnapshot("j-worker-1", "s2", "someone-else"),
    ]
    observed = observe(
        JOB,
        plan,
        pods=[PodSnapshot.of(mine), PodSnapshot.of(foreign)],
        services=services,
        pod_group=ChildSnapshot("j", "g", "someone-else", phase="Running"),
        deleting={"j-worker-0": "pod-j-worker-0"},
    )
    assert [(p.name, p.deleting) for p in observed.pods] == [("j-worker-0", True)]
    assert observed.services == frozenset({"j-worker-0"})
    assert observed.pod_group is None


def test_services_report_their_allocated_cluster_ips_only() -> None:
    def service(name: str, owner: str, cluster_ip: str | None) -> ChildSnapshot:
        spec: dict[str, Any] = {"ports": [{"port": 80}]}
        if cluster_ip is not None:
            spec["clusterIP"] = cluster_ip
        meta = {
            "name": name,
            "uid": f"s-{name}",
            "ownerReferences": [{"uid": owner, "controller": True}],
        }
        return ChildSnapshot.of({"metadata": meta, "spec": spec})

    services = [
        service("j-ui", "uid-1", "10.96.0.7"),
        service("j-headless", "uid-1", "None"),
        service("j-new", "uid-1", None),  # not allocated (yet)
        service("other-ui", "someone-else", "10.96.0.8"),
    ]
    observed = observe(JOB, plan_on_kubernetes(JOB), pods=[], services=services, pod_group=None)
    assert observed.cluster_ips == (("j-ui", "10.96.0.7"),)
    assert observed.services == frozenset({"j-ui", "j-headless", "j-new"})


# --- the work queue ------------------------------------------------------------------------


def test_a_key_is_queued_once_and_requeued_when_added_while_processing() -> None:
    async def scenario() -> list[str]:
        queue: WorkQueue[str] = WorkQueue()
        seen = []
        for key in ("a", "b", "a", "a"):
            queue.add(key)
        assert len(queue) == 2
        key = await queue.get()
        seen.append(key)
        queue.add("a")  # an event while "a" is being reconciled
        assert len(queue) == 1  # only "b" waits: "a" is not handed out twice
        queue.done(key)
        seen += [await queue.get(), await queue.get()]
        return seen

    assert asyncio.run(scenario()) == ["a", "b", "a"]


def test_delayed_adds_keep_the_earliest_and_backoff_doubles_up_to_the_cap() -> None:
    async def scenario() -> tuple[list[float], str]:
        queue: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=0.04)
        delays = [queue.retry("k") for _ in range(4)]
        queue.forget("k")
        delays.append(queue.retry("k"))
        queue.discard("k")
        queue.add_after("x", 60)
        queue.add_after("x", 0.01)  # sooner wins
        queue.add_after("x", 30)  # later is ignored
        return delays, await asyncio.wait_for(queue.get(), timeout=5)

    delays, key = asyncio.run(scenario())
    assert delays == [0.01, 0.02, 0.04, 0.04, 0.01]
    assert key == "x"


# --- settings and login ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"namespaces": ["a"], "all_namespaces": True}, "one or the other", id="both"),
        pytest.param({"gang_scheduler_name": "kube-batch"}, "unknown scheduler", id="gang"),
        pytest.param({"metrics_port": 70000}, "not a port", id="port"),
        pytest.param({"metrics_port": 9000, "health_port": 9000}, "must differ", id="same-port"),
        pytest.param({"workers": 0}, "at least 1", id="workers"),
        pytest.param({"lease_duration_seconds": 2}, "at least 3", id="lease"),
    ],
)
def test_contradicting_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        OperatorSettings(**kwargs)


def test_settings_name_the_served_resources() -> None:
    assert OperatorSettings().clusterwide
    assert not OperatorSettings(namespaces=["a"]).clusterwide
    served = [str(r) for r in OperatorSettings(serve_upstream_groups=True).job_resources()]
    assert served == [
        "tfjobs.v1.kubemill.dev",
        "pytorchjobs.v1.kubemill.dev",
        "mpijobs.v1.kubemill.dev",
        "sparkapplications.v1.kubemill.dev",
        "marsclusters.v1.kubemill.dev",
        "jaxjobs.v1.kubemill.dev",
        "xgboostjobs.v1.kubemill.dev",
        "paddlejobs.v1.kubemill.dev",
        "trainjobs.v1.kubemill.dev",
        "rayclusters.v1.kubemill.dev",
        "rayjobs.v1.kubemill.dev",
        "scheduledsparkapplications.v1.kubemill.dev",
        "tfjobs.v1.kubeflow.org",
        "pytorchjobs.v1.kubeflow.org",
        "jaxjobs.v1.kubeflow.org",
        "xgboostjobs.v1.kubeflow.org",
        "paddlejobs.v1.kubeflow.org",
        "mpijobs.v2beta1.kubeflow.org",
        "sparkapplications.v1beta2.sparkoperator.k8s.io",
        "scheduledsparkapplications.v1beta2.sparkoperator.k8s.io",
        "trainjobs.v1alpha1.trainer.kubeflow.org",
        "rayclusters.v1.ray.io",
        "rayjobs.v1.ray.io",
    ]


@pytest.mark.parametrize(
    ("duration", "expected"),
    [
        pytest.param(15, (15, 10, 2), id="client-go-defaults"),
        pytest.param(3, (3, 2, 1), id="shortest"),
        pytest.param(1, (3, 2, 1), id="raised-to-shortest"),
    ],
)
def test_lease_timings_keep_the_election_library_constraints(
    duration: int, expected: tuple[int, int, int]
) -> None:
    lease, renew, retry = timings(duration)
    assert (lease, renew, retry) == expected
    assert lease > renew > 1.2 * retry >= 1.2


@pytest.mark.parametrize("proxy", ["http://proxy.example:3128", None])
def test_kopf_logs_in_with_the_same_credentials_as_the_writes(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, proxy: str | None
) -> None:
    """The kubeconfig's server, token and the environment's proxy (resolved once, at start),
    for kopf's watches as for the operator's own requests."""
    from support.kmock_cluster import write_kubeconfig

    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    if proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kc", "https://10.0.0.1")))
    credentials = load_client_configuration(context=None)
    assert (credentials.server, credentials.proxy) == ("https://10.0.0.1", proxy)
    assert credentials.authorization is not None
    assert credentials.authorization() == "Bearer test-token"
    info = connection_info(credentials)
    assert (info.server, info.scheme, info.token) == ("https://10.0.0.1", "Bearer", "test-token")
    assert info.proxy_url == proxy and not info.insecure and info.ca_path is None


def test_kopf_runs_every_event_handler_on_the_loop_and_keeps_no_diff_base_nor_progress() -> None:
    """Per event, kopf calls the indexes and ``on.event`` handlers: a plain function would
    run on its thread pool (a hop per event, and the work queue touched off its loop), and
    the default diff base deep-copies every body for handlers the operator does not have."""
    runtime = Runtime(OperatorSettings(serve_upstream_groups=True, gang_scheduler_name="volcano"))
    registry = build_registry(runtime)
    per_event = [*registry._indexing.get_all_handlers(), *registry._watching.get_all_handlers()]
    assert len(per_event) > 4
    assert [h.id for h in per_event if not inspect.iscoroutinefunction(h.fn)] == []

    settings = kopf.OperatorSettings()
    configure(settings, runtime)
    storage = settings.persistence.diffbase_storage
    body = kopf.Body(tfjob("j"))
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert (storage.build(body=body), storage.fetch(body=body), dict(patch)) == ({}, None, {})

    # Nor any handler progress: none read, none written, nothing cleared out of a copy.
    progress = settings.persistence.progress_storage
    progress.store(key="h", record={"retries": 1}, body=body, patch=patch)
    progress.touch(body=body, patch=patch, value="x")
    essence = {"spec": {"a": 1}}
    assert (progress.fetch(key="h", body=body), dict(patch)) == (None, {})
    assert progress.clear(essence=essence) is essence


def test_kopf_lets_an_objects_worker_go_soon_after_its_last_event() -> None:
    """kopf's per-object worker holds the object's last body while it idles: with its
    default 5 s, a burst of new pods kept every body at once (the operator's peak memory)."""
    settings = kopf.OperatorSettings()
    assert settings.queueing.idle_timeout > WORKER_IDLE_SECONDS  # kopf's own default
    configure(settings, Runtime(OperatorSettings()))
    assert settings.queueing.idle_timeout == WORKER_IDLE_SECONDS


def test_the_workqueue_depth_metric_is_the_queue_s_length_when_read() -> None:
    """The gauge is read from the queue at each scrape: keys queued and taken show."""
    runtime = Runtime(OperatorSettings())

    def depth() -> float | None:
        return runtime.metrics.registry.get_sample_value("kubemill_workqueue_depth")

    assert depth() == 0
    runtime.queue.add(("kubemill.dev", "tfjobs", "ns", "a"))
    runtime.queue.add(("kubemill.dev", "tfjobs", "ns", "b"))
    runtime.queue.add(("kubemill.dev", "tfjobs", "ns", "a"))  # queued once
    assert depth() == 2


def test_a_pod_event_that_changes_nothing_the_reconcile_reads_wakes_no_pass() -> None:
    """kopf indexes an event before calling the event handlers: a pod whose snapshot the
    event left as cached (the scheduler's PodScheduled condition, a label's managed field)
    queues its job for nothing; one that changed it, or a deletion, queues it."""
    runtime = Runtime(OperatorSettings())
    handlers = [*runtime_handlers(runtime)]
    (index_pod,) = [h.fn for h in handlers if h.id == PODS_INDEX]
    (pod_event,) = [h.fn for h in handlers if h.id == "pod-events"]
    pending = pod_body("j-worker-0", phase="Pending")
    pending["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubemill.dev/v1",
            "kind": "TFJob",
            "name": "j",
            "uid": "u",
            "controller": True,
        }
    ]
    scheduled = json.loads(json.dumps(pending))
    scheduled["spec"] = {"nodeName": "node-1"}
    scheduled["status"]["conditions"].append({"type": "PodScheduled", "status": "True"})
    running = json.loads(json.dumps(scheduled))
    running["status"]["phase"] = "Running"
    key = ("ns", "j")

    def event(body: dict[str, Any], type: str) -> bool:
        """Index and handle one event as kopf does; whether it queued the job."""
        body["metadata"]["namespace"] = "ns"
        cached = {key: [PodSnapshot.of(pending)]}
        if type != "DELETED":
            asyncio.run(index_pod(body=kopf.Body(body), **{PODS_INDEX: cached}))
        asyncio.run(pod_event(body=kopf.Body(body), type=type))
        queued = len(runtime.queue) == 1
        if queued:
            asyncio.run(_take(runtime.queue))
        return queued

    assert not event(scheduled, "MODIFIED")
    assert event(running, "MODIFIED")
    assert event(scheduled, "DELETED")
    another = json.loads(json.dumps(scheduled))
    another["metadata"]["uid"] = "a-new-pod-of-the-same-name"
    assert event(another, "ADDED")


async def _take(queue: WorkQueue[Any]) -> None:
    queue.done(await queue.get())


def runtime_handlers(runtime: Runtime) -> list[Any]:
    registry = build_registry(runtime)
    return [*registry._indexing.get_all_handlers(), *registry._watching.get_all_handlers()]


def test_the_job_cache_keeps_no_managed_fields() -> None:
    registry = build_registry(Runtime(OperatorSettings()))
    (index_job, *_) = [h.fn for h in registry._indexing.get_all_handlers() if h.id == JOBS_INDEX]
    body = tfjob("j")
    body["metadata"] |= {
        "namespace": "ns",
        "uid": "u",
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
    }
    (cached,) = asyncio.run(index_job(body=kopf.Body(body))).values()
    assert cached == {**body, "metadata": {"name": "j", "namespace": "ns", "uid": "u"}}
    assert "managedFields" in body["metadata"]  # the watch's own body is left alone


# --- status writes: resourceVersion, conflicts, restart counts --------------------------------


class FakeApi:
    """The reconciler's API calls, recorded; status writes answer with ``status_answers``."""

    def __init__(self, *status_answers: int) -> None:
        self.status_answers = list(status_answers)
        self.calls: list[tuple[str, str, Any, Any]] = []

    async def create(self, ref: ObjectRef, body: Any, **_: Any) -> dict[str, Any]:
        self.calls.append(("create", ref.name, body, None))
        return {}

    async def delete(self, ref: ObjectRef, *, uid: str | None = None, **_: Any) -> None:
        self.calls.append(("delete", ref.name, uid, None))

    async def patch_status(
        self, ref: ObjectRef, patch: Any, *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self.calls.append(("status", ref.name, patch, resource_version))
        code = self.status_answers.pop(0) if self.status_answers else 200
        if code != 200:
            raise ApiError(verb="patch", ref=ref, status=code, reason="Conflict", message="")
        return {"metadata": {"resourceVersion": "99"}, "status": patch}

    async def patch_annotations(
        self, ref: ObjectRef, annotations: Any, *, resource_version: str | None
    ) -> dict[str, Any]:
        self.calls.append(("annotate", ref.name, annotations, resource_version))
        return {"metadata": {"resourceVersion": "98", "annotations": annotations}}


def _reconciler(api: FakeApi, jobs: dict[Any, Any], pods: dict[Any, Any]) -> Any:
    settings = OperatorSettings(serve_upstream_groups=True)
    resources = {(r.group, r.plural): r for r in settings.job_resources()}
    services = {
        ("ns", "j"): [ChildSnapshot(name=n, uid=f"s-{n}", owner_uid="uid-1") for n in NAMES]
    }
    caches = Caches(jobs=jobs, pods=pods, services=services, pod_groups={})
    return Reconciler(
        api=api,  # type: ignore[arg-type]
        caches=caches,
        resources=resources,
        post_event=lambda *_: None,
        metrics=Metrics(),
        gang_scheduler=None,
    )


NAMES = ("j-master-0", "j-worker-0")


def _job(group: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body = pytorchjob("j", api_version=f"{group}/v1", run_policy={"backoffLimit": 3})
    body["metadata"] = {"name": "j", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7"}
    if annotations:
        body["metadata"]["annotations"] = annotations
    return body


def _pods(*, worker_failed: bool) -> dict[Any, Any]:
    bodies = [pod_body("j-master-0", owner="uid-1")]
    if worker_failed:
        bodies.append(pod_body("j-worker-0", owner="uid-1", phase="Failed", reason="Evicted"))
    return {("ns", "j"): [PodSnapshot.of(b) for b in bodies]}


@pytest.mark.parametrize("group", ["kubemill.dev", "kubeflow.org"])
def test_a_conflicting_status_write_ends_the_pass_and_the_next_write_keeps_its_counts(
    group: str,
) -> None:
    plural = "pytorchjobs"
    key = (group, plural, "ns", "j")
    api = FakeApi(409)
    jobs = {key: [_job(group)]}
    pods = _pods(worker_failed=True)
    reconciler = _reconciler(api, jobs, pods)
    with pytest.raises(RetryLater) as caught:
        asyncio.run(reconciler.reconcile(key))
    assert caught.value.errors[0].status == 409 and not caught.value.blocked
    assert ("delete", "j-worker-0", "pod-j-worker-0", None) in api.calls
    first = [c for c in api.calls if c[0] in ("status", "annotate")]
    # Decided on version 7, written at it (Kubeflow: the annotation, then the status at the
    # version that write made).
    assert [rv for *_, rv in first] == (["7"] if group == "kubemill.dev" else ["7", "98"])

    # Judged again: the deleted worker is gone; its recreation is still counted.
    api.calls.clear()
    pods.update(_pods(worker_failed=False))  # the cache as the watch leaves it
    asyncio.run(reconciler.reconcile(key))
    assert ("create", "j-worker-0") in [c[:2] for c in api.calls]
    counts = {"Worker": {"restarts": 1, "retiredRestarts": 1}}
    if group == "kubemill.dev":
        (patch,) = [c[2] for c in api.calls if c[0] == "status"]
        worker = patch["replicaStatuses"]["Worker"]
        assert {k: worker[k] for k in ("restarts", "retiredRestarts")} == counts["Worker"]
    else:
        (annotations,) = [c[2] for c in api.calls if c[0] == "annotate"]
        assert json.loads(annotations[RESTARTS_ANNOTATION]) == counts
        for patch in [c[2] for c in api.calls if c[0] == "status"]:
            assert "restarts" not in json.dumps(patch)  # Kubeflow's status has no place


def test_restart_counts_are_read_back_from_the_annotation_of_a_kubeflow_job() -> None:
    key = ("kubeflow.org", "pytorchjobs", "ns", "j")
    recorded = {"Worker": {"restarts": 3, "retiredRestarts": 3}}
    job = _job("kubeflow.org", {RESTARTS_ANNOTATION: json.dumps(recorded)})
    api = FakeApi()
    reconciler = _reconciler(api, {key: [job]}, _pods(worker_failed=True))
    asyncio.run(reconciler.reconcile(key))
    # 3 restarts of backoffLimit 3 already: the worker's failure fails the job.
    (patch,) = [c[2] for c in api.calls if c[0] == "status"]
    assert [c["reason"] for c in patch["conditions"] if c["type"] == "Failed"] == [
        "BackoffLimitExceeded"
    ]
    assert not [c for c in api.calls if c[0] == "annotate"]  # nothing new to record


def test_a_job_is_validated_and_planned_once_per_resource_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its children's events wake a job many times at one version: the passes reuse the
    job and plan of the first; a new version (or counts read back into it) loads again."""
    import kubemill.substrates.kubernetes.operator.loaded as loaded_module

    loads: list[str] = []

    def counted(raw: Any) -> Any:
        loads.append(raw["metadata"]["resourceVersion"])
        return load_document(raw)

    monkeypatch.setattr(loaded_module, "load_document", counted)
    key = ("kubemill.dev", "pytorchjobs", "ns", "j")
    job = _job("kubemill.dev")
    jobs = {key: [job]}
    api = FakeApi()
    pods = {("ns", "j"): [PodSnapshot.of(pod_body(name, owner="uid-1")) for name in NAMES]}
    reconciler = _reconciler(api, jobs, pods)

    def at(version: str) -> None:
        jobs[key] = [{**job, "metadata": {**job["metadata"], "resourceVersion": version}}]
        asyncio.run(reconciler.reconcile(key))

    at("7")
    (written,) = [c[2] for c in api.calls if c[0] == "status"]
    job["status"] = written  # as the watch brings it back
    for version in ("8", "8", "8", "9"):
        at(version)
    assert loads == ["7", "8", "9"]
    # The reused job is the one a load would give: its status is the one written, so no
    # pass writes it again.
    assert [c[0] for c in api.calls] == ["status"]

    # Only the most recently reconciled jobs are kept (a model and plan each).
    monkeypatch.setattr(loaded_module, "LOADED_JOBS", 1)
    other = ("kubeflow.org", "pytorchjobs", "ns", "j")
    jobs[other] = [_job("kubeflow.org")]
    loads.clear()
    for which in (key, other, key):
        asyncio.run(reconciler.reconcile(which))
    assert loads == ["7", "9"]  # the other job, then this one again


def test_the_version_the_operators_own_status_write_made_is_loaded_but_not_planned_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The status write is made at the version the pass read, so the version it makes
    differs by the status alone: the next pass loads that version (with the status
    written) and keeps the plan. A version someone else made is planned again."""
    import kubemill.substrates.kubernetes.operator.loaded as loaded_module

    loads: list[str] = []
    plans: list[str] = []

    def loaded(raw: Any) -> Any:
        loads.append(raw["metadata"]["resourceVersion"])
        return load_document(raw)

    def planned(job: Any) -> Any:
        plans.append(job.metadata.resource_version)
        return plan_on_kubernetes(job)

    monkeypatch.setattr(loaded_module, "load_document", loaded)
    monkeypatch.setattr(loaded_module, "plan_on_kubernetes", planned)
    key = ("kubemill.dev", "pytorchjobs", "ns", "j")
    job = _job("kubemill.dev")
    jobs = {key: [job]}
    api = FakeApi()
    pods = {("ns", "j"): [PodSnapshot.of(pod_body(name, owner="uid-1")) for name in NAMES]}
    reconciler = _reconciler(api, jobs, pods)
    asyncio.run(reconciler.reconcile(key))
    (written,) = [c[2] for c in api.calls if c[0] == "status"]  # answered at version 99

    def at(version: str) -> None:
        meta = {**job["metadata"], "resourceVersion": version}
        jobs[key] = [{**job, "metadata": meta, "status": written}]
        asyncio.run(reconciler.reconcile(key))

    at("99")
    assert (loads, plans) == (["7", "99"], ["7"])
    assert [c[0] for c in api.calls] == ["status"]  # loaded with the status written
    at("100")
    assert (loads, plans) == (["7", "99", "100"], ["7", "100"])


def test_an_invalid_job_is_reported_once_per_resource_version() -> None:
    key = ("kubemill.dev", "pytorchjobs", "ns", "j")
    job = _job("kubemill.dev")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "many"
    events: list[tuple[str, str]] = []
    reconciler = _reconciler(FakeApi(), {key: [job]}, _pods(worker_failed=False))
    reconciler._post_event = lambda _job, type_, reason, _msg: events.append((type_, reason))
    for _ in range(3):
        assert asyncio.run(reconciler.reconcile(key)) is None
    assert events == [("Warning", "InvalidSpec")]


def test_a_kept_job_is_its_body_less_managed_fields_with_the_keys_of_every_job_shared() -> None:
    """The cache keeps each job as its body less managedFields; two jobs parsed apart (as
    two watch events are) share the strings of their keys, not only equal ones."""
    bodies = [json.loads(json.dumps(_job("kubemill.dev"))) for _ in range(2)]
    for body in bodies:
        body["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    kept = [cached_job(body) for body in bodies]
    expected = _job("kubemill.dev")
    assert kept[0] == kept[1] == expected
    first = kept[0]["spec"]["pytorchReplicaSpecs"]
    second = kept[1]["spec"]["pytorchReplicaSpecs"]
    assert [id(k) for k in first] == [id(k) for k in second]
    assert [id(k) for k in first["Master"]] == [id(k) for k in second["Master"]]
    assert "managedFields" in bodies[0]["metadata"]  # the body itself is left as it was
