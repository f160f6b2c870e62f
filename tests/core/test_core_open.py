"""The core's open model: what a framework declares as data and the core interprets.

Service outcomes (Ready, never Succeeded), "the launcher decides", start gating on
readiness, delivered files (rewritten in place when a listing changes), per-job access,
exposed services, foreign pods (counted, never deleted) and per-kind status extensions.
Plans are built by hand (corekit), as a framework would declare them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest
from corekit import FakeSubstrate, at, non_events, plan_for, pod, pytorchjob, step, with_status

from kubemill.api import ConditionType, Job, JobStatus
from kubemill.core import (
    CreateChild,
    CreatePod,
    CreateService,
    DeleteChild,
    DeletePod,
    Observed,
    ObservedChild,
    ObservedPod,
    WriteFiles,
    reconcile,
)
from kubemill.frameworks import (
    AccessPlan,
    AccessRule,
    ExposedService,
    FilePlan,
    FileSet,
    ForeignPods,
    HostListing,
    ServicePolicy,
    ServicePort,
    StatusView,
    decided_by,
)
from kubemill.frameworks.plan import Plan


def names(actions: object, kind: type) -> list[str]:
    return [a.name for a in actions if isinstance(a, kind)]  # type: ignore[attr-defined]


def cond(status: JobStatus, kind: ConditionType) -> tuple[str, str] | None:
    found = status.condition(kind)
    return None if found is None else (found.status, found.reason)


def ready(p: ObservedPod, is_ready: bool = True) -> ObservedPod:
    return replace(p, ready=is_ready)


# --- outcome rules ----------------------------------------------------------------------------


def service_job() -> tuple[Job, Plan]:
    job = pytorchjob(name="svc", workers=2, restart="Never")
    return job, plan_for(job, outcome=ServicePolicy("Worker", min_ready=2))


def test_a_service_is_ready_while_enough_replicas_are_ready_and_never_succeeds() -> None:
    job, plan = service_job()
    pods = [pod(plan, "master-0"), ready(pod(plan, "worker-0")), pod(plan, "worker-1")]
    first = reconcile(job, plan, Observed(pods=tuple(pods)), at(1))
    assert cond(first.status, ConditionType.READY) is None  # 1 of 2: not ready, not yet said
    pods[2] = ready(pods[2])
    second = reconcile(with_status(job, first.status), plan, Observed(pods=tuple(pods)), at(2))
    assert cond(second.status, ConditionType.READY) == ("True", "PyTorchJobReady")
    # Every replica exits 0: a service has no success, only readiness lost.
    done = tuple(replace(p, phase="Succeeded", exit_code=0, finished=at(3)) for p in pods)
    third = reconcile(with_status(job, second.status), plan, Observed(pods=done), at(5))
    assert not third.status.finished
    assert cond(third.status, ConditionType.READY) == ("False", "PyTorchJobNotReady")
    message = third.status.condition(ConditionType.READY)
    assert message is not None and "0 of 2 Worker replica(s)" in message.message


def test_a_service_fails_by_the_restart_policy_and_is_no_longer_ready() -> None:
    job, plan = service_job()
    pods = (pod(plan, "master-0"), ready(pod(plan, "worker-0")), ready(pod(plan, "worker-1")))
    up = reconcile(job, plan, Observed(pods=pods), at(1))
    assert up.status.is_true(ConditionType.READY)
    crashed = (pods[0], pods[1], replace(pods[2], phase="Failed", exit_code=3, finished=at(2)))
    result = reconcile(with_status(job, up.status), plan, Observed(pods=crashed), at(2))
    assert cond(result.status, ConditionType.FAILED) == ("True", "PyTorchJobFailed")
    assert cond(result.status, ConditionType.READY) == ("False", "PyTorchJobReady")


def test_the_launcher_decides() -> None:
    job = pytorchjob(name="mpi", workers=2, restart="Never")
    plan = plan_for(job, outcome=decided_by("Master"))
    running = tuple(pod(plan, n) for n in ("master-0", "worker-0", "worker-1"))
    base = with_status(job, reconcile(job, plan, Observed(pods=running), at(0)).status)
    launcher_done = replace(running[0], phase="Succeeded", exit_code=0, finished=at(1))
    ok = reconcile(base, plan, Observed(pods=(launcher_done, *running[1:])), at(5))
    assert ok.status.is_true(ConditionType.SUCCEEDED)
    worker_lost = replace(
        running[2], phase="Failed", exit_code=137, reason="Evicted", finished=at(1)
    )
    bad = reconcile(base, plan, Observed(pods=(*running[:2], worker_lost)), at(2))
    failed = bad.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.status == "True"
    assert "worker-1 exited with code 137 (Evicted)" in failed.message


# --- start gating -----------------------------------------------------------------------------


@pytest.mark.parametrize(("gate", "created"), [("running", True), ("ready", False)])
def test_a_later_stage_waits_for_the_earlier_one_per_the_gate(gate: str, created: bool) -> None:
    job = pytorchjob(name="g", workers=2)
    plan = plan_for(job, stages={"Master": 1}, start_gate=gate)
    workers_running = (pod(plan, "worker-0"), pod(plan, "worker-1"))
    result = reconcile(job, plan, Observed(pods=workers_running), at(1))
    assert (plan.replica("g-master-0").name in names(result.actions, CreatePod)) is created
    all_ready = tuple(ready(p) for p in workers_running)
    result = reconcile(job, plan, Observed(pods=all_ready), at(2))
    assert names(result.actions, CreatePod) == ["g-master-0"]


def test_under_a_succeeded_gate_a_later_stage_waits_for_the_earlier_one_to_finish() -> None:
    job = pytorchjob(name="g", workers=2)
    plan = plan_for(job, stages={"Master": 1}, start_gate="succeeded")
    running = tuple(ready(pod(plan, f"worker-{i}")) for i in range(2))
    result = reconcile(job, plan, Observed(pods=running), at(1))
    assert names(result.actions, CreatePod) == []
    one_done = (replace(running[0], phase="Succeeded", exit_code=0, finished=at(1)), running[1])
    result = reconcile(job, plan, Observed(pods=one_done), at(2))
    assert names(result.actions, CreatePod) == []
    both_done = tuple(replace(p, phase="Succeeded", exit_code=0, finished=at(1)) for p in running)
    result = reconcile(job, plan, Observed(pods=both_done), at(3))
    assert names(result.actions, CreatePod) == ["g-master-0"]


def test_nothing_of_a_later_stage_is_created_before_the_first_stage_exists() -> None:
    job = pytorchjob(name="g", workers=1)
    plan = plan_for(job, stages={"Master": 1}, start_gate="ready")
    result = reconcile(job, plan, Observed(), at(0))
    assert names(result.actions, CreatePod) == ["g-worker-0"]


# --- files, access, exposed services ----------------------------------------------------------


HOSTS = FileSet(
    name="f-config",
    mount_path="/etc/mpi",
    files=(
        FilePlan("hostfile", "f-worker-0 slots=1\nf-worker-1 slots=1\n"),
        FilePlan(
            "discover_hosts.sh",
            mode=0o755,
            listing=HostListing("Worker", "echo {host}:1", header="#!/bin/sh"),
        ),
    ),
)


def files_job(**extra: object) -> tuple[Job, Plan]:
    job = pytorchjob(name="f", workers=2)
    return job, plan_for(job, files=(HOSTS,), **extra)


def written(actions: object) -> Mapping[str, WriteFiles]:
    return {a.name: a for a in actions if isinstance(a, WriteFiles)}  # type: ignore[attr-defined]


def test_files_are_written_before_the_pods_that_read_them() -> None:
    job, plan = files_job()
    result = reconcile(job, plan, Observed(), at(0))
    kinds = [type(a).__name__ for a in non_events(result.actions)]
    assert kinds.index("WriteFiles") < kinds.index("CreatePod")
    action = written(result.actions)["f-config"]
    assert not action.update and not action.secret
    content = {f.name: (f.content, f.mode) for f in action.files}
    assert content["hostfile"] == ("f-worker-0 slots=1\nf-worker-1 slots=1\n", 0o644)
    assert content["discover_hosts.sh"] == ("#!/bin/sh\n", 0o755)  # no worker runs yet


def test_a_listing_follows_the_running_replicas_and_is_rewritten_in_place() -> None:
    job, plan = files_job()
    substrate = FakeSubstrate(plan)

    def once(now: float) -> list[WriteFiles]:
        nonlocal job
        before = len(substrate.writes)
        job, _ = step(job, plan, substrate, at(now))
        return substrate.writes[before:]

    assert [w.update for w in once(0)] == [False]
    assert once(1) == []  # same content: nothing to write
    substrate.set_phase("worker-1", "Running")
    [update] = once(2)
    assert update.update
    script = {f.name: f.content for f in update.files}["discover_hosts.sh"]
    assert script == "#!/bin/sh\necho f-worker-1.f:1\n"
    substrate.set_phase("worker-0", "Running")
    [update] = once(3)
    assert {f.name: f.content for f in update.files}["discover_hosts.sh"] == (
        "#!/bin/sh\necho f-worker-0.f:1\necho f-worker-1.f:1\n"
    )
    assert once(4) == []


def test_a_secret_file_set_and_children_the_plan_no_longer_has() -> None:
    job = pytorchjob(name="s", workers=1)
    keys = FileSet("s-ssh", (FilePlan("id_rsa", "KEY", mode=0o600),), "/root/.ssh", secret=True)
    plan = plan_for(job, files=(keys,))
    old = ObservedChild("ConfigMap", "s-config", "abc")
    result = reconcile(job, plan, Observed(children=(old,)), at(0))
    assert written(result.actions)["s-ssh"].secret
    assert [(a.kind, a.name) for a in result.actions if isinstance(a, DeleteChild)] == [
        ("ConfigMap", "s-config")
    ]


def test_per_job_access_is_created_once_in_order() -> None:
    access = AccessPlan(
        "a-launcher", (AccessRule(("",), ("pods/exec",), ("create",)),), replica_types=("Master",)
    )
    job = pytorchjob(name="a", workers=1)
    plan = plan_for(job, access=access)
    result = reconcile(job, plan, Observed(), at(0))
    created = [(a.kind, a.name) for a in result.actions if isinstance(a, CreateChild)]
    assert created == [
        ("ServiceAccount", "a-launcher"),
        ("Role", "a-launcher"),
        ("RoleBinding", "a-launcher"),
    ]
    seen = tuple(ObservedChild(kind, name) for kind, name in created)  # type: ignore[arg-type]
    again = reconcile(with_status(job, result.status), plan, Observed(children=seen), at(1))
    assert not [a for a in again.actions if isinstance(a, CreateChild | DeleteChild)]


def test_an_exposed_service_is_created_and_never_taken_for_a_stray() -> None:
    ui = ExposedService(
        "e-ui", "Master", (ServicePort("web", 80, 8080, node_port=30080),), type="NodePort"
    )
    job = pytorchjob(name="e", workers=1)
    plan = plan_for(job, exposed=(ui,))
    result = reconcile(job, plan, Observed(), at(0))
    assert "e-ui" in names(result.actions, CreateService)
    services = frozenset({"e-ui", "e-master-0", "e-worker-0"})
    again = reconcile(with_status(job, result.status), plan, Observed(services=services), at(1))
    assert not [a for a in again.actions if type(a).__name__ == "DeleteService"]


# --- foreign pods and status extensions -------------------------------------------------------


def executor(plan: Plan, n: int, phase: str, owner: str) -> ObservedPod:
    return ObservedPod(
        name=f"{plan.name}-exec-{n}",
        replica_type="Executor",
        index=n,
        phase=phase,  # type: ignore[arg-type]
        owner=owner,
    )


def test_foreign_pods_are_counted_and_never_deleted() -> None:
    job = pytorchjob(name="sp", workers=1)
    plan = plan_for(job, foreign=(ForeignPods("Executor", owner_type="Master"),))
    own = (pod(plan, "master-0"), pod(plan, "worker-0"))
    foreign = (
        executor(plan, 1, "Running", "sp-master-0"),
        executor(plan, 2, "Running", "sp-master-0"),
        executor(plan, 3, "Failed", "sp-master-0"),
        executor(plan, 4, "Running", "someone-else"),
    )
    result = reconcile(job, plan, Observed(pods=own + foreign), at(1))
    assert names(result.actions, DeletePod) == []
    counts = result.status.replica_statuses["Executor"]
    assert (counts.active, counts.failed) == (2, 1)
    # The job's own outcome is untouched by a failed executor.
    assert result.status.is_true(ConditionType.RUNNING)
    # Nor does the job finishing delete them: they go with their owner.
    finished = (replace(own[0], phase="Succeeded", exit_code=0, finished=at(2)), own[1])
    done = reconcile(
        with_status(job, result.status), plan, Observed(pods=finished + foreign), at(9)
    )
    assert done.status.is_true(ConditionType.SUCCEEDED)
    assert not [n for n in names(done.actions, DeletePod) if "exec" in n]


class EndpointStatus(JobStatus):
    """A kind's status with a field of its own."""

    endpoint: str = ""
    ready_replicas: int = 0


def endpoint_extension(view: StatusView) -> Mapping[str, object]:
    up = [p for p in view.pods if p.ready and not p.owner]
    return {
        "endpoint": f"http://{view.plan.name}-master-0:7103" if up else "",
        "ready_replicas": len(up),
    }


def test_a_status_extension_writes_the_kinds_own_fields_in_the_same_pass() -> None:
    job = pytorchjob(name="x", workers=1)
    job = job.model_copy(update={"status": EndpointStatus()})
    plan = plan_for(job, status_extension=endpoint_extension)
    pods = (ready(pod(plan, "master-0")), pod(plan, "worker-0"))
    result = reconcile(job, plan, Observed(pods=pods), at(1))
    assert isinstance(result.status, EndpointStatus)
    assert (result.status.endpoint, result.status.ready_replicas) == ("http://x-master-0:7103", 1)
    assert result.status.to_wire()["endpoint"] == "http://x-master-0:7103"


def test_a_status_extension_may_only_set_declared_fields() -> None:
    job = pytorchjob(name="x", workers=1)
    plan = plan_for(job, status_extension=lambda view: {"nonsense": 1})
    with pytest.raises(ValueError, match="nonsense"):
        reconcile(job, plan, Observed(), at(0))


def test_everything_converges_and_a_settled_pass_does_nothing() -> None:
    """All the seams at once, through the fake substrate: a fixpoint is reached."""
    job = pytorchjob(name="all", workers=2)
    plan = plan_for(
        job,
        stages={"Master": 1},
        start_gate="running",
        files=(HOSTS,),
        access=AccessPlan("all-sa", (AccessRule(("",), ("pods",), ("get",)),)),
        exposed=(ExposedService("all-ui", "Master", (ServicePort("ui", 80, 8080),)),),
    )
    substrate = FakeSubstrate(plan, start_phase="Running")
    for now in range(6):
        job, _ = step(job, plan, substrate, at(now))
    assert job.status.is_true(ConditionType.RUNNING)
    assert set(substrate.children) == {
        ("ConfigMap", "f-config"),
        ("ServiceAccount", "all-sa"),
        ("Role", "all-sa"),
        ("RoleBinding", "all-sa"),
    }
    assert "all-ui" in substrate.services
    _, settled = step(job, plan, substrate, at(7))
    assert settled.actions == ()
