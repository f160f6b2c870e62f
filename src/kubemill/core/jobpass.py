"""One reconcile pass over a job's pods and children: what every lifecycle of pods shares.

:class:`JobPass` sorts what the substrate observed (the Plan's live pods, strays, pods
being deleted, foreign pods a replica made), and keeps the books every lifecycle keeps the
same way: files, per-job access and network policies (:meth:`JobPass._sync_children`),
services and the PodGroup, missing pods stage by stage, replica counts and restarts,
conditions and events, and the kind's own status fields (the status extension). The
replica-set lifecycle (:mod:`kubemill.core.replicaset`) and the re-run lifecycle
(:mod:`kubemill.core.rerun`) subclass it with their rules.

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

A replica run through a child controller (``ReplicaPlan.controller``: a Ray job's
submitter) is the exception: its failures count against its controller's own
``backoff_limit``, and when the core deletes it for a fresh start (suspend, a retry of the
whole run: ``anew``) a new controller takes its place, with its full limit, as a new
Kubernetes Job (KubeRay's new submitter Job) has. Its restarts are then forgotten, not
retired: they were the controller's, which is gone.

A restart is allowed while the total stays <= ``backoffLimit``: ``backoffLimit: 2``
permits two restarts and the failure that would need a third fails the job. A restart the
core refuses is not counted.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from kubemill.api import STOP_ANNOTATION, ConditionType, Job, ReplicaStatus
from kubemill.core.conditions import ConditionStatus, set_condition
from kubemill.core.lifecycle import INTERRUPTED, ReconcileOptions
from kubemill.core.model import (
    Action,
    ChildKind,
    CreateChild,
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeleteChild,
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
from kubemill.core.progress import trainer_status
from kubemill.core.quantity import sum_pod_requests
from kubemill.core.status_fields import current_report, extend_status
from kubemill.frameworks.plan import (
    FileSet,
    Plan,
    ReplicaPlan,
    RunRecord,
)
from kubemill.frameworks.remote import Attempts

_ACCESS_KINDS: tuple[ChildKind, ...] = ("ServiceAccount", "Role", "RoleBinding")
"""What a Plan's ``access`` becomes, in the order they are created."""


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


class JobPass:
    """One reconcile pass over a job's pods and children, whatever its lifecycle:
    accumulates actions on a private copy of the status. A lifecycle subclasses it with
    its rules (:meth:`decide`)."""

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
        """What this pass decided for an application that runs as a whole (the re-run
        lifecycle's record, handed to the status extension)."""
        self.report = current_report(plan, observed)
        """The remote run's report this pass judges (:func:`current_report`)."""
        self.attempts: Attempts | None = None
        """The whole run's attempts as this pass counts them (a Plan with ``retry``)."""
        if plan.retry is not None:
            recorded = plan.retry.recorded(job.status)
            # Retrying lasts while the failed attempt's pods are still going.
            self.attempts = Attempts(
                failed=recorded.failed,
                succeeded=recorded.succeeded,
                retrying=recorded.retrying and bool(self.vanishing),
            )

    # --- the pass ------------------------------------------------------------------------

    def decide(self) -> None:
        """The lifecycle's rules: what to do after ``Created`` (a subclass says)."""
        raise NotImplementedError

    def run(self) -> ReconcileResult:
        """The whole pass: ``Created``, the lifecycle's rules, then the books every
        lifecycle closes the same way (restarts, the kind's own status fields)."""
        self._ensure_created()
        self.decide()
        self._record_restarts()
        self._record_progress()
        self._extend_status()
        return ReconcileResult(
            actions=tuple(self.actions),
            status=self.status,
            requeue_after=min(self.requeue) if self.requeue else None,
        )

    @property
    def stop_request(self) -> str | None:
        """The ``kubemill.dev/stop`` annotation's value (None: no stop asked for)."""
        return self.job.metadata.annotations.get(STOP_ANNOTATION)

    def _stop_message(self) -> tuple[str, str] | None:
        """(reason, message) when the job must stop for good: a halted substrate or an
        interrupt (the same words as for every kind)."""
        if self.observed.halt is not None:
            return self.observed.halt.reason, self.observed.halt.message
        stop_request = self.stop_request
        if stop_request is None:
            return None
        why = f": {stop_request}" if stop_request else ""
        return INTERRUPTED, (
            f"{self.kind} {self.ref} was stopped on request ({STOP_ANNOTATION}{why});"
            " its active replicas were stopped."
        )

    def _ensure_created(self) -> None:
        if self.status.condition(ConditionType.CREATED) is None:
            self._condition(
                ConditionType.CREATED, "True", "Created", f"{self.kind} {self.ref} is created."
            )

    # --- children --------------------------------------------------------------------------

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
        """Every replica of an earlier stage is Running (and ready, under a ready gate), or
        under a succeeded gate has Succeeded (a step that must finish first)."""
        gate = self.plan.start_gate
        for other in self.plan.replicas:
            if other.stage >= rep.stage:
                continue
            pod = self.live.get(other.name)
            if pod is None:
                return False
            if gate == "succeeded":
                if pod.phase != "Succeeded":
                    return False
            elif pod.phase != "Running" or (gate == "ready" and not pod.ready):
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

    def _record_progress(self) -> None:
        """The program's progress reports into ``trainerStatus``, at the bounded rate
        (:mod:`kubemill.core.progress`); a held-back report asks for a pass when it is due."""
        status, wait = trainer_status(
            self.status.trainer_status,
            self.observed.progress,
            [rep.name for rep in self.plan.replicas],
            self.now,
            interval=self.options.progress_interval,
            final=self.status.finished,
        )
        self.status.trainer_status = status
        if wait is not None:
            self.requeue.append(wait)

    def _extend_status(self) -> None:
        """The kind's own status fields, from what this pass decided (e.g. Spark's state)."""
        extend_status(
            self.job,
            self.plan,
            self.status,
            self.observed,
            run=self.run_record,
            attempts=self.attempts,
        )

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

    def _delete_pod(
        self, pod: ObservedPod, reason: str, *, recreate: bool = False, anew: bool = False
    ) -> None:
        """The one way the core deletes a pod, so every deletion keeps the pod's restarts.

        The pod's in-place restarts move into the retired count of its type, plus one when
        it is deleted to be created again (``recreate``): that recreation is a restart.
        ``anew``: the job starts afresh (suspend, a retry of the whole run), so a replica run
        through a child controller gets a new controller and its failures are forgotten.
        """
        if pod not in self.retired_now:
            self.retired_now.add(pod)
            if anew and self._controlled(pod):
                if all(r.controller is not None for r in self.plan.of_type(pod.replica_type)):
                    # The type is its controllers' alone: every failure retired so far
                    # (locally, a process the core created again) was theirs.
                    self.retired[pod.replica_type] = 0
            else:
                self.retired[pod.replica_type] = (
                    self.retired.get(pod.replica_type, 0) + pod.restart_count + int(recreate)
                )
        self.actions.append(DeletePod(pod.name, reason=reason))
        self._event("Normal", "SuccessfulDeletePod", f"Deleted pod: {pod.name} ({reason})")

    def _controlled(self, pod: ObservedPod) -> bool:
        """Whether the pod is a replica run through a child controller."""
        return any(rep.controller is not None for rep in self.plan.replicas if rep.name == pod.name)

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


__all__ = ["JobPass", "describe_failure", "short_name"]
