"""Asking the core for a verdict on a local job whose supervisor loop cannot (or did not).

Every outcome of a local job comes out of :func:`kubemill.core.reconcile`, also when
no supervisor loop is there to call it:

- a reader (``kubemill get`` in another shell) finds the supervisor gone: it reports
  what the records say of the replicas (those that were running are *lost*: phase
  ``Unknown``, reason ``SupervisorLost``) plus a :class:`~kubemill.core.Halt`;
- the supervisor cannot start the job here (``NotRunnableLocally``) or its own loop
  failed (``SupervisorError``): a ``Halt`` too;
- a reader finds a finished job whose ``ttlSecondsAfterFinished`` may have passed
  (:func:`expire`): the core says whether to delete it.

This module builds those observations and the Plan to judge them against. For a reader it
also carries the verdict out (:func:`heal`: stop what is left of the job
(:func:`kill_leftovers`), record its running replicas as lost, and store the status and the
events the core returns, :func:`judge_unsupervised`); the supervisor stores them itself.
Nothing here decides an outcome.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime

from kubemill.api import STOP_ANNOTATION, Job, JobStatus
from kubemill.core import (
    DeleteJob,
    Halt,
    Observed,
    ObservedPod,
    ReconcileOptions,
    ReconcileResult,
    RecordEvent,
    reconcile,
)
from kubemill.core.model import PodPhase
from kubemill.frameworks import Plan, SuccessPolicy
from kubemill.kinds import is_controller, lifecycle_for
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.network import LocalNetwork, local_plan
from kubemill.substrates.local.prepared import prepare_recorded
from kubemill.substrates.local.store import JobRecord, ReplicaRecord, Store

SUPERVISOR_LOST = "SupervisorLost"
"""The reason of a replica (and, through the core, of a job) whose supervisor died."""
LEFTOVER_GRACE = 0.5
"""SIGTERM-to-SIGKILL wait for processes left behind by a dead supervisor."""

_POD_PHASES: frozenset[str] = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})


def _utc(moment: float | None) -> datetime | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC)


def recorded_plan(job: Job, ports: dict[tuple[str, int], int], *, files_root: str = "") -> Plan:
    """The local Plan of a recorded job with its reserved ports.

    A job whose Plan cannot be built at all (the reason it cannot run here) is judged
    against a Plan without replicas: the core still records the verdict it is given.
    """
    try:
        network = LocalNetwork(job.name, ports=ports, files_root=files_root)
        return local_plan(job, network)
    except (ValueError, SubstrateError):  # PlanError, UnknownKind, a port or path missing
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=(),
            outcome=SuccessPolicy(replica_type="", require="first"),
            services=False,
        )


def observed_records(records: Iterable[ReplicaRecord], *, lost: bool) -> tuple[ObservedPod, ...]:
    """The replicas as their records last saw them.

    Replicas never created, and those kubemill already stopped (``Stopped``: the core
    deleted their pods), are not there. With ``lost``, a replica recorded as running
    has lost its supervisor: phase ``Unknown`` (a lost node's pods look the same on a
    cluster) with reason ``SupervisorLost``.
    """
    pods = []
    for r in records:
        if r.created is None or r.phase not in _POD_PHASES:
            continue
        phase: PodPhase = r.phase  # type: ignore[assignment]  # checked just above
        reason = r.reason
        if lost and phase in ("Running", "Pending"):
            phase, reason = "Unknown", SUPERVISOR_LOST
        pods.append(
            ObservedPod(
                name=r.name,
                replica_type=r.replica_type,
                index=r.index,
                phase=phase,
                exit_code=r.exit_code,
                restart_count=r.restart_count,
                created=_utc(r.created),
                started=_utc(r.started),
                finished=_utc(r.finished),
                reason=reason,
                uid=f"{r.name}@{r.created}",
            )
        )
    return tuple(pods)


def recorded_job(
    store: Store, uid: str, status: JobStatus
) -> tuple[Job, Plan, tuple[ObservedPod, ...]] | None:
    """A job as its records say, with ``status``, to be judged by what they say of its
    replicas (none lost); ``None`` if it is gone."""
    rec = store.job_by_uid(uid)
    if rec is None:
        return None
    job = rec.load_job()
    job.status = status
    plan = recorded_plan(job, store.ports(uid), files_root=str(rec.files_dir))
    return job, plan, observed_records(store.replicas(uid), lost=False)


def record_events(store: Store, uid: str, result: ReconcileResult, *, when: float) -> None:
    """The core's events of one pass, into the events table."""
    for action in result.actions:
        if isinstance(action, RecordEvent):
            store.add_event(
                uid, type=action.type, reason=action.reason, message=action.message, when=when
            )


def heal(store: Store, rec: JobRecord, *, options: ReconcileOptions) -> JobRecord:
    """The supervisor died: kill what is left, and have the core judge the job."""
    if is_controller(rec.kind):
        return _heal_controller(store, rec)
    kill_leftovers(store, rec, verify=False)
    now = time.time()
    lost = []
    for r in store.replicas(rec.uid):
        if r.phase in ("Running", "Pending") and r.created is not None:
            lost.append(
                replace(
                    r,
                    phase="Failed",
                    reason=SUPERVISOR_LOST,
                    message="its supervisor died; the process was killed",
                    finished=r.finished or now,
                )
            )
    # Judged from the records as they were: the lost replicas are observed lost.
    judge_unsupervised(store, rec, options=options, now=now, lost=True)
    judged = store.job_by_uid(rec.uid)
    if judged is not None and not judged.finished:
        # Kept, Suspended as asked: the suspend stopped them (the kernel carried it out
        # as the supervisor died). Not failures: resuming starts them again as after
        # any suspend, no restart counted.
        lost = [
            replace(
                r,
                phase="Stopped",
                reason="Stopped",
                message="stopped for the suspend; its supervisor died first",
            )
            for r in lost
        ]
    store.save_replicas(lost)
    store.set_supervisor_state(rec.uid, "done")
    healed = store.job_by_uid(rec.uid)
    return healed if healed is not None else rec


def _heal_controller(store: Store, rec: JobRecord) -> JobRecord:
    """A controller's loop died: no run starts any more (its runs, jobs of their own, go
    on). Reported as a job's lost supervisor is, and ``resume`` starts a new loop."""
    who = f"pid {rec.supervisor.pid}" if rec.supervisor is not None else "it never started"
    store.add_event(
        rec.uid,
        type="Warning",
        reason=SUPERVISOR_LOST,
        message=f"the loop of {rec.kind} {rec.namespace}/{rec.name} ({who}) is gone: no"
        f" run starts until `kubemill resume {rec.name}` starts a new one",
    )
    store.set_supervisor_state(rec.uid, "done")
    healed = store.job_by_uid(rec.uid)
    return healed if healed is not None else rec


def judge_unsupervised(
    store: Store,
    rec: JobRecord,
    *,
    options: ReconcileOptions,
    now: float | None = None,
    lost: bool = False,
) -> None:
    """Ask the core about a job no supervisor runs; record its status and events once.

    ``lost``: the supervisor died while it ran the job; unless the job was asked to
    stop or to suspend (which the core then carries out as asked, nothing running
    any more), the core is told the substrate lost it (``Halt``).
    """
    moment = time.time() if now is None else now
    current = store.job_by_uid(rec.uid)
    if current is None or current.finished:
        return
    job = current.load_job()
    halt = None
    if lost and STOP_ANNOTATION not in job.metadata.annotations and not job.run_policy.suspend:
        who = f"pid {rec.supervisor.pid}" if rec.supervisor is not None else "it never started"
        halt = Halt(
            SUPERVISOR_LOST,
            f"the supervisor of {rec.kind} {rec.namespace}/{rec.name} ({who}) is gone while"
            " the job was running, so its replicas were stopped; the logs written so far"
            f" remain (kubemill logs {rec.name}). To run it again: kubemill delete"
            f" {rec.name}, then submit it again",
        )
    pods = observed_records(store.replicas(rec.uid), lost=lost)
    plan = recorded_plan(job, store.ports(rec.uid), files_root=str(rec.files_dir))
    result = reconcile(
        job,
        plan,
        Observed(pods=pods, halt=halt),
        datetime.fromtimestamp(moment, UTC),
        options=options,
        lifecycle=lifecycle_for(job.KIND, local=True),
    )
    # Pod deletions are moot: no process of the job runs any more.
    status = result.status
    if store.settle_without_supervisor(
        rec.uid,
        status.to_wire(),
        finished=status.finished,
        supervisor_done=current.supervisor_state == "done",
    ):
        record_events(store, rec.uid, result, when=moment)


def kill_leftovers(store: Store, rec: JobRecord, *, verify: bool) -> None:
    """SIGTERM/SIGKILL every replica process group that is still ours."""
    survivors: list[int] = []
    for r in store.replicas(rec.uid):
        if r.process is None:
            continue
        if not procinfo.stop_group(r.process, grace=LEFTOVER_GRACE) and verify:
            survivors.extend(procinfo.group_members(r.process.pid))
    # Processes that left the replicas' groups, re-parented away if the supervisor died.
    stray = procinfo.stop_processes(lambda: procinfo.marked(f"{rec.uid}/"), grace=LEFTOVER_GRACE)
    if verify:
        survivors.extend(stray)
    if survivors:
        raise SubstrateError(
            f"could not stop every process of job {rec.name}: pids {sorted(survivors)}"
            " survive SIGKILL (stuck in the kernel?); check them with `ps`"
        )


def ttl_passed(store: Store, rec: JobRecord) -> bool:
    """Whether the core deletes this finished job now, its ttlSecondsAfterFinished passed,
    as it decides when a reader asks (no supervisor is left to); the reader removes it."""
    if rec.ttl is None:
        # Recorded with the manifest, which no patch changes there: the core would
        # find no TTL to apply, so the manifest is not loaded just to be told so.
        return False
    job = rec.load_job()
    prepared = prepare_recorded(rec, store.ports(rec.uid))
    result = reconcile(
        job,
        prepared.plan,
        Observed(),
        datetime.now(UTC),
        lifecycle=lifecycle_for(job.KIND, local=True),
    )
    return any(isinstance(a, DeleteJob) for a in result.actions)


__all__ = [
    "SUPERVISOR_LOST",
    "heal",
    "judge_unsupervised",
    "kill_leftovers",
    "observed_records",
    "record_events",
    "recorded_job",
    "recorded_plan",
    "ttl_passed",
]
