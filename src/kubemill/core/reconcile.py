"""The reconciler: one pure function from (job, Plan, observed, now) to actions and a status.

:func:`reconcile` is level-triggered: it looks only at the job (with its last status), the
Plan and what the substrate observed, and says what to do now. Running it again on the same
inputs after its actions took effect yields no actions at all (not even events), so a
substrate may call it as often as it likes. Semantics follow Kubeflow training-operator v1;
where kubemill deviates, the comment at the rule says why.

Decisions, in the order they are taken:

0. A job that runs again as a whole (``Plan.reruns``: a SparkApplication) is decided by the
   spark-operator's state machine instead (:mod:`kubemill.core.application`): it submits
   the deciding replica (the driver), judges its pod, deletes and submits it again, and
   maps its state onto the conditions (RUNNING: Running; PENDING_RERUN and INVALIDATING:
   Restarting; COMPLETED: Succeeded; FAILED: Failed; SUSPENDING/SUSPENDED: Suspended). A
   spec change withdraws a verdict (:meth:`_Reconcile._reopen`): the one exception to
   Succeeded and Failed being final. The rules below do not apply to it except ``Created``,
   interrupts and halts (FAILED), files, access, services and replica counts. A passing
   state (SUCCEEDING, FAILING, INVALIDATING, RESUMING, ...) is written first and acted on
   by a pass that follows at once (``requeue_after`` 0), as upstream; where the machine
   waits, a pass on unchanged inputs has no actions.
1. ``Created`` on the first reconcile.
2. A finished job (Succeeded or Failed) only cleans up (``cleanPodPolicy``, PodGroup) and
   waits for ``ttlSecondsAfterFinished``; it never gets a new pod or a new verdict.
3. The substrate reports it can no longer run the job (``Observed.halt``: locally a lost
   supervisor, a job that cannot start on this machine, a failed supervisor) -> Failed with
   the substrate's reason. A stop request (the ``kubemill.dev/stop`` annotation: ``kubemill
   interrupt``, Ctrl-C during ``kubemill run``) -> Failed with reason ``Interrupted``. Both
   stop the active pods; they mean the same on every substrate.
4. ``suspend``: every pod, service and the PodGroup go, ``Suspended`` True, ``Running`` False.
   On resume ``Suspended`` turns False and ``startTime`` restarts now, as upstream.
5. Success policy met, or a replica failed for good (``Never``, or ``ExitCode`` with 1-127):
   judged by when the replicas *finished*, not by the order a substrate observed them in.
   A permanent failure that finished before the success, or within ``OUTCOME_TIE`` (1 s,
   the resolution of Kubernetes' ``finishedAt``) after it, or at an unknown time, makes the
   job Failed: a failure wins a tie. A later failure does not undo the success (a PS
   killed after the chief finished). While another replica is still active within the
   window, the success waits (a requeue, at most 2 s: ``REPORT_GRACE`` more for the exit
   to be reported), so a failure about to be observed still counts. Upstream judges
   whatever it happens to list first, so a worker that crashes as the master exits 0
   gives either verdict; kubemill's is deterministic.
6. Restarts over ``backoffLimit`` -> Failed (``BackoffLimitExceeded``); past
   ``activeDeadlineSeconds`` -> Failed (``DeadlineExceeded``). Both stop the active pods
   first, whatever ``cleanPodPolicy`` says (upstream deletes every pod here; kubemill keeps
   the finished ones to the clean-pod policy, so their logs stay readable).
7. Otherwise: retryable failures are deleted for recreation (``Restarting``), strays go,
   the PodGroup, services and missing pods are created (by stage), and ``Running`` is set
   once every replica's pod is Running or Succeeded (at least one Running). Upstream sets
   Running as soon as one pod of the deciding type (chief/master, else workers) runs;
   kubemill waits for the whole job so that Running means every replica is up, which is
   what gang and staged start promise and what ``kubemill run`` shows.

Restart accounting (``ReplicaStatus.restarts``, per replica type). A restart is either in
place (pod restartPolicy OnFailure/Always; the substrate reports ``restart_count``) or a
recreation (the core deleted a failed pod to create it again). A pod's count is gone with
the pod, so every pod the core deletes, whatever for (recreation, suspend, a stray, the
deadline or backoff stop, cleanPodPolicy), leaves its ``restart_count`` in
``retiredRestarts``, plus one when it is deleted to be recreated; this happens in the one
method that emits ``DeletePod``. Every pass, active, suspended or finished, ends with
``restarts = retiredRestarts + restart_count of the pods still alive`` (not being deleted),
so in-place restarts, recreations and in-place restarts of a recreated pod add up exactly.
Idempotence rests on the substrate contract that a pod it has been asked to delete is
reported ``deleting=True`` (or not at all) afterwards: a deleting pod is never judged or
counted again.

Pods that vanish without the core deleting them (kubectl delete, a lost node) and statuses
written before ``retiredRestarts`` existed show up as live pods with fewer restarts than
the last status recorded; the shortfall is retired, so ``restarts`` never goes down. That
is exact unless another pod of the same type restarted in place in the same interval,
which hides the shortfall (the core keeps no per-pod history): then up to that many
restarts are not counted.

Suspending keeps the count: the deleted pods' in-place restarts are retired (the deletion
itself is not a restart), so suspending and resuming does not reset the budget. Upstream
sums the restart counts of running pods only, so whatever was deleted, by suspend or for
a recreation, is forgotten there; kubemill follows Kubernetes Jobs instead, whose failure
count survives a suspension while the pods it removes are not counted as failures.

A restart is allowed while the total stays <= ``backoffLimit``: ``backoffLimit: 2``
permits two restarts and the failure that would need a third fails the job. A restart the
core refuses is not counted.

Unknown pods (the substrate lost the replica, e.g. its supervisor died and the process is
gone without an exit status) count as failed with no exit code: the restart policy decides
(Never -> the job fails naming the reason the substrate gave; OnFailure/Always/ExitCode ->
recreated). Waiting for a replica nobody can see would hang the job forever.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from kubemill.api import (
    STOP_ANNOTATION,
    ApplicationStateType,
    CleanPodPolicy,
    ConditionType,
    Job,
    ReplicaStatus,
    RestartPolicy,
)
from kubemill.core import application
from kubemill.core.conditions import ConditionStatus, set_condition, terminal_time
from kubemill.core.model import (
    Action,
    ChildKind,
    CreateChild,
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeleteChild,
    DeleteJob,
    DeletePod,
    DeletePodGroup,
    DeleteService,
    Observed,
    ObservedPod,
    ReconcileResult,
    RecordEvent,
    RenderedFile,
    WriteFiles,
    content_digest,
)
from kubemill.core.policy import is_retryable_exit_code
from kubemill.core.quantity import sum_pod_requests
from kubemill.core.service import INTERRUPTED as SERVICE_INTERRUPTED
from kubemill.core.service import reconcile_service
from kubemill.frameworks.plan import (
    FileSet,
    ObservedPodView,
    Plan,
    ReplicaPlan,
    RunRecord,
    ServicePolicy,
    StatusView,
)

INTERRUPTED = SERVICE_INTERRUPTED
"""The Failed reason of a job stopped on request (:data:`~kubemill.api.STOP_ANNOTATION`)."""

OUTCOME_TIE = timedelta(seconds=1)
"""Replicas that finished within this of each other finished at the same time. Kubernetes
stamps ``finishedAt`` to the second, so closer finishes cannot be ordered there; locally the
same window applies, so both substrates judge a race alike (a failure wins a tie)."""

REPORT_GRACE = timedelta(seconds=1)
"""How long after an exit a substrate may take to report it (a watch event, a pidfd wake-up).
A success waits this long beyond ``OUTCOME_TIE`` while other replicas are still active, so a
failure in the tie window that is reported within this grace is still judged."""

GANG_SCHEDULERS = ("volcano", "scheduler-plugins")
"""The gang schedulers kubemill can create PodGroups for."""

_ACCESS_KINDS: tuple[ChildKind, ...] = ("ServiceAccount", "Role", "RoleBinding")
"""What a Plan's ``access`` becomes, in the order they are created."""

_ACTIVE_PHASES = frozenset({"Running", "Pending", "Unknown"})
"""Pods that may still be (or become) running: what deadline/backoff stop and what
``cleanPodPolicy: Running`` removes (a Pending pod turns Running once scheduled)."""


@dataclass(frozen=True)
class ReconcileOptions:
    """How the substrate that calls :func:`reconcile` is set up (not part of the job)."""

    gang_scheduler: str | None = None
    """``"volcano"``, ``"scheduler-plugins"`` or None. When set, every job gets a PodGroup
    (as upstream does whenever gang scheduling is enabled, schedulingPolicy or not) sized by
    ``schedulingPolicy.minAvailable`` (default: all replicas); with volcano, pods wait until
    the PodGroup has left the Pending phase (or has no phase yet), like upstream."""

    def __post_init__(self) -> None:
        if self.gang_scheduler is not None and self.gang_scheduler not in GANG_SCHEDULERS:
            raise ValueError(
                f"gang_scheduler: unknown scheduler {self.gang_scheduler!r}; "
                f"use one of {', '.join(GANG_SCHEDULERS)} or leave it unset"
            )


def reconcile(
    job: Job,
    plan: Plan,
    observed: Observed,
    now: datetime,
    *,
    options: ReconcileOptions = ReconcileOptions(),
) -> ReconcileResult:
    """Decide what to do for ``job`` now; ``job.status`` is the status last recorded.

    Pure: the same inputs always give the same result, and nothing outside is touched.
    A service cluster (``plan.service_cluster``: pods a controller keeps running) is
    judged by :func:`kubemill.core.service.reconcile_service` instead.
    """
    if plan.service_cluster is not None:
        return reconcile_service(job, plan, observed, now)
    return _Reconcile(job, plan, observed, now, options).run()


def short_name(replica_type: str, index: int) -> str:
    """How messages name a replica: ``worker-1`` (the CLI's ``--replica`` spelling)."""
    return f"{replica_type.lower()}-{index}"


def describe_failure(pod: ObservedPod) -> str:
    """One phrase on why a replica's pod ended: ``worker-1 exited with code 3``, then its
    termination message if it left one (a Spark driver's last log lines)."""
    who = short_name(pod.replica_type, pod.index)
    if pod.exit_code is not None:
        text = f"{who} exited with code {pod.exit_code}"
        text = f"{text} ({pod.reason})" if pod.reason else text
        return f"{text}: {pod.message.strip()}" if pod.message.strip() else text
    verb = "was lost" if pod.phase == "Unknown" else "failed"
    return f"{who} {verb}: {pod.reason}" if pod.reason else f"{who} {verb}"


def _count(counts: ReplicaStatus, pod: ObservedPod) -> None:
    """Count one pod as active, succeeded or failed by its phase (Pending counts as none)."""
    if pod.phase == "Running":
        counts.active += 1
    elif pod.phase == "Succeeded":
        counts.succeeded += 1
    elif pod.phase in ("Failed", "Unknown"):
        counts.failed += 1


def _digested(file: RenderedFile) -> list[object]:
    """What a file's digest covers: its name, content and mode, plus where its content
    comes from and its mounted names when those are set (so older digests stay valid)."""
    out: list[object] = [file.name, file.content, file.mode]
    if file.source is not None:
        out.append(repr(file.source))
    if file.paths:
        out.append(list(file.paths))
    return out


def _count_by_type(failures: Iterable[tuple[ReplicaPlan, ObservedPod]]) -> str:
    """``1 Worker`` or ``1 Worker and 2 PS`` for messages in upstream's shape."""
    counts: dict[str, int] = {}
    for rep, _ in failures:
        counts[rep.replica_type] = counts.get(rep.replica_type, 0) + 1
    return " and ".join(f"{n} {t}" for t, n in counts.items())


class _Reconcile:
    """One reconcile pass: accumulates actions on a private copy of the status."""

    def __init__(
        self, job: Job, plan: Plan, observed: Observed, now: datetime, options: ReconcileOptions
    ) -> None:
        self.job = job
        self.plan = plan
        self.observed = observed
        self.now = now
        self.options = options
        self.kind = job.KIND or plan.kind
        self.ref = f"{job.namespace}/{job.name}"
        self.run_policy = job.run_policy
        self.status = job.status.model_copy(deep=True)
        self.actions: list[Action] = []
        self.requeue: list[timedelta] = []
        in_plan = {rep.name for rep in plan.replicas}
        self.live: dict[str, ObservedPod] = {}
        """Pods of Plan replicas that are not being deleted, by name."""
        self.strays: list[ObservedPod] = []
        """Pods that are not (or no longer) in the Plan, e.g. after a scale-down."""
        self.vanishing: set[str] = set()
        """Names whose pod is being deleted: not judged, not recreated until gone."""
        self.foreign: list[ObservedPod] = []
        """Pods a replica created itself (Spark executors): counted, never judged or deleted."""
        for pod in sorted(observed.pods, key=lambda p: p.name):
            if pod.owner:
                self.foreign.append(pod)
            elif pod.deleting:
                self.vanishing.add(pod.name)
            elif pod.name in in_plan and pod.name not in self.live:
                self.live[pod.name] = pod
            else:
                self.strays.append(pod)
        self.retired_now: set[ObservedPod] = set()
        """Pods this pass deletes: their restarts have moved into ``self.retired``."""
        self.retired = self._settle_retired()
        """Restarts of each type's pods that are gone (``ReplicaStatus.retired_restarts``)."""
        self.run_record: RunRecord | None = None
        """What this pass decided for an application that runs as a whole."""

    # --- the pass ------------------------------------------------------------------------

    def run(self) -> ReconcileResult:
        self._ensure_created()
        stop_request = self.job.metadata.annotations.get(STOP_ANNOTATION)
        if self.plan.reruns is not None:
            self._application(stop_request)
        elif self.status.finished:
            self._finish(kill=frozenset())
        elif self.observed.halt is not None:
            self._record_counts(exclude=frozenset())
            self._fail(
                reason=self.observed.halt.reason,
                message=self.observed.halt.message,
                kill_active=True,
            )
        elif stop_request is not None:
            self._record_counts(exclude=frozenset())
            why = f": {stop_request}" if stop_request else ""
            self._fail(
                reason=INTERRUPTED,
                message=(
                    f"{self.kind} {self.ref} was stopped on request ({STOP_ANNOTATION}{why});"
                    " its active replicas were stopped."
                ),
                kill_active=True,
            )
        elif self.run_policy.suspend:
            self._suspend()
        else:
            self._resume_if_suspended()
            if self.status.start_time is None:
                self.status.start_time = self.now
            self._active()
        self._record_restarts()
        self._extend_status()
        return ReconcileResult(
            actions=tuple(self.actions),
            status=self.status,
            requeue_after=min(self.requeue) if self.requeue else None,
        )

    def _stop_message(self, stop_request: str | None) -> tuple[str, str] | None:
        """(reason, message) when the job must stop for good: a halted substrate or an
        interrupt (the same words as for every kind)."""
        if self.observed.halt is not None:
            return self.observed.halt.reason, self.observed.halt.message
        if stop_request is None:
            return None
        why = f": {stop_request}" if stop_request else ""
        return INTERRUPTED, (
            f"{self.kind} {self.ref} was stopped on request ({STOP_ANNOTATION}{why});"
            " its active replicas were stopped."
        )

    def _application(self, stop_request: str | None) -> None:
        """A job that runs again as a whole (``Plan.reruns``): the state machine of
        :mod:`kubemill.core.application` decides, this carries it out."""
        policy = self.plan.reruns
        assert policy is not None
        outcome = self.plan.outcome
        driver_rep = next(
            (r for r in self.plan.of_type(outcome.replica_type) if r.index == 0),
            self.plan.replicas[0],
        )
        record = policy.recorded(self.job.status)
        facts = application.Facts(
            driver_name=driver_rep.name,
            driver=self.live.get(driver_rep.name),
            driver_going=driver_rep.name in self.vanishing,
            refused="; ".join(f"{r.kind} {r.name}: {r.message}" for r in self.observed.refused),
            suspend=bool(self.run_policy.suspend),
            stop=self._stop_message(stop_request),
            uid=self.job.metadata.uid or f"{self.job.namespace}/{self.job.name}",
        )
        decided = application.step(record, policy, facts, self.now)
        new = decided.record
        if decided.submit and not (self._sync_pod_group() and self._earlier_stages_up(driver_rep)):
            # A gang scheduler has not admitted the group yet, or the replicas the driver
            # needs first (locally a standalone Master and Workers) are not up: no
            # submission this pass; their pods' changes wake the job again.
            decided = application.Step(record)
            new = record
        self.run_record = new
        state, before = new.state, record.state
        if facts.driver is not None and decided.stop_driver:
            self._delete_pod(facts.driver, decided.stop_driver)
        if before in application.TERMINAL and state not in application.TERMINAL:
            self._reopen()
        if state in (ApplicationStateType.SUSPENDING, ApplicationStateType.SUSPENDED):
            # Suspending stops every pod, as for every kind: the driver goes by the state
            # machine, the replicas it needs (a local standalone cluster) go here.
            for name, pod in sorted(self.live.items()):
                if name != driver_rep.name:
                    self._delete_pod(pod, "Suspended")
            for service in sorted(self.observed.services):
                self._delete_service(service)
            self._delete_pod_group()
        elif state not in application.TERMINAL:
            self._remove_strays()
            self._sync_children()
            # The replicas besides the driver (none on Kubernetes; locally a standalone
            # Master and Workers) serve every run: created once, kept across re-runs.
            self._create_missing(exclude=frozenset({driver_rep.name}))
        if decided.submit:
            if self.status.start_time is None:
                self.status.start_time = self.now
            self.actions.append(CreatePod(driver_rep.name))
            self._event("Normal", "SuccessfulCreatePod", f"Created pod: {driver_rep.name}")
        self._record_counts(exclude=frozenset())
        self._application_conditions(record, decided)
        if decided.delete_job:
            self.actions.append(DeleteJob())
            ttl = policy.time_to_live.total_seconds() if policy.time_to_live else 0
            self._event(
                "Normal",
                "TTLExpired",
                f"{self.kind} {self.ref} terminated {ttl:g}s ago (its time to live): deleting it.",
            )
        if decided.requeue is not None:
            self.requeue.append(decided.requeue)

    def _application_conditions(self, record: RunRecord, decided: application.Step) -> None:
        """The common conditions and an event for the application's new state."""
        new = decided.record
        state, before = new.state, record.state
        S = ApplicationStateType
        what = f"{self.kind} {self.ref}"
        if state != before:
            warn = state in (S.FAILING, S.FAILED, S.SUBMISSION_FAILED, S.UNKNOWN)
            words = state.value.lower().replace("_", " ")
            detail = f": {new.error}" if new.error and warn else ""
            self._event(
                "Warning" if warn else "Normal",
                f"{self.kind}{state.value.title().replace('_', '')}",
                f"{what} is {words}{detail}.",
            )
        suspended = (S.SUSPENDING, S.SUSPENDED)
        if before in suspended and state not in suspended:
            self._condition(
                ConditionType.SUSPENDED, "False", "Resumed", f"{what} is resumed.", event=False
            )
            self.status.start_time = self.now
        if state == S.RUNNING:
            self._condition(
                ConditionType.RUNNING, "True", "Running", f"{what} is running.", event=False
            )
        elif state in (S.PENDING_RERUN, S.INVALIDATING):
            why = "its spec changed" if state == S.INVALIDATING else "it runs again"
            set_condition(
                self.status,
                ConditionType.RESTARTING,
                "True",
                reason=f"{self.kind}Restarting",
                message=f"{what} is restarting: {why}.",
                now=self.now,
            )
        elif state in (S.SUCCEEDING, S.FAILING, S.SUBMISSION_FAILED):
            # The run has ended (or never started): it is not running while the machine
            # decides what follows (a retry interval may be long).
            if self.status.is_true(ConditionType.RUNNING):
                words = state.value.lower().replace("_", " ")
                self._condition(
                    ConditionType.RUNNING, "False", "Ended", f"{what} is {words}.", event=False
                )
        elif state in suspended:
            message = f"{what} is suspended."
            if self.status.is_true(ConditionType.RUNNING):
                self._condition(ConditionType.RUNNING, "False", "Suspended", message, event=False)
            self._condition(ConditionType.SUSPENDED, "True", "Suspended", message, event=False)
            for rs in self.status.replica_statuses.values():
                rs.active = 0
        elif state == S.COMPLETED and not self.status.finished:
            self.status.completion_time = new.terminated or self.now
            self._condition(
                ConditionType.SUCCEEDED,
                "True",
                "Succeeded",
                f"{what} successfully completed.",
                event=False,
            )
        elif state == S.FAILED and not self.status.finished:
            self.status.completion_time = new.terminated or self.now
            set_condition(
                self.status,
                ConditionType.FAILED,
                "True",
                reason=decided.reason or f"{self.kind}Failed",
                message=new.error or f"{what} failed.",
                now=self.now,
            )
        if state in application.TERMINAL:
            self._delete_pod_group()

    def _reopen(self) -> None:
        """A finished application runs again (its spec changed): the verdict is withdrawn.

        Succeeded and Failed are terminal for :func:`set_condition`, so they are turned
        False here, the one place a verdict is ever withdrawn.
        """
        reopened = []
        for cond in self.status.conditions:
            verdict = cond.type in (ConditionType.SUCCEEDED, ConditionType.FAILED)
            if verdict and cond.status == "True":
                cond = cond.model_copy(
                    update={
                        "status": "False",
                        "reason": f"{self.kind}Rerun",
                        "last_update_time": self.now,
                        "last_transition_time": self.now,
                    }
                )
            reopened.append(cond)
        self.status.conditions = reopened
        self.status.completion_time = None

    def _active(self) -> None:
        permanent: list[tuple[ReplicaPlan, ObservedPod]] = []
        retry: list[tuple[ReplicaPlan, ObservedPod]] = []
        for rep in self.plan.replicas:
            pod = self.live.get(rep.name)
            if pod is None or pod.phase not in ("Failed", "Unknown"):
                continue
            if self._retryable(rep.restart_policy, pod):
                retry.append((rep, pod))
            else:
                permanent.append((rep, pod))

        met, success_at = self._success_met()
        if met and not self._failure_ties(permanent, success_at):
            self._record_counts(exclude=frozenset())
            settled = self._settled_at(success_at)
            if settled is None:
                self._succeed()
            else:
                # Another replica could still fail within the tie window of this success;
                # its failure would win, so the verdict waits (at most OUTCOME_TIE).
                self.requeue.append(settled - self.now)
            return
        if permanent:
            self._record_counts(exclude=frozenset())
            details = "; ".join(describe_failure(pod) for _, pod in permanent)
            self._fail(
                reason=f"{self.kind}Failed",
                message=(
                    f"{self.kind} {self.ref} is failed because "
                    f"{_count_by_type(permanent)} replica(s) failed: {details}."
                ),
                kill_active=False,
            )
            return

        self._note_in_place_restarts()
        limit = self.run_policy.backoff_limit
        if limit is not None and sum(self._restarts().values()) + len(retry) > limit:
            self._record_counts(exclude=frozenset())
            culprits = [pod for _, pod in retry] or [
                pod for pod in self._existing_pods() if pod.restart_count > 0
            ]
            details = "; ".join(describe_failure(pod) for pod in culprits)
            self._fail(
                reason="BackoffLimitExceeded",
                message=(
                    f"{self.kind} {self.ref} has failed because it has reached the specified "
                    f"backoff limit ({limit} restarts): {details}."
                ),
                kill_active=True,
            )
            return
        deadline = self._deadline()
        if deadline is not None and self.now >= deadline:
            self._record_counts(exclude=frozenset())
            self._fail(
                reason="DeadlineExceeded",
                message=(
                    f"{self.kind} {self.ref} has failed because it was active longer than the "
                    f"specified deadline ({self.run_policy.active_deadline_seconds}s)."
                ),
                kill_active=True,
            )
            return
        if deadline is not None:
            self.requeue.append(deadline - self.now)

        self._restart(retry)
        self._remove_strays()
        self._record_counts(exclude=frozenset(pod.name for _, pod in retry))
        self._sync_children()
        if self._sync_pod_group():
            self._create_missing()
        if not retry and self._all_up():
            self._condition(
                ConditionType.RUNNING, "True", "Running", f"{self.kind} {self.ref} is running."
            )
        self._judge_readiness()

    # --- rules -----------------------------------------------------------------------------

    @staticmethod
    def _retryable(policy: RestartPolicy, pod: ObservedPod) -> bool:
        if policy == RestartPolicy.NEVER:
            return False
        if policy == RestartPolicy.EXIT_CODE:
            return is_retryable_exit_code(pod.exit_code)
        # OnFailure/Always restart in place; a pod that still ended Failed (evicted, lost)
        # is recreated, as upstream does.
        return True

    def _success_met(self) -> tuple[bool, datetime | None]:
        """Whether the success policy is met, and when it was (None: a time is unknown).

        Never for a service: it has no success, only readiness (:meth:`_judge_readiness`).
        """
        policy = self.plan.outcome
        if isinstance(policy, ServicePolicy):
            return False, None
        replicas = self.plan.of_type(policy.replica_type)
        done = [
            pod
            for rep in replicas
            if (pod := self.live.get(rep.name)) is not None and pod.phase == "Succeeded"
        ]
        if policy.require == "first":
            deciding = [pod for pod in done if pod.index == 0]
        elif policy.require == "all":
            deciding = done if replicas and len(done) == len(replicas) else []
        else:
            # "any": met as soon as the earliest one finished.
            deciding = sorted(done, key=lambda p: (p.finished is None, p.finished or self.now))[:1]
        if not deciding:
            return False, None
        times = [pod.finished for pod in deciding]
        if any(t is None for t in times):
            return True, None
        return True, max(t for t in times if t is not None)

    @staticmethod
    def _failure_ties(
        permanent: list[tuple[ReplicaPlan, ObservedPod]], success_at: datetime | None
    ) -> bool:
        """Whether a permanent failure finished before the success, or too close to tell.

        Judged by the times the replicas finished, not by the order they were observed
        in, so the verdict does not depend on which exit a substrate happened to see
        first. A time that is unknown cannot be ordered: a tie, and a failure wins a tie.
        """
        for _, pod in permanent:
            if pod.finished is None or success_at is None:
                return True
            if pod.finished <= success_at + OUTCOME_TIE:
                return True
        return False

    def _settled_at(self, success_at: datetime | None) -> datetime | None:
        """When a success can be declared, if that is later than now (None: now).

        Until ``OUTCOME_TIE`` after the success, a replica that is still active may yet
        fail in a tie with it, and its exit may take ``REPORT_GRACE`` to be reported; once
        every other replica has finished, or that time has passed, nothing observed later
        can change the verdict. Host-only replicas (MPI's workers) are not waited for: they
        run nothing of their own, so only their clients' exits (the launcher's) have a
        result to report, and a host still up when its client succeeded is the usual end.
        """
        if success_at is None:
            return None
        settled = success_at + OUTCOME_TIE + REPORT_GRACE
        if self.now >= settled:
            return None
        hosts = {rep.name for rep in self.plan.replicas if rep.host_only}
        if any(
            pod.phase in ("Running", "Pending") and name not in hosts
            for name, pod in self.live.items()
        ):
            return settled
        return None

    def _deadline(self) -> datetime | None:
        seconds = self.run_policy.active_deadline_seconds
        if seconds is None or self.status.start_time is None:
            return None
        return self.status.start_time + timedelta(seconds=seconds)

    def _all_up(self) -> bool:
        """Every replica has a pod that is Running or already Succeeded, one at least Running."""
        phases = [
            pod.phase if (pod := self.live.get(rep.name)) is not None else "Missing"
            for rep in self.plan.replicas
        ]
        return "Running" in phases and all(p in ("Running", "Succeeded") for p in phases)

    # --- transitions -----------------------------------------------------------------------

    def _ensure_created(self) -> None:
        if self.status.condition(ConditionType.CREATED) is None:
            self._condition(
                ConditionType.CREATED, "True", "Created", f"{self.kind} {self.ref} is created."
            )

    def _succeed(self) -> None:
        if self.status.completion_time is None:
            self.status.completion_time = self.now
        self._condition(
            ConditionType.SUCCEEDED,
            "True",
            "Succeeded",
            f"{self.kind} {self.ref} successfully completed.",
        )
        self._finish(kill=frozenset())

    def _fail(self, *, reason: str, message: str, kill_active: bool) -> None:
        if self.status.completion_time is None:
            self.status.completion_time = self.now
        kill: frozenset[str] = frozenset()
        if kill_active:
            kill = frozenset(
                pod.name for pod in self._existing_pods() if pod.phase in _ACTIVE_PHASES
            )
            for rs in self.status.replica_statuses.values():
                rs.active = 0
        if set_condition(
            self.status, ConditionType.FAILED, "True", reason=reason, message=message, now=self.now
        ):
            self._event("Warning", reason, message)
        self._finish(kill=kill)

    def _finish(self, *, kill: frozenset[str]) -> None:
        """Clean up after the verdict: cleanPodPolicy, PodGroup, then the TTL."""
        policy = self.run_policy.clean_pod_policy or CleanPodPolicy.NONE
        kept: set[str] = set()
        deleted: set[str] = set()
        for pod in self._existing_pods():
            if pod.name in kill:
                self._delete_pod(pod, "stopped: the job failed")
                deleted.add(pod.name)
            elif policy == CleanPodPolicy.ALL or (
                policy == CleanPodPolicy.RUNNING and pod.phase in _ACTIVE_PHASES
            ):
                self._delete_pod(pod, f"cleanPodPolicy {policy.value}")
                deleted.add(pod.name)
            else:
                kept.add(pod.name)
        # A pod and its service share a name. Under None, only services of pods stopped
        # just now go (upstream deletes nothing); otherwise a service lives only as long
        # as the pod it fronts is kept.
        for service in sorted(self.observed.services):
            if (policy == CleanPodPolicy.NONE and service in deleted) or (
                policy != CleanPodPolicy.NONE and service not in kept
            ):
                self._delete_service(service)
        self._delete_pod_group()
        if self.status.is_true(ConditionType.SUCCEEDED):
            # As upstream: replicas still active when the job succeeded count as succeeded.
            for rs in self.status.replica_statuses.values():
                rs.succeeded += rs.active
                rs.active = 0
        self._expire()

    def _expire(self) -> None:
        ttl = self.run_policy.ttl_seconds_after_finished
        finished_at = terminal_time(self.status)
        if ttl is None or finished_at is None:
            return
        expiry = finished_at + timedelta(seconds=ttl)
        if self.now >= expiry:
            self.actions.append(DeleteJob())
            self._event(
                "Normal",
                "TTLExpired",
                f"{self.kind} {self.ref} finished {ttl}s ago "
                "(ttlSecondsAfterFinished): deleting it.",
            )
        else:
            self.requeue.append(expiry - self.now)

    def _suspend(self) -> None:
        for pod in self._existing_pods():
            self._delete_pod(pod, "the job is suspended")
        for service in sorted(self.observed.services):
            self._delete_service(service)
        self._delete_pod_group()
        for rs in self.status.replica_statuses.values():
            rs.active = 0
        message = f"{self.kind} {self.ref} is suspended."
        if self.status.is_true(ConditionType.RUNNING):
            self._condition(ConditionType.RUNNING, "False", "Suspended", message, event=False)
        if not self.status.is_true(ConditionType.SUSPENDED):
            self._condition(ConditionType.SUSPENDED, "True", "Suspended", message)

    def _resume_if_suspended(self) -> None:
        if self.status.is_true(ConditionType.SUSPENDED):
            self._condition(
                ConditionType.SUSPENDED, "False", "Resumed", f"{self.kind} {self.ref} is resumed."
            )
            self.status.start_time = self.now

    def _note_in_place_restarts(self) -> None:
        """One event per replica type whose pods restarted in place since the last status."""
        recorded = self.status.replica_statuses
        for rtype, count in self._live_restarts().items():
            old = recorded.get(rtype)
            # What the last status counted for the pods alive now: _settle_retired has
            # already moved the restarts of pods that vanished since into the retired part.
            seen = old.restarts - self.retired.get(rtype, 0) if old is not None else 0
            if count <= seen:
                continue
            pods = [
                pod
                for pod in self._existing_pods()
                if pod.replica_type == rtype and pod.restart_count > 0
            ]
            details = "; ".join(
                f"{describe_failure(pod)}, restarted in place ({pod.restart_count} restarts)"
                for pod in pods
            )
            self._event(
                "Warning",
                f"{self.kind}Restarting",
                f"{self.kind} {self.ref}: {rtype} replica(s) restarted: {details}.",
            )

    def _restart(self, retry: list[tuple[ReplicaPlan, ObservedPod]]) -> None:
        """Delete retryable failures; a later reconcile creates them again once gone."""
        if not retry:
            return
        for _, pod in retry:
            self._delete_pod(pod, f"restarting: {describe_failure(pod)}", recreate=True)
        details = "; ".join(describe_failure(pod) for _, pod in retry)
        message = (
            f"{self.kind} {self.ref} is restarting because "
            f"{_count_by_type(retry)} replica(s) failed: {details}."
        )
        reason = f"{self.kind}Restarting"
        set_condition(
            self.status,
            ConditionType.RESTARTING,
            "True",
            reason=reason,
            message=message,
            now=self.now,
        )
        # Each recreation is a new decision, so it gets its event even when the job was
        # already Restarting (the DeletePod next to it keeps the pass non-idempotent anyway).
        self._event("Warning", reason, message)

    def _remove_strays(self) -> None:
        in_plan = {rep.name for rep in self.plan.replicas} | self._exposed_names()
        for pod in self.strays:
            self._delete_pod(pod, "not part of the job any more")
        stray_pods = {pod.name for pod in self.strays}
        for service in sorted(self.observed.services):
            if service not in in_plan or service in stray_pods:
                self._delete_service(service)

    def _sync_pod_group(self) -> bool:
        """Create the PodGroup when gang scheduling is on; False while pods must wait."""
        scheduler = self.options.gang_scheduler
        if scheduler is None:
            return True
        group = self.observed.pod_group
        if group is None:
            self._create_pod_group(scheduler)
        if scheduler == "volcano":
            # Volcano admits a group by moving it out of Pending; creating pods before
            # that only leaves them unschedulable (upstream waits the same way).
            return group is not None and group.phase not in ("", "Pending")
        return True

    def _create_pod_group(self, scheduler: str) -> None:
        policy = self.run_policy.scheduling_policy
        min_member = len(self.plan.replicas)
        queue = "default" if scheduler == "volcano" else None
        priority_class: str | None = None
        timeout: int | None = None
        min_resources: tuple[tuple[str, str], ...] | None = None
        if policy is not None:
            if policy.min_available is not None:
                min_member = policy.min_available
            queue = policy.queue or queue
            priority_class = policy.priority_class or None
            timeout = policy.schedule_timeout_seconds
            if policy.min_resources is not None:
                min_resources = tuple(sorted((k, str(v)) for k, v in policy.min_resources.items()))
        if min_resources is None:
            min_resources = sum_pod_requests(
                [rep.template.spec for rep in self.plan.replicas], first=min_member
            )
        name = self.job.name
        self.actions.append(
            CreatePodGroup(
                name=name,
                min_member=min_member,
                queue=queue,
                priority_class=priority_class,
                min_resources=min_resources,
                schedule_timeout_seconds=timeout,
            )
        )
        self._event(
            "Normal",
            "SuccessfulCreatePodGroup",
            f"Created PodGroup: {name} (minMember {min_member})",
        )

    def _create_services(self) -> None:
        """The per-replica and exposed services that are missing."""
        wanted = [rep.name for rep in self.plan.replicas] if self.plan.services else []
        wanted += [service.name for service in self.plan.exposed]
        for name in wanted:
            if name not in self.observed.services:
                self.actions.append(CreateService(name))
                self._event("Normal", "SuccessfulCreateService", f"Created service: {name}")

    def _create_missing(self, *, exclude: frozenset[str] = frozenset()) -> None:
        """Create the replicas that have no pod, stage by stage (``exclude``: those the
        caller creates itself, e.g. an application's driver, submitted by its state machine)."""
        self._create_services()
        order = sorted(enumerate(self.plan.replicas), key=lambda item: (item[1].stage, item[0]))
        for _, rep in order:
            if rep.name in self.live or rep.name in self.vanishing or rep.name in exclude:
                continue
            if not self._earlier_stages_up(rep):
                continue
            self.actions.append(CreatePod(rep.name))
            self._event("Normal", "SuccessfulCreatePod", f"Created pod: {rep.name}")

    def _earlier_stages_up(self, rep: ReplicaPlan) -> bool:
        """Every replica of an earlier stage is Running (and ready, under a ready gate)."""
        ready_gate = self.plan.start_gate == "ready"
        for other in self.plan.replicas:
            if other.stage >= rep.stage:
                continue
            pod = self.live.get(other.name)
            if pod is None or pod.phase != "Running" or (ready_gate and not pod.ready):
                return False
        return True

    def _exposed_names(self) -> set[str]:
        return {service.name for service in self.plan.exposed}

    def _sync_children(self) -> None:
        """Files, per-job access and network policies exist, with current content, before
        the pods need them.

        A FileSet whose rendered content differs from the digest the substrate recorded is
        rewritten in place (a hostfile as workers come and go); children the Plan no longer
        has are deleted. They stay while the job is suspended or finished (the pods that
        are kept may still read them) and go with the job itself.
        """
        seen = {(child.kind, child.name): child.digest for child in self.observed.children}
        wanted: set[tuple[ChildKind, str]] = set()
        for file_set in self.plan.files:
            kind: ChildKind = "Secret" if file_set.secret else "ConfigMap"
            wanted.add((kind, file_set.name))
            files = self._render_files(file_set)
            digest = content_digest([_digested(f) for f in files])
            if (kind, file_set.name) not in seen:
                self.actions.append(
                    WriteFiles(
                        file_set.name,
                        files,
                        digest=digest,
                        secret=file_set.secret,
                        secret_type=file_set.secret_type,
                    )
                )
                self._event("Normal", f"SuccessfulCreate{kind}", f"Created {kind}: {file_set.name}")
            elif seen[(kind, file_set.name)] != digest:
                # No event: a listing changes whenever a replica comes or goes.
                self.actions.append(
                    WriteFiles(
                        file_set.name,
                        files,
                        digest=digest,
                        secret=file_set.secret,
                        update=True,
                        secret_type=file_set.secret_type,
                    )
                )
        access = self.plan.access
        if access is not None:
            for kind in _ACCESS_KINDS:
                wanted.add((kind, access.name))
                if (kind, access.name) not in seen:
                    self.actions.append(CreateChild(kind, access.name))
                    self._event(
                        "Normal", f"SuccessfulCreate{kind}", f"Created {kind}: {access.name}"
                    )
        for policy in self.plan.network_policies:
            wanted.add(("NetworkPolicy", policy.name))
            if ("NetworkPolicy", policy.name) not in seen:
                self.actions.append(CreateChild("NetworkPolicy", policy.name))
                self._event(
                    "Normal",
                    "SuccessfulCreateNetworkPolicy",
                    f"Created NetworkPolicy: {policy.name}",
                )
        for kind, name in sorted(set(seen) - wanted):
            self.actions.append(DeleteChild(kind, name))
            self._event("Normal", f"SuccessfulDelete{kind}", f"Deleted {kind}: {name}")

    def _render_files(self, file_set: FileSet) -> tuple[RenderedFile, ...]:
        """The files of a set, with host listings written from the running replicas."""
        out: list[RenderedFile] = []
        for file in file_set.files:
            content = file.content
            listing = file.listing
            if listing is not None:
                lines = [listing.header] if listing.header else []
                for rep in self.plan.of_type(listing.replica_type):
                    pod = self.live.get(rep.name)
                    if pod is not None and pod.phase == "Running":
                        lines.append(
                            listing.line.format(host=rep.host or rep.name, index=rep.index)
                        )
                content = "".join(f"{line}\n" for line in lines)
            out.append(RenderedFile(file.name, content, file.mode, file.source, file.paths))
        return tuple(out)

    def _judge_readiness(self) -> None:
        """A service is Ready while enough of its serving replicas are up and ready."""
        policy = self.plan.outcome
        if not isinstance(policy, ServicePolicy):
            return
        counts = []
        enough = True
        for replica_type, needed in policy.needed:
            ready = sum(
                1
                for rep in self.plan.of_type(replica_type)
                if (pod := self.live.get(rep.name)) is not None
                and pod.phase == "Running"
                and pod.ready
            )
            enough = enough and ready >= needed
            counts.append(f"{ready} of {needed} {replica_type} replica(s) needed are ready")
        counted = ", ".join(counts)
        if enough:
            self._condition(
                ConditionType.READY, "True", "Ready", f"{self.kind} {self.ref} is ready: {counted}."
            )
        elif self.status.condition(ConditionType.READY) is not None:
            self._condition(
                ConditionType.READY,
                "False",
                "NotReady",
                f"{self.kind} {self.ref} is not ready: {counted}.",
            )

    def _extend_status(self) -> None:
        """The kind's own status fields, from what this pass decided (e.g. Spark's state)."""
        extension = self.plan.status_extension
        if extension is None:
            return
        pods = tuple(
            ObservedPodView(
                name=pod.name,
                replica_type=pod.replica_type,
                index=pod.index,
                phase=pod.phase,
                ready=pod.ready,
                owner=pod.owner,
            )
            for pod in sorted(self.observed.pods, key=lambda p: p.name)
        )
        fields = extension(
            StatusView(
                job=self.job,
                plan=self.plan,
                status=self.status,
                pods=pods,
                run=self.run_record,
                cluster_ips=self.observed.cluster_ips,
            )
        )
        model_fields = type(self.status).model_fields
        unknown = sorted(name for name in fields if name not in model_fields)
        if unknown:
            raise ValueError(
                f"{self.kind}: the status extension sets {', '.join(unknown)}, which "
                f"{type(self.status).__name__} does not declare"
            )
        for name, value in fields.items():
            setattr(self.status, name, value)

    # --- bookkeeping -----------------------------------------------------------------------

    def _record_counts(self, *, exclude: frozenset[str]) -> None:
        """Recount active/succeeded/failed per type from the live pods (upstream recounts
        every pass too); ``exclude`` names pods being recreated, which count as neither.
        Restarts are left to :meth:`_record_restarts`, which every pass ends with."""
        previous = self.status.replica_statuses
        types = [t for t in self.job.REPLICA_TYPES if t in self.job.replica_specs]
        types += [t for t in self.job.replica_specs if t not in types]
        types += [rep.replica_type for rep in self.plan.replicas if rep.replica_type not in types]
        statuses: dict[str, ReplicaStatus] = {}
        for rtype in dict.fromkeys(types):
            old = previous.get(rtype)
            statuses[rtype] = ReplicaStatus(
                label_selector=old.label_selector if old is not None else None,
                selector=old.selector if old is not None else None,
            )
        for rep in self.plan.replicas:
            pod = self.live.get(rep.name)
            if pod is None or pod.name in exclude:
                continue
            _count(statuses[rep.replica_type], pod)
        for foreign in self.plan.foreign:
            owners = {rep.name for rep in self.plan.of_type(foreign.owner_type)}
            rs = statuses.setdefault(foreign.replica_type, ReplicaStatus())
            for pod in self.foreign:
                if pod.owner in owners:
                    _count(rs, pod)
        for rtype, old in previous.items():
            statuses.setdefault(rtype, old)
        self.status.replica_statuses = statuses

    def _live_restarts(self) -> dict[str, int]:
        """In-place restarts per type of the pods that exist and are not being deleted."""
        counts: dict[str, int] = {}
        for pod in self._existing_pods():
            if pod not in self.retired_now:
                counts[pod.replica_type] = counts.get(pod.replica_type, 0) + pod.restart_count
        return counts

    def _restarts(self) -> dict[str, int]:
        """Restarts per type as counted against backoffLimit: retired plus live."""
        live = self._live_restarts()
        return {t: self.retired.get(t, 0) + live.get(t, 0) for t in {*self.retired, *live}}

    def _settle_retired(self) -> dict[str, int]:
        """The retired restarts of the last status, plus any that vanished without the core.

        The last status said ``restarts = retired + in-place restarts of the pods then
        live``. When the live pods now show fewer, pods went away without the core deleting
        them (kubectl delete, a node lost, a pod someone else is deleting) or the status was
        written before ``retiredRestarts`` existed: that shortfall is retired so that the
        total never goes down.
        """
        live = self._live_restarts()
        retired: dict[str, int] = {}
        for rtype, rs in self.status.replica_statuses.items():
            vanished = rs.restarts - rs.retired_restarts - live.get(rtype, 0)
            retired[rtype] = max(rs.retired_restarts, 0) + max(vanished, 0)
        return retired

    def _record_restarts(self) -> None:
        """Write restarts and retired restarts of every type into the status: last step
        of every pass, after all deletions, so each finished pass leaves
        ``restarts == retired_restarts + in-place restarts of the pods left alive``."""
        statuses = self.status.replica_statuses
        for rtype, count in sorted(self._restarts().items()):
            rs = statuses.get(rtype)
            if rs is None:
                if count == 0:
                    continue
                rs = statuses[rtype] = ReplicaStatus()
            rs.restarts = count
            rs.retired_restarts = self.retired.get(rtype, 0)

    def _existing_pods(self) -> list[ObservedPod]:
        """Every pod of the job that is not already being deleted, by name."""
        return sorted([*self.live.values(), *self.strays], key=lambda p: p.name)

    def _condition(
        self,
        kind: ConditionType,
        value: ConditionStatus,
        reason_suffix: str,
        message: str,
        *,
        event: bool = True,
    ) -> None:
        reason = f"{self.kind}{reason_suffix}"
        changed = set_condition(
            self.status, kind, value, reason=reason, message=message, now=self.now
        )
        if changed and event:
            self._event("Normal", reason, message)

    def _delete_pod(self, pod: ObservedPod, reason: str, *, recreate: bool = False) -> None:
        """The one way the core deletes a pod, so every deletion keeps the pod's restarts.

        The pod's in-place restarts move into the retired count of its type, plus one when
        it is deleted to be created again (``recreate``): that recreation is a restart.
        """
        if pod not in self.retired_now:
            self.retired_now.add(pod)
            self.retired[pod.replica_type] = (
                self.retired.get(pod.replica_type, 0) + pod.restart_count + int(recreate)
            )
        self.actions.append(DeletePod(pod.name, reason=reason))
        self._event("Normal", "SuccessfulDeletePod", f"Deleted pod: {pod.name} ({reason})")

    def _delete_service(self, name: str) -> None:
        self.actions.append(DeleteService(name))
        self._event("Normal", "SuccessfulDeleteService", f"Deleted service: {name}")

    def _delete_pod_group(self) -> None:
        group = self.observed.pod_group
        if group is not None:
            self.actions.append(DeletePodGroup(group.name))
            self._event("Normal", "SuccessfulDeletePodGroup", f"Deleted PodGroup: {group.name}")

    def _event(self, kind: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.actions.append(RecordEvent(type=kind, reason=reason, message=message))
