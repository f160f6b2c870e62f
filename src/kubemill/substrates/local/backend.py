"""The local substrate as a :class:`~kubemill.substrates.base.Backend`: what the SDK calls.

Every read tells the truth about processes, whoever is asking and whenever:

- if a job has not finished but its supervisor (checked by pid *and* start time) is
  gone, the read kills whatever is left of its replicas' process groups, marks the
  replicas that were running Failed (``SupervisorLost``), and asks the core for the
  verdict: it reports those replicas as lost together with a
  :class:`~kubemill.core.Halt` (``SupervisorLost``), and stores the status and events
  the core returns. A dead supervisor's replicas were already SIGKILLed by the kernel
  (``PR_SET_PDEATHSIG``); the group kill catches the children they may have left.
  The halt is reported only when nothing else decided: a job asked to stop (the stop
  annotation) was stopped, as asked, and is recorded ``Interrupted``; a job asked to
  suspend runs no process anyway, so it is recorded Suspended, its replicas Stopped (no
  failures: resuming counts no restart for them), and can be resumed (a new detached
  supervisor takes it over);
- a finished job whose ``ttlSecondsAfterFinished`` has passed is deleted by the read
  that notices (the core decides; no daemon is needed);
- ``interrupt``, ``suspend``, ``resume`` and ``patch`` change the recorded manifest (the
  stop annotation, ``spec.runPolicy.suspend``, a merge patch such as a group's replicas) as
  a client patches a job on a cluster; the supervisor reconciles the change (see
  :mod:`.supervisor`);
- ``delete`` asks the supervisor to stop the job, waits for it, kills what is left and
  checks that no process of the job's groups remains before removing its records; if
  the deleting process dies once it has asked, the next read finishes the deletion.

Logs stay readable through all of this: they are plain files the processes wrote.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kubemill.api import STOP_ANNOTATION, Job, JobStatus
from kubemill.kinds import entry_for, is_controller, load_one
from kubemill.substrates.base import JobNotFound, JobView, Patch, SubmitOptions, SubstrateError
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.job_views import (
    ListedViews,
    LocalRun,
    RecordReads,
    grace_of,
    job_view,
    pick_replica,
)
from kubemill.substrates.local.known_objects import know_local_objects
from kubemill.substrates.local.launch import PodContext, exec_socket_path, remove_socket
from kubemill.substrates.local.logs import LogPolicy
from kubemill.substrates.local.network import LocalNetwork, PortAllocator
from kubemill.substrates.local.owner import owner_process, write_owner
from kubemill.substrates.local.prepared import Prepared, plan_local
from kubemill.substrates.local.records import SUPERVISOR_START_GRACE, apply_patch
from kubemill.substrates.local.start_rate import StartLimits
from kubemill.substrates.local.store import (
    STATE_DIR_ENV,
    JobRecord,
    NewJob,
    PortConflict,
    Store,
    checked_namespace,
    listing_fields,
)
from kubemill.substrates.local.submission import (
    environments_for,
    inside_state_dir,
    manifest_of,
    record_controller,
    replica_records,
    set_namespace,
    start_detached,
    warn_ignored_containers,
)
from kubemill.substrates.local.supervisor import SupervisorOptions

if TYPE_CHECKING:
    from kubemill.substrates.reads import EventRecord, LogLine, LogQuery, ProgressPoint

STOP_MARGIN = 5.0
"""Extra seconds ``delete``/``interrupt`` wait beyond the replicas' grace period."""


class LocalBackend(RecordReads):
    """Runs jobs as processes on this machine; state under ``state_dir``."""

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        config_path: str | os.PathLike[str] | None = None,
        supervisor_options: SupervisorOptions | None = None,
        exclusive: bool = False,
    ) -> None:
        self.store = Store(state_dir)
        self.state_dir = self.store.state_dir
        self.config_path = config_path
        # A recorded job may name a runtime given to its run: known before any is loaded.
        know_local_objects(self.state_dir, config_path)
        self.supervisor_options = supervisor_options or SupervisorOptions()
        self.exclusive = exclusive
        """This process runs nothing but the one foreground job it submits (``kubemill
        run``): every process that ends up below it is that job's, even one that cleared
        its environment of the job's mark, as below a detached supervisor."""
        self._runs: dict[str, LocalRun] = {}
        self._detached: list[subprocess.Popen[bytes]] = []
        """Detached supervisors started here, kept to be reaped (they are our children)."""
        self._runs_lock = threading.Lock()
        self._listed = ListedViews()  # a view is built again only if its records changed

    # --- submit ------------------------------------------------------------------------

    def submit(self, job: Job, options: SubmitOptions) -> JobView:
        """Record the job and start it: in a thread here, or under a detached supervisor."""
        support = entry_for(job.KIND).local
        if not support.runs:
            raise SubstrateError(
                f"{job.KIND} does not run on the local substrate: {support.why_not}"
            )
        job = job.model_copy(deep=True)
        set_namespace(job, options.namespace)
        uid = str(uuid.uuid4())
        job.metadata.uid = uid
        job.metadata.creation_timestamp = datetime.now(UTC).isoformat(timespec="seconds")
        job.status = type(job.status)()
        base_dir = str(Path(options.base_dir or Path.cwd()).absolute())
        if not Path(base_dir).is_dir():
            raise SubstrateError(f"base directory {base_dir} does not exist")
        job_dir = inside_state_dir(
            self.state_dir, self.state_dir / "jobs" / job.namespace / f"{job.name}-{uid[:8]}"
        )
        owner = None if options.owner_pid is None else owner_process(job, options.owner_pid)
        if is_controller(job.KIND):
            record_controller(self.store, self.state_dir, job, uid, base_dir, job_dir)
            self._start_detached(uid, job_dir, kind=job.KIND)
            return self.get(job.name, job.namespace)
        ctx = PodContext.for_job(
            job_uid=uid, namespace=job.namespace, base_dir=base_dir, job_dir=str(job_dir)
        )
        environments = environments_for(job, self.config_path)
        log_policy = LogPolicy.load(self.config_path)
        # Read at submit, so a broken replicaStarts is an error here, not a job that fails.
        start_limits = self.supervisor_options.start_limits or StartLimits.load(self.config_path)
        me = procinfo.identify(os.getpid())
        mode = "detached" if options.detach else "foreground"
        wanted, ttl = listing_fields(job)
        # A job of the name is made true first, as by any read: a deletion left unfinished
        # by a killed deleter is finished, and the name is free again.
        with contextlib.suppress(JobNotFound):
            self._fresh(self.store.job(job.namespace, job.name))
        for _ in range(5):
            allocator = PortAllocator(avoid=self.store.reserved_ports())
            prepared = plan_local(
                job,
                LocalNetwork(job.name, allocator=allocator, files_root=str(job_dir / "files")),
                ctx=ctx,
                environments=environments,
            )
            new = NewJob(
                uid=uid,
                namespace=job.namespace,
                name=job.name,
                kind=job.KIND,
                manifest=manifest_of(job),
                status=JobStatus().to_wire(),
                base_dir=base_dir,
                job_dir=str(job_dir),
                environments={k: v.to_json() for k, v in environments.items()},
                replicas=replica_records(uid, prepared),
                ports=prepared.network.ports,
                supervisor=None if options.detach else me,
                supervisor_mode=mode,
                wanted=wanted,
                ttl=ttl,
            )
            try:
                self.store.insert_job(new)
                break
            except PortConflict:
                continue
        else:
            raise SubstrateError("could not reserve ports for the job; try again")
        try:
            log_policy.save(job_dir / "logs")
            if owner is not None:
                write_owner(job_dir, owner)
        except OSError as exc:
            # Nothing can run without its log files: forget the job rather than leave a
            # record no supervisor will ever take.
            self.store.remove_job(uid)
            raise SubstrateError(
                f"cannot create the job's log directory {job_dir / 'logs'}:"
                f" {exc.strerror or exc}; make {self.state_dir} writable, or set"
                f" {STATE_DIR_ENV} to a writable directory"
            ) from exc
        warn_ignored_containers(self.store, uid, job, prepared.plan)
        if options.detach:
            self._start_detached(uid, job_dir)
        else:
            self._start_here(uid, prepared, start_limits)
        return self.get(job.name, job.namespace)

    def _start_detached(
        self, uid: str, job_dir: Path, *, hand_over: bool = False, kind: str = ""
    ) -> None:
        start_detached(
            self.store,
            uid,
            job_dir,
            config_file=self.config_path,
            started=self._detached,
            hand_over=hand_over,
            kind=kind,
        )

    def _start_here(self, uid: str, prepared: Prepared, start_limits: StartLimits) -> None:
        options = replace(self.supervisor_options, start_limits=start_limits)
        run = LocalRun.of(self.store, uid, prepared, options=options, exclusive=self.exclusive)
        with self._runs_lock:
            self._runs[uid] = run
        run.thread.start()

    # --- reads -------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> JobView:
        """The job now (healed if its supervisor died). Raises ``JobNotFound``."""
        rec = self._fresh(self._job(name, namespace))
        if rec is None:  # deleted by its TTL just now
            return self._not_found(name, namespace)
        return job_view(self.store, rec)

    def list(self, namespace: str | None = None) -> list[JobView]:
        """Every job (of ``namespace``, or all), oldest first."""
        records = self.store.jobs(None if namespace is None else checked_namespace(namespace))
        # Heal and expire first (both may write replicas or remove the job), then read
        # what is left of every job's replicas in one query rather than one per job.
        fresh = [f for f in map(self._fresh, records) if f is not None]
        return self._listed.views(self.store, fresh, namespace)

    def wait(
        self, name: str, namespace: str | None = None, timeout: float | None = None
    ) -> JobView:
        """Block until the job has finished and every replica stopped, or ``timeout``.

        Returns the job as it is then; check ``view.finished`` after a timeout.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        rec = self._job(name, namespace)
        try:
            return self._wait(rec, namespace, deadline)
        except JobNotFound:
            if self.store.job_by_uid(rec.uid) is not None:
                raise
            # It was there when the wait began: say what happened, not just "no job".
            raise JobNotFound(
                f"job {name!r} in namespace {rec.namespace!r} was deleted while waiting for"
                " it (kubemill delete, or its ttlSecondsAfterFinished)"
            ) from None

    def _wait(self, rec: JobRecord, namespace: str | None, deadline: float | None) -> JobView:
        name = rec.name
        run = self._run(rec.uid)
        if run is not None:
            run.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            view = self.get(name, namespace)
            if view.finished or run.thread.is_alive():
                return view
            # The supervisor let go of an unfinished job: it is being deleted (or the
            # thread crashed, which the reads below heal). Poll as for a detached job.
        next_heal = 0.0
        while True:
            rec = self._job(name, namespace)
            now = time.monotonic()
            if now >= next_heal:
                next_heal = now + 1.0
                healed = self._fresh(rec)
                if healed is None:
                    return self._not_found(name, namespace)
                rec = healed
            if rec.finished and rec.supervisor_state == "done":
                return job_view(self.store, rec)
            if deadline is not None and now >= deadline:
                return job_view(self.store, rec)
            time.sleep(0.05)

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        replica: str | None = None,
        follow: bool = False,
        query: LogQuery | None = None,
    ) -> Iterator[LogLine]:
        """Lines of every replica (or one); with ``follow``, as written, until the end.

        ``query`` (tail, since, limit_bytes, timestamps) applies to each replica's log.
        """
        rec = self._job(name, namespace)
        replicas = self.store.replicas(rec.uid)
        if replica is not None:
            replicas = [pick_replica(rec, replicas, replica)]
        # The readers (and their records) are loaded by a read only: see job_reads.
        from kubemill.substrates.local import job_reads
        from kubemill.substrates.local.log_reads import ReplicaLog, read_all
        from kubemill.substrates.reads import LogQuery

        query = query or LogQuery()
        logs = [ReplicaLog(r.name, r.log_path, query) for r in replicas]
        if not follow:
            return read_all(logs)
        run = self._run(rec.uid)
        supervised = None if run is None else run.supervisor.finished
        return job_reads.follow_replicas(logs, supervised, lambda: self._ended(rec.uid))

    def progress(self, name: str, namespace: str | None = None) -> builtins.list[ProgressPoint]:
        """Every report of the first replica (in plan order) that made one: the replica
        the job's ``trainerStatus`` follows (:mod:`.progress`)."""
        rec = self._job(name, namespace)
        self._fresh(rec)
        from kubemill.substrates.local import job_reads  # a read's only: see there

        return job_reads.progress_history(self.store, rec)

    def events(self, name: str, namespace: str | None = None) -> builtins.list[EventRecord]:
        """The job's events, oldest first."""
        rec = self._job(name, namespace)
        self._fresh(rec)
        from kubemill.substrates.local import job_reads  # a read's only: see there

        return job_reads.event_records(self.store, rec.uid)

    # --- stopping ----------------------------------------------------------------------

    def interrupt(
        self,
        name: str,
        namespace: str | None = None,
        *,
        force: bool = False,
        why: str = "kubemill interrupt",
    ) -> JobView:
        """Stop the job for good: it is recorded Failed with reason ``Interrupted``.

        Sets the stop annotation (value ``why``) on the recorded job, which its supervisor
        reconciles, and waits until the replicas have stopped (``force`` skips their
        grace period). A job that already finished is left as it is. A job whose
        supervisor was already gone was not stopped by this request: it is recorded as
        lost (``SupervisorLost``) and the request changes nothing.
        """
        rec = self._fresh(self._job(name, namespace))
        if rec is None:
            return self._not_found(name, namespace)
        if is_controller(rec.kind):
            # Its loop reads no stop annotation: a controller never ends, it is paused or gone.
            raise SubstrateError(
                f"{rec.kind} {name} does not end, so it cannot be interrupted: pause it with"
                f" `kubemill suspend {name}`, or stop it and its runs with"
                f" `kubemill delete {name}`"
            )
        if not rec.finished:
            self._stop(rec, "interrupt", force=force, why=why)
        return self.get(name, namespace)

    def suspend(self, name: str, namespace: str | None = None) -> JobView:
        """Suspend the job (``runPolicy.suspend: true``): its replicas stop, it stays.

        The supervisor notices on its next request check; the core deletes the pods and
        marks the job Suspended. A detached supervisor stays alive, idle, while the job
        is suspended. Returns at once (``get`` shows Suspended once the core judged it).
        """
        rec = self._require_unfinished(name, namespace, "suspend")
        self.store.patch_manifest(rec.uid, suspend=True)
        if rec.supervisor_state == "done" and not is_controller(rec.kind):
            # No supervisor to carry it out (it was lost while suspended before): judge
            # it here; nothing of the job runs.
            from kubemill.substrates.local import verdict

            verdict.judge_unsupervised(
                self.store, rec, options=self.supervisor_options.reconcile_options
            )
        return self.get(name, namespace)

    def resume(self, name: str, namespace: str | None = None) -> JobView:
        """Resume a suspended job (``runPolicy.suspend: false``): its replicas start again.

        Its supervisor creates them on its next request check. When that supervisor is
        gone (the process that ran a foreground job ended, or the machine restarted), a
        new detached supervisor is started for the job.
        """
        rec = self._require_unfinished(name, namespace, "resume")
        self.store.patch_manifest(rec.uid, suspend=False)
        if rec.supervisor_state == "done":
            self._start_detached(rec.uid, Path(rec.job_dir), hand_over=True, kind=rec.kind)
        return self.get(name, namespace)

    def patch(self, name: str, patch: Patch, namespace: str | None = None) -> JobView:
        """Apply ``patch`` (a merge patch, or a JSON patch: whole or not at all, else
        ``JsonPatchError``, a ``SubstrateError``) to the recorded manifest once the result is
        a valid job (else ``ManifestError`` with its field paths); the supervisor plans the
        job again if it asks for other replicas (:mod:`.supervisor.adopt`), and the core
        judges it."""
        rec = self._require_unfinished(name, namespace, "patch")
        patched = copy.deepcopy(rec.manifest)
        apply_patch(patched, patch)
        load_one(patched, name=f"{rec.namespace}/{rec.name}")
        # Again in the store's transaction: a JSON patch's tests guard against a change since.
        self.store.patch_manifest(rec.uid, patch=patch)
        return self.get(name, namespace)

    def _require_unfinished(self, name: str, namespace: str | None, verb: str) -> JobRecord:
        rec = self._fresh(self._job(name, namespace))
        if rec is None:
            self._not_found(name, namespace)
            raise AssertionError("unreachable")
        if rec.finished:
            phase = JobStatus.model_validate(rec.status).phase
            raise SubstrateError(
                f"job {name} has already finished ({phase}); only a running or suspended job"
                f" can be {verb.removesuffix('e')}ed. To run it again:"
                f" kubemill delete {name}, then submit it again"
            )
        return rec

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Stop every process of the job, verify none is left, and forget the job."""
        rec = self._job(name, namespace)
        self._stop(rec, "delete", force=False)
        if is_controller(rec.kind):
            self._delete_runs(rec)
        from kubemill.substrates.local import verdict

        verdict.kill_leftovers(self.store, rec, verify=True)
        self._forget(rec)

    def _delete_runs(self, rec: JobRecord) -> None:
        """Delete the runs a controller owns, once its loop stopped (so none starts after):
        on Kubernetes the garbage collector deletes them with their owner."""
        from kubemill.substrates.local.controller_runs import owned_runs

        for run in owned_runs(self, rec):
            with contextlib.suppress(JobNotFound):
                self.delete(run.name, rec.namespace)

    def _forget(self, rec: JobRecord) -> None:
        """Remove a job whose processes are all gone: its records and its directory.

        A detached supervisor that has let go is still ending (interpreter shutdown):
        once this returns, no process of the job is left, that one included.
        """
        current = self.store.job_by_uid(rec.uid) or rec
        sup = current.supervisor if current.supervisor_mode == "detached" else None
        if sup is not None and not procinfo.wait_gone(sup, timeout=STOP_MARGIN):
            procinfo.kill_process(sup)
            procinfo.wait_gone(sup, timeout=STOP_MARGIN)
        # Marked, then its files, its record last: a killed deleter's job is finished by _fresh.
        self.store.request(rec.uid, "delete")
        remove_socket(exec_socket_path(rec.job_dir, rec.uid))
        from kubemill.substrates.local.log_keeper import remove_job_directory

        remove_job_directory(rec.job_dir)  # a supervisor of this process may keep its logs
        self.store.remove_job(rec.uid)
        with self._runs_lock:
            self._runs.pop(rec.uid, None)

    def _stop(self, rec: JobRecord, what: str, *, force: bool, why: str = "") -> None:
        """Have the job's supervisor stop it (``interrupt`` or ``delete``) and wait.

        An interrupt is a stop annotation on the recorded job (value ``why``), which the
        supervisor's next reconcile carries out; a delete is a request to let go.
        """
        timeout = grace_of(rec) + STOP_MARGIN
        run = self._run(rec.uid)
        if run is not None:
            if what == "delete":
                run.supervisor.delete(force=force)
            else:
                run.supervisor.interrupt(force=force, why=why)
            try:
                run.thread.join(timeout)
            except KeyboardInterrupt:
                # A second Ctrl-C while waiting: no more grace.
                if what == "delete":
                    run.supervisor.delete(force=True)
                else:
                    run.supervisor.interrupt(force=True, why=why)
                run.thread.join(timeout)
                raise
            return
        if what == "interrupt":
            self.store.patch_manifest(rec.uid, annotations={STOP_ANNOTATION: why})
            if force:
                self.store.request(rec.uid, "force")
        if rec.supervisor_state == "done" or not self._supervisor_alive(rec):
            fresh = self._fresh(rec)
            if what == "interrupt" and fresh is not None and not fresh.finished:
                # Suspended with no supervisor: nothing runs, the core records the stop.
                from kubemill.substrates.local import verdict

                verdict.judge_unsupervised(
                    self.store, fresh, options=self.supervisor_options.reconcile_options
                )
            return
        if what == "delete":
            self.store.request(rec.uid, what)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.store.job_by_uid(rec.uid)
            if current is None or current.supervisor_state == "done":
                return
            if not self._supervisor_alive(current):
                self._fresh(current)
                return
            time.sleep(0.05)
        if rec.supervisor is not None and rec.supervisor_mode == "detached":
            # It did not stop in time: kill it; its replicas die with it (PDEATHSIG).
            procinfo.kill_process(rec.supervisor)
            procinfo.wait_gone(rec.supervisor, timeout=STOP_MARGIN)
        current = self.store.job_by_uid(rec.uid)
        if current is not None:
            self._fresh(current)

    # --- truth after crashes -----------------------------------------------------------

    def _supervisor_alive(self, rec: JobRecord) -> bool:
        if rec.uid in self._runs:
            run = self._run(rec.uid)
            return run is not None and run.thread.is_alive()
        if rec.supervisor is None:
            # Submitted, supervisor not recorded yet: give the submitter time.
            return time.time() - rec.created < SUPERVISOR_START_GRACE
        return procinfo.is_alive(rec.supervisor)

    def _fresh(self, rec: JobRecord) -> JobRecord | None:
        """The record after healing a lost supervisor and applying the TTL (None: gone)."""
        if rec.request == "delete" and (
            rec.supervisor_state == "done" or not self._supervisor_alive(rec)
        ):
            return self._finish_delete(rec)
        # The verdicts are imported only when a job needs one: they load the core, which a
        # read of a job whose supervisor runs it (the one after a submission) never does.
        if rec.supervisor_state != "done" and not self._supervisor_alive(rec):
            from kubemill.substrates.local import verdict

            rec = verdict.heal(self.store, rec, options=self.supervisor_options.reconcile_options)
        if rec.finished and rec.supervisor_state == "done":
            from kubemill.substrates.local import verdict

            if verdict.ttl_passed(self.store, rec):
                self._forget(rec)
                return None
        return rec

    def _ended(self, uid: str) -> bool:
        """Whether the job's replicas can write no more (it ended, or is gone)."""
        rec = self.store.job_by_uid(uid)
        if rec is None:
            return True
        fresh = self._fresh(rec)
        return fresh is None or (fresh.finished and fresh.supervisor_state == "done")

    def _finish_delete(self, rec: JobRecord) -> JobRecord | None:
        """Complete a delete whose caller did not (None: done).

        A delete asks the supervisor to stop the job and let go, then removes it; if the
        deleting process died in between (killed, its terminal closed), the job would stay
        recorded as running with nothing running. As an API server finishes a deletion
        whoever asked for it, the next reader finishes it; the deleter, if still at it,
        finds nothing left to remove. A process that survives SIGKILL keeps the record,
        for ``delete`` to report.
        """
        from kubemill.substrates.local import verdict

        try:
            verdict.kill_leftovers(self.store, rec, verify=True)
        except SubstrateError:
            return rec
        self._forget(rec)
        return None

    # --- helpers -----------------------------------------------------------------------

    def _run(self, uid: str) -> LocalRun | None:
        with self._runs_lock:
            return self._runs.get(uid)

    def _not_found(self, name: str, namespace: str | None) -> JobView:
        # Re-raise the store's own JobNotFound, with its message.
        self._job(name, namespace)
        raise AssertionError("unreachable")
