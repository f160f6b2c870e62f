"""A RayJob on an existing RayCluster (``clusterSelector``), without a substrate: what
KubeRay refuses beside a selector (at the field paths), the Plan from what a substrate
found of the cluster (pure: waiting, serving, lost), and the core's verdicts on it."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ConditionType, ManifestError
from kubemill.core import (
    CreatePod,
    Observed,
    ObservedPod,
    ReconcileOptions,
    SubmitRemote,
    reconcile,
)
from kubemill.engines.base import Referred
from kubemill.engines.ray.api.auth import TOKEN_KEY
from kubemill.engines.ray.api.raycluster import RayCluster
from kubemill.engines.ray.api.rayjob import SUBMITTER, RayJob
from kubemill.engines.ray.framework.selected import CLUSTER_DELETED
from kubemill.frameworks import RemoteReport, SecretFile
from kubemill.kinds import engine_for, lifecycle_for, load_one
from kubemill.substrates.kubernetes.render import plan_on_kubernetes

EXAMPLES = Path(__file__).parents[3] / "examples" / "ray"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "ray.io/cluster"
HEAD_IP = "10.1.2.3"


def _example(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def selector_manifest(mode: str = "K8sJobMode", cluster: str = "shared") -> dict[str, Any]:
    doc = _example("rayjob-sum.yaml")
    del doc["spec"]["rayClusterSpec"]
    doc["spec"]["clusterSelector"] = {"ray.io/cluster": cluster}
    doc["spec"]["submissionMode"] = mode
    return doc


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ManifestError) as caught:
        load_one(doc)
    return {e.path: e.message for e in caught.value.errors}


def cluster(
    state: str | None = "ready", name: str = "shared", *, token: bool = False
) -> RayCluster:
    doc = _example("raycluster.yaml")
    doc["metadata"]["name"] = name
    if token:
        doc["spec"]["authOptions"] = {"mode": "token"}
    doc["status"] = {"state": state, "endpoints": {"dashboard": "8265", "client": "10001"}}
    job = load_one(doc)
    assert isinstance(job, RayCluster)
    return job


def resolved(job: RayJob, found: RayCluster | None, *, head_ready: bool = True) -> RayJob:
    refers = engine_for("RayJob").refers
    assert refers is not None and refers.kind == "RayCluster"
    addresses = {f"{found.name}-head-0": HEAD_IP} if found is not None and head_ready else {}

    def lookup(name: str) -> Referred | None:
        assert name == "shared"
        return Referred(found, addresses) if found is not None else None

    out = refers.resolve(job, lookup)
    assert isinstance(out, RayJob)
    return out


def loaded(doc: dict[str, Any]) -> RayJob:
    job = load_one(doc)
    assert isinstance(job, RayJob)
    return job


def one_pass(job: RayJob, observed: Observed) -> tuple[RayJob, list[Any]]:
    result = reconcile(
        job,
        plan_on_kubernetes(job),
        observed,
        NOW,
        options=ReconcileOptions(),
        lifecycle=lifecycle_for(job.KIND),
    )
    out = job.model_copy(update={"status": result.status})
    assert isinstance(out, RayJob)
    return out, list(result.actions)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"clusterSelector": {"ray.io/cluster": ""}}, f"spec.clusterSelector.{KEY}", "empty"),
        ({"clusterSelector": {"app": "x"}}, "spec.clusterSelector.app", "ray.io/cluster"),
        ({"suspend": True}, "spec.suspend", "doesn't support the suspend"),
        ({"rayClusterSpec": _example("rayjob-sum.yaml")["spec"]["rayClusterSpec"]},
         "spec.rayClusterSpec", "ignore"),
    ],
)  # fmt: skip
def test_what_kuberay_refuses_beside_a_selector_is_refused_at_its_field_path(
    change: dict[str, Any], path: str, words: str
) -> None:
    doc = selector_manifest()
    doc["spec"].update(change)
    found = errors_of(doc)
    assert path in found and words in found[path], found


def test_backoff_limit_is_refused_beside_a_selector() -> None:
    doc = selector_manifest()
    doc["spec"]["backoffLimit"] = 1
    assert "spec.backoffLimit" in errors_of(doc)


def test_an_empty_selector_is_no_selector_and_the_cluster_spec_is_required() -> None:
    doc = selector_manifest()
    doc["spec"]["clusterSelector"] = {}
    assert "spec.rayClusterSpec" in errors_of(doc)


def test_a_selector_manifest_loads_and_round_trips_with_shutdown_after_finish() -> None:
    doc = selector_manifest()
    job = loaded(doc)
    assert job.selects == "shared"
    assert job.to_wire()["spec"]["clusterSelector"] == {"ray.io/cluster": "shared"}
    assert engine_for("RayJob").refers.names(doc) == ("shared",)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("found", "head_ready", "why"),
    [
        (None, True, "waiting for RayCluster shared: it does not exist"),
        ("not-ready", True, "waiting for RayCluster shared to be ready (state unset)"),
        ("ready", False, "waiting for the head of RayCluster shared to serve"),
    ],
)
def test_while_the_cluster_is_missing_or_not_ready_nothing_starts_and_the_status_says_why(
    found: str | None, head_ready: bool, why: str
) -> None:
    state = None if found == "not-ready" else "ready"
    job = resolved(
        loaded(selector_manifest()), cluster(state) if found else None, head_ready=head_ready
    )
    plan = plan_on_kubernetes(job)
    assert plan.replicas == ()
    assert plan.remote is not None and plan.remote.host == "" and not plan.remote.after
    waiting, actions = one_pass(job, Observed())
    assert not any(isinstance(a, SubmitRemote) for a in actions)
    wire = waiting.status.to_wire()
    assert wire["jobDeploymentStatus"] == "Initializing"
    assert wire["message"].startswith(why), wire["message"]
    assert wire["rayClusterName"] == "shared"
    assert not waiting.status.finished


def test_a_serving_cluster_gets_the_submitter_against_its_head_service() -> None:
    job = resolved(loaded(selector_manifest()), cluster())
    plan = plan_on_kubernetes(job)
    assert [r.replica_type for r in plan.replicas] == [SUBMITTER]
    submitter = plan.replicas[0]
    url = "http://shared-head-svc.default.svc.cluster.local:8265"
    assert url in submitter.template.spec.containers[0].command  # type: ignore[operator]
    # The default submitter runs the selected cluster's head image, as KubeRay's.
    assert submitter.template.spec.containers[0].image == "rayproject/ray:2.60.0"
    assert plan.remote is not None
    assert (plan.remote.after, plan.remote.host, plan.remote.port) == ("", HEAD_IP, 8265)
    assert plan.exposed == () and plan.files == ()  # none of the cluster is the RayJob's
    running, actions = one_pass(job, Observed())
    assert [a for a in actions if isinstance(a, CreatePod)] == [CreatePod(submitter.name)]
    wire = running.status.to_wire()
    assert wire["jobDeploymentStatus"] == "Running"
    assert wire["dashboardURL"] == "shared-head-svc.default.svc.cluster.local:8265"


def test_a_cluster_with_token_auth_lends_the_submitter_and_the_operator_its_secret() -> None:
    """On Kubernetes the selected cluster's token (authOptions mode token) is in its own
    Secret: the submitter reads it from there, as the cluster's nodes do, the operator asks
    the job API with it, and the RayJob makes no Secret of its own."""
    plan = plan_on_kubernetes(resolved(loaded(selector_manifest()), cluster(token=True)))
    (submitter,) = plan.replicas
    env = {e.name: e for e in submitter.env}
    assert env["RAY_AUTH_MODE"].value == "token"
    source = env["RAY_AUTH_TOKEN"].value_from
    assert source is not None and source.secret_key_ref == {"name": "shared", "key": TOKEN_KEY}
    assert plan.remote is not None
    assert plan.remote.bearer_token == SecretFile("shared", TOKEN_KEY)
    assert plan.files == ()
    # Without authOptions: no token anywhere, as KubeRay's default.
    plain = plan_on_kubernetes(resolved(loaded(selector_manifest()), cluster()))
    assert plain.remote is not None and plain.remote.bearer_token is None
    assert "RAY_AUTH_TOKEN" not in {e.name for e in plain.replicas[0].env}


def test_http_mode_submits_to_the_selected_head_once_it_serves() -> None:
    job = loaded(selector_manifest("HTTPMode"))
    for found, asked in ((None, False), (cluster("ready"), True)):
        _, actions = one_pass(resolved(job, found), Observed(remote=RemoteReport(False)))
        assert (SubmitRemote() in actions) is asked


def test_rays_verdict_ends_the_rayjob_and_the_cluster_is_none_of_its_pods() -> None:
    job = resolved(loaded(selector_manifest("HTTPMode")), cluster())
    running, _ = one_pass(job, Observed(remote=RemoteReport(True, {"status": "RUNNING"})))
    done, actions = one_pass(
        resolved(running, cluster()), Observed(remote=RemoteReport(True, {"status": "SUCCEEDED"}))
    )
    assert done.status.is_true(ConditionType.SUCCEEDED)
    assert done.status.to_wire()["jobDeploymentStatus"] == "Complete"
    # The Plan names no pod of the cluster: nothing of it is ever deleted.
    assert not [a for a in actions if type(a).__name__.startswith("Delete")]


def test_a_cluster_deleted_under_the_running_job_fails_it_with_a_clear_reason() -> None:
    job = resolved(loaded(selector_manifest()), cluster())
    running, _ = one_pass(job, Observed())
    assert running.status.to_wire()["jobDeploymentStatus"] == "Running"
    # The submitter stays planned once the RayJob is Running, whatever the cluster does.
    flickered = resolved(running, cluster("suspended"))
    assert [r.replica_type for r in plan_on_kubernetes(flickered).replicas] == [SUBMITTER]
    submitter = ObservedPod(
        name=f"{job.name}-submitter-0",
        replica_type=SUBMITTER,
        index=0,
        phase="Running",
        ready=True,
    )
    report = RemoteReport(True, {"status": "RUNNING"})
    gone, _ = one_pass(resolved(running, None), Observed(pods=(submitter,), remote=report))
    failed = gone.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.status == "True"
    assert failed.reason == CLUSTER_DELETED
    assert "RayCluster shared was deleted" in (failed.message or "")
    assert gone.status.to_wire()["jobDeploymentStatus"] == "Failed"


def test_a_run_that_ended_before_the_cluster_went_keeps_rays_verdict() -> None:
    job = resolved(loaded(selector_manifest("HTTPMode")), cluster())
    running, _ = one_pass(job, Observed(remote=RemoteReport(True, {"status": "RUNNING"})))
    report = RemoteReport(True, {"status": "SUCCEEDED"})
    done, _ = one_pass(resolved(running, None), Observed(remote=report))
    assert done.status.is_true(ConditionType.SUCCEEDED)


def test_a_job_of_its_own_cluster_is_not_resolved() -> None:
    doc = copy.deepcopy(_example("rayjob-sum.yaml"))
    job = loaded(doc)
    assert resolved(job, None) is job
    assert engine_for("RayJob").refers.names(doc) == ()  # type: ignore[union-attr]
