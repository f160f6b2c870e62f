"""The supervisor's loop (:class:`Supervisor`): one local job from submit to its end, as the
package's documentation describes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from kubemill.api import STOP_ANNOTATION, Job, JobStatus
from kubemill.core import (
    Action,
    ChildKind,
    CreatePod,
    CreatePodGroup,
    DeleteChild,
    DeleteJob,
    DeletePod,
    DeletePodGroup,
    Halt,
    Observed,
    ObservedChild,
    ObservedPod,
    ObservedPodGroup,
    ObservedProgress,
    RecordEvent,
    SubmitRemote,
    WriteFiles,
    pod_restart_policy,
    reconcile,
)
from kubemill.kinds import lifecycle_for
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.exec_service import ExecService
from kubemill.substrates.local.file_sets import delete_file_set, write_file_set, written_file_sets
from kubemill.substrates.local.kubelet import ReplicaPod, wait_any
from kubemill.substrates.local.log_keeper import remove_job_directory
from kubemill.substrates.local.owner import OWNER_GONE, owner_of
from kubemill.substrates.local.prepared import Prepared, prepare_recorded
from kubemill.substrates.local.progress import ProgressTail, progress_tail
from kubemill.substrates.local.referred import replanned, resolved
from kubemill.substrates.local.remote import LocalRemote, followed, remote_watch
from kubemill.substrates.local.sampling import ResourceSampler, resources_dir
from kubemill.substrates.local.start_rate import StartBucket, StartLimits
from kubemill.substrates.local.store import JobRecord, ReplicaRecord, Store
from kubemill.substrates.local.strays import JobProcesses
from kubemill.substrates.local.submission import replica_records
from kubemill.substrates.local.supervisor import ports
from kubemill.substrates.local.supervisor.adopt import adopted
from kubemill.substrates.local.supervisor.options import SupervisorOptions
from kubemill.substrates.local.supervisor.recreation import recreated_record
from kubemill.substrates.local.supervisor.requests import Requests
from kubemill.substrates.local.verdict import record_events, recorded_job

log = logging.getLogger("kubemill.local.supervisor")

NOT_RUNNABLE = "NotRunnableLocally"
SUPERVISOR_ERROR = "SupervisorError"


def _utc(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def _comparable(status: JobStatus) -> dict[str, object]:
    return status.model_dump(exclude={"last_reconcile_time"})  # alone, not worth a write


class Supervisor:
    """Runs one recorded job until it has finished (or is interrupted or deleted)."""

    def __init__(
        self,
        store: Store,
        uid: str,
        *,
        prepared: Prepared | None = None,
        options: SupervisorOptions | None = None,
        exclusive: bool = False,
    ) -> None:
        self.store = store
        self.uid = uid
        self.exclusive = exclusive
        """This process runs nothing but this job: every process below it is the job's."""
        self.options = options or SupervisorOptions()
        self.processes = JobProcesses(
            uid,
            exclusive=exclusive,
            pods=lambda: self.pods,
            store=store,
            memory_interval=self.options.memory_interval,
        )
        self._prepared = prepared
        self.pods: dict[str, ReplicaPod] = {}
        self.pod_group: ObservedPodGroup | None = None
        self.children: dict[tuple[ChildKind, str], str] = {}
        """File sets written under the job's files directory, with their digests."""
        self.records: dict[str, ReplicaRecord] = {}
        self.job_status = JobStatus()
        self._saved_status: dict[str, object] | None = None
        self._last_observed: Observed | None = None
        self._next_reconcile = 0.0
        self._next_request_check = 0.0
        self._starts = StartBucket(StartLimits())
        self._ever_started = False
        self._manifest: dict[str, object] | None = None
        """The recorded manifest as last adopted; a different one is a change to judge."""
        self._dirty = False
        self._swept = False
        """Every replica is gone and so is whatever of the job was found after them: no
        process of the job is left, and none can start (the exec service has no pod)."""
        self._asked = Requests()
        self.finished = threading.Event()
        """Set once the supervisor has let go of the job (every replica stopped)."""
        self._exec: ExecService | None = None
        """``kubectl exec`` into the replicas (:mod:`.exec_service`), while the job runs."""
        self._progress: ProgressTail | None = None
        """The replicas' progress reports (:mod:`.progress`)."""
        self._reports: tuple[ObservedProgress, ...] = ()
        self._next_progress_check = 0.0
        self._remote: LocalRemote | None = None
        """The Plan's remote run, asked after through its service's API (:mod:`.remote`)."""
        self._owner: procinfo.ProcessId | None = None
        self._sampler: ResourceSampler | None = None
        """Each running replica's CPU and memory, kept with the job (:mod:`.sampling`)."""
        self._removed_dir: str | None = None

    # --- requests from other threads (signal handlers, the SDK's interrupt/delete) --------

    def interrupt(self, *, force: bool = False, why: str = "interrupted") -> None:
        """Ask for the job to be stopped for good; ``force`` skips the grace period.

        The loop sets the stop annotation (value ``why``) on the recorded manifest and the
        core records the job Failed with reason ``Interrupted``. Safe from a signal
        handler: nothing but a flag and a wake-up byte are written here.
        """
        self._asked.stop(force=force, why=why)

    def delete(self, *, force: bool = False) -> None:
        """Stop every replica and let go; the caller removes the job's records."""
        self._asked.ask("delete", force=force)

    # --- the loop ----------------------------------------------------------------------

    def run(self) -> None:
        """Supervise until the job is over; always leaves no replica process behind."""
        try:
            procinfo.become_subreaper()
            rec = self.store.job_by_uid(self.uid)
            if rec is None:
                return
            prepared = self._setup(rec)
            if prepared is None:
                return
            self.store.set_supervisor_state(self.uid, "running")
            self._loop()
        except BaseException as exc:
            self._crash(exc)
            raise
        finally:
            self._release()

    def _setup(self, rec: JobRecord) -> Prepared | None:
        self.records = {r.name: r for r in self.store.replicas(self.uid)}
        self._ever_started = any(r.created is not None for r in self.records.values())
        submitted_here = self._prepared is not None
        try:
            self._starts = StartBucket(self.options.start_limits or StartLimits.load())
            if self._prepared is None:
                self._prepared = prepare_recorded(rec, self.store.ports(self.uid))
            self._serve_exec(rec.name, self._prepared.ctx.exec_socket)
        except (SubstrateError, ValueError) as exc:
            self.job_status = JobStatus.model_validate(rec.status)
            self._saved_status = _comparable(self.job_status)
            self._halt(Halt(NOT_RUNNABLE, f"the job cannot start here: {exc}"))
            return None
        if submitted_here:
            # Submitted by this process: the manifest may have changed since it was planned.
            self._adopt(rec.manifest)
        self._manifest = rec.manifest
        self._owner = owner_of(rec.job_dir)  # whose end removes the job (see owner.py)
        self.children = written_file_sets(rec.files_dir)
        self._progress = progress_tail(self.store, self.uid, self._prepared.ctx.progress_dir)
        self._sampler = ResourceSampler(
            resources_dir(rec.job_dir), self.processes, lambda: self.pods
        )
        self._remote = remote_watch(self._prepared, self.options.remote_interval)
        self.job_status = self._prepared.job.status
        self._saved_status = _comparable(self.job_status)
        return self._prepared

    def _serve_exec(self, job: str, path: str) -> None:
        if path:
            self._exec = ExecService(
                path,
                job=job,
                pods=lambda: self.pods,
                replicas=lambda: self.prepared.specs,
                store=self.store,
                uid=self.uid,
            )
            self._exec.start()

    @property
    def prepared(self) -> Prepared:
        assert self._prepared is not None
        return self._prepared

    @property
    def job(self) -> Job:
        return self.prepared.job

    def _loop(self) -> None:
        while True:
            now = time.time()
            for pod in list(self.pods.values()):
                pod.poll(now)
            self._drop_gone()
            self._start_pending(now)
            self.processes.watch_memory(now)
            self.processes.reap_orphans(now)
            if self._sampler is not None:
                self._sampler.sample(now)
            requested = self._requests(now)
            if requested == "delete":
                self._stop_all("the job is being deleted")
                return
            if requested == OWNER_GONE:
                self._remove_job(f"its owner, process {self._owner and self._owner.pid}, ended")
                return
            observed = self._observed()
            due = self._dirty or observed != self._last_observed or now >= self._next_reconcile
            if due and self._reconcile(observed, now):
                return
            self._save_replicas()
            if self.job_status.finished:
                self._stop_all(f"the job {self.job_status.phase.lower()}")
                self._settle()
                return
            if not self._dirty:  # else something is to be judged at once (_create_pod)
                self._sleep(now)

    def _reconcile(self, observed: Observed, now: float) -> bool:
        """One reconcile; applies its actions. True if the job was deleted (TTL)."""
        self.job.status = self.job_status
        self._resolve_references()
        result = reconcile(
            self.job,
            self.prepared.plan,
            observed,
            _utc(now),
            options=self.options.reconcile_options,
            lifecycle=lifecycle_for(self.job.KIND, local=True),
        )
        self._last_observed = observed
        self._dirty = False
        delete_job = False
        for action in result.actions:
            if isinstance(action, DeleteJob):
                delete_job = True
            else:
                self._apply(action, now)
        self._set_status(result.status)
        if not result.status.finished:
            # The core has judged every exit seen so far (backoffLimit included) and kept
            # these pods: their planned in-place restarts may go ahead.
            for pod in self.pods.values():
                pod.allow_restart()
        resync = self.options.resync_interval
        if result.requeue_after is not None:
            resync = min(resync, max(0.0, result.requeue_after.total_seconds()))
        self._next_reconcile = now + resync
        if delete_job:
            self._remove_job("the job's ttlSecondsAfterFinished passed")
        return delete_job

    def _resolve_references(self) -> None:
        """Plan from the jobs the job names as they are now (a Ray job's selected
        cluster, :mod:`..referred`); the remote run's reader follows its new Plan."""
        if (found := resolved(self.store, self.job)) is self.job:
            return
        self._prepared = replanned(self.prepared, found)
        added = [r for r in replica_records(self.uid, self._prepared) if r.name not in self.records]
        self.records.update((record.name, record) for record in added)
        self.store.save_replicas(added)  # the rows listings show, as a scale's (.adopt)
        self._remote = followed(self._remote, self._prepared, self.options.remote_interval)

    def _remove_job(self, reason: str) -> None:
        # A delete's crash-safe order (LocalBackend._forget): marked, stopped, files, record
        # last (_release); killed between, the job stays marked for the next read to finish.
        self.store.request(self.uid, "delete")
        self._stop_all(reason)
        if (rec := self.store.job_by_uid(self.uid)) is not None:
            self._removed_dir = rec.job_dir  # removed in _release, once nothing writes there

    def _apply(self, action: Action, now: float) -> None:
        if isinstance(action, CreatePod):
            self._create_pod(action.name, now)
        elif isinstance(action, DeletePod):
            pod = self.pods.get(action.name)
            if pod is not None:
                pod.terminate(now, reason=action.reason)
        elif isinstance(action, CreatePodGroup):
            # No scheduler to wait for locally: the gang is admitted at once.
            self.pod_group = ObservedPodGroup(name=action.name, phase="Running")
        elif isinstance(action, DeletePodGroup):
            self.pod_group = None
        elif isinstance(action, WriteFiles):
            self._write_files(action)
        elif isinstance(action, DeleteChild):
            self._delete_file_set(action)
        elif isinstance(action, SubmitRemote) and self._remote is not None:
            failed = self._remote.submit()
            if failed is not None:
                self.store.add_event(
                    self.uid, type="Warning", reason="FailedSubmission", message=failed, when=now
                )
        elif isinstance(action, RecordEvent):
            self.store.add_event(
                self.uid, type=action.type, reason=action.reason, message=action.message, when=now
            )

    def _write_files(self, action: WriteFiles) -> None:
        owner = f"{self.job.namespace}/{self.job.name}"
        kind, digest = write_file_set(Path(self.prepared.network.files_root), action, owner=owner)
        self.children[(kind, action.name)] = digest

    def _delete_file_set(self, action: DeleteChild) -> None:
        delete_file_set(Path(self.prepared.network.files_root), action)
        self.children.pop((action.kind, action.name), None)

    def _create_pod(self, name: str, now: float) -> None:
        existing = self.pods.get(name)
        if existing is not None and not existing.gone:
            return
        if not self._ever_started:
            self._check_ports_before_first_start()
            self._ever_started = True
        record = self.records[name]
        recreated = record.created is not None
        if recreated:
            self._warn_busy_ports(name)
            self.records[name] = recreated_record(record, existing)
        pod = ReplicaPod(
            self.prepared.specs[name],
            restart_policy=pod_restart_policy(self.prepared.plan.replica(name).restart_policy),
            before_restart=lambda p: self._warn_busy_ports(p.spec.replica),
            strays=self.processes.of_pod,
            core_offset=int(self.uid.replace("-", "")[:8], 16) if self.uid else 0,
        )
        pod.create(now)
        self.pods[name] = pod
        self._start_pending(now)
        # A pod of our own making is news to the core (on Kubernetes, the watch event of
        # its creation): judged at once, not a poll interval later, so a later stage (an
        # MPI launcher after its workers) starts without waiting on a timer.
        self._dirty = True

    def _start_pending(self, now: float) -> None:
        """Start the processes of Pending pods, in creation order, at the start rate."""
        for pod in self.pods.values():
            if not pod.pending:
                continue
            if not self._starts.take(now):
                return
            pod.launch(now)
            if pod.state.reason == "StartError":
                self.store.add_event(
                    self.uid,
                    type="Warning",
                    reason="FailedStart",
                    message=pod.state.message,
                    when=now,
                )

    def _check_ports_before_first_start(self) -> None:
        moved = ports.reallocate_before_first_start(
            self.store, self.uid, self.prepared, self.records
        )
        if moved is not None:
            self._prepared = moved

    def _warn_busy_ports(self, replica: str) -> None:
        ports.warn_busy_ports(self.store, self.uid, self.prepared, replica)

    def _observed(self) -> Observed:
        pods = []
        for name, pod in self.pods.items():
            rec = self.records[name]  # a scaled-down replica's pod is no longer in the Plan
            pods.append(pod.observed(rec.replica_type, rec.index))
        children = tuple(ObservedChild(k, n, d) for (k, n), d in sorted(self.children.items()))
        return Observed(
            pods=tuple(pods),
            pod_group=self.pod_group,
            children=children,
            progress=self._read_progress(tuple(pods)),
            remote=self._remote.read(tuple(pods)) if self._remote is not None else None,
        )

    def _read_progress(self, pods: tuple[ObservedPod, ...]) -> tuple[ObservedProgress, ...]:
        """The replicas' latest reports: read every ``progress_interval``, and at once when
        a pod changed (an exit is judged with everything its program reported before)."""
        now = time.monotonic()
        changed = self._last_observed is None or self._last_observed.pods != pods
        if self._progress is not None and (changed or now >= self._next_progress_check):
            self._next_progress_check = now + self.options.progress_interval
            self._reports = self._progress.poll()
        return self._reports

    def _requests(self, now: float) -> str | None:
        """Take in what was asked: ``delete`` (or ``OWNER_GONE``) is returned; a stop request,
        suspend and resume change the job's manifest, which the next reconcile judges."""
        requested, why = self._asked.take()
        if why is not None:
            self._record_stop(why)
        if requested is not None:
            return requested
        if now < self._next_request_check:
            return None
        self._next_request_check = now + self.options.request_interval
        pending = self.store.pending_request(self.uid)
        if pending == "force":
            self._asked.force()
        elif pending == "delete":
            return pending
        manifest = self.store.manifest(self.uid)
        if manifest is not None and manifest != self._manifest:
            self._adopt(manifest)
        if self._owner is not None and not procinfo.is_alive(self._owner):
            return OWNER_GONE
        return None

    def _record_stop(self, why: str) -> None:
        """Put this process's stop request on the recorded manifest, for the core to judge
        and for every later reader to see."""
        if STOP_ANNOTATION in self.job.metadata.annotations:
            return
        manifest = self.store.patch_manifest(self.uid, annotations={STOP_ANNOTATION: why})
        if manifest is not None:
            self._adopt(manifest)

    def _adopt(self, manifest: dict[str, object]) -> None:
        """Judge the job as the recorded manifest now says (stop request, suspend, a group's
        replicas: planned again, :mod:`.adopt`)."""
        self._prepared = adopted(
            self.store, self.uid, self.prepared, manifest, self.job_status, self.records
        )
        self.job_status = self.job.status
        self._manifest = manifest
        self._dirty = True

    def _sleep(self, now: float) -> None:
        deadlines = [self._next_reconcile, self._next_request_check]
        deadlines += [d for p in self.pods.values() if (d := p.next_deadline) is not None]
        if any(p.pending for p in self.pods.values()):
            deadlines.append(self._starts.next_token(now))
        timeout = min(self.options.poll_interval, max(0.0, min(deadlines) - now))
        wait_any(list(self.pods.values()), timeout=timeout, wake_fd=self._asked.wake_fd)
        self._asked.drain()

    # --- stopping ----------------------------------------------------------------------

    def _stop_all(self, reason: str) -> None:
        """Stop every replica (grace period, then SIGKILL) and wait until all are gone."""
        now = time.time()
        for pod in self.pods.values():
            pod.terminate(now, reason=reason)
        while self.pods:
            now = time.time()
            # A forced stop may be asked for while the replicas have their grace period.
            self._requests(now)
            force = self._asked.forced
            for pod in list(self.pods.values()):
                if force and pod.alive:
                    pod.kill()
                pod.poll(now)
            self._drop_gone()
            self._save_replicas()
            if self.pods:
                self._sleep(now)
        self._save_replicas()
        self.processes.sweep()
        self._swept = True

    def _drop_gone(self) -> None:
        for name, pod in list(self.pods.items()):
            if pod.gone:
                self._save_replicas({name: pod})
                pod.close()
                del self.pods[name]
                if not any(r.name == name for r in self.prepared.plan.replicas):
                    self.store.forget_replica(self.uid, name)  # scaled down (.adopt)
                    del self.records[name]

    def _halt(self, halt: Halt) -> None:
        """This supervisor cannot go on running the job: the core records the verdict.

        The replicas are already stopped; the core's deletions of them are moot.
        """
        now = time.time()
        if self._prepared is not None:
            self.job.status = self.job_status
            job, plan = self.job, self.prepared.plan
            pods = self._observed().pods
        else:
            recorded = recorded_job(self.store, self.uid, self.job_status)
            if recorded is None:
                return
            job, plan, pods = recorded
        result = reconcile(
            job,
            plan,
            Observed(pods=pods, halt=halt),
            _utc(now),
            options=self.options.reconcile_options,
            lifecycle=lifecycle_for(job.KIND, local=True),
        )
        self._set_status(result.status)
        record_events(self.store, self.uid, result, when=now)

    def _settle(self) -> None:
        """After the last replica stopped: nothing is active any more, whatever was counted."""
        status = self.job_status.model_copy(deep=True)
        for rs in status.replica_statuses.values():
            rs.active = 0
        self._set_status(status)

    def _crash(self, exc: BaseException) -> None:
        """The loop itself failed: kill the replicas and record why (never raises)."""
        try:
            log.exception("supervisor of job %s failed", self.uid)
            for pod in self.pods.values():
                pod.kill()
            deadline = time.time() + 5
            while any(p.alive for p in self.pods.values()) and time.time() < deadline:
                for pod in self.pods.values():
                    pod.poll(time.time())
                time.sleep(0.02)
            if self.store.job_by_uid(self.uid) is not None:
                for pod in self.pods.values():
                    pod.poll(time.time())
                self._halt(
                    Halt(
                        SUPERVISOR_ERROR,
                        f"the supervisor failed ({type(exc).__name__}: {exc}); its replicas"
                        " were killed. This is a kubemill bug: please report it with the job's"
                        " supervisor.log",
                    )
                )
                for name, pod in self.pods.items():
                    pod.deleting = True
                    pod.stopped_running = pod.stopped_running or pod.state.phase == "Running"
                    self._save_replicas({name: pod})
        except BaseException:  # already failing: the original error wins
            log.exception("could not record the supervisor's failure")

    def _release(self) -> None:
        if self._exec is not None:
            with contextlib.suppress(Exception):
                self._exec.close()
        if not self._swept:  # else nothing of the job is left to find: a scan spared
            with contextlib.suppress(Exception):
                self.processes.sweep()
        for pod in self.pods.values():
            pod.close()
        if self._removed_dir is not None:
            remove_job_directory(self._removed_dir)
            self.store.remove_job(self.uid)
        else:
            with contextlib.suppress(Exception):  # (a job deleted meanwhile has no row to set)
                self.store.set_supervisor_state(self.uid, "done")
        self._asked.close()
        self.finished.set()

    # --- persistence -------------------------------------------------------------------

    def _set_status(self, status: JobStatus) -> None:
        self.job_status = status
        if self._prepared is not None:
            self.job.status = status
        comparable = _comparable(status)
        if comparable != self._saved_status:
            self.store.set_status(self.uid, status.to_wire(), finished=status.finished)
            self._saved_status = comparable

    def _save_replicas(self, pods: Mapping[str, ReplicaPod] | None = None) -> None:
        """Write the rows of those replicas (every one by default) that changed."""
        changed = []
        for name, pod in (self.pods if pods is None else pods).items():
            record = pod.as_record(self.records[name])
            if record != self.records[name]:
                changed.append(record)
                self.records[name] = record
        self.store.save_replicas(changed)
