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
- ``interrupt``, ``suspend`` and ``resume`` change the recorded manifest (the stop
  annotation, ``spec.runPolicy.suspend``) as a client patches a job on a cluster; the
  supervisor reconciles the change (see :mod:`.supervisor`);
- ``delete`` asks the supervisor to stop the job, waits for it, kills what is left and
  checks that no process of the job's groups remains before removing its records; if
  the deleting process dies once it has asked, the next read finishes the deletion.

Logs stay readable through all of this: they are plain files the processes wrote.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from kubemill.api import STOP_ANNOTATION, Job, JobStatus
from kubemill.core import DeleteJob, Halt, Observed, reconcile
from kubemill.frameworks import Plan
from kubemill.kinds import controller_for, entry_for, is_controller, lifecycle_for
from kubemill.substrates.base import (
    EventRecord,
    JobNotFound,
    JobView,
    LogLine,
    LogQuery,
    ProgressPoint,
    ReplicaView,
    SubmitOptions,
    SubstrateError,
)
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.exec_service import remove_socket
from kubemill.substrates.local.images import (
    CONFIG_ENV,
    MAX_REPLICAS_KEY,
    Environment,
    ImageConfig,
    config_path,
)
from kubemill.substrates.local.kubelet import StartLimits
from kubemill.substrates.local.launch import (
    DEFAULT_GRACE_SECONDS,
    NotRunnableLocally,
    PodContext,
    exec_socket_path,
    main_container,
    progress_dir,
    progress_file,
)
from kubemill.substrates.local.logs import LogPolicy, ReplicaLog, follow, read_all
from kubemill.substrates.local.network import LocalNetwork, PortAllocator, replica_address
from kubemill.substrates.local.progress import history
from kubemill.substrates.local.store import (
    STATE_DIR_ENV,
    JobRecord,
    NewJob,
    PortConflict,
    ReplicaRecord,
    Store,
    listing_fields,
)
from kubemill.substrates.local.summary import SUPERVISOR_START_GRACE
from kubemill.substrates.local.supervisor import (
    Prepared,
    Supervisor,
    SupervisorOptions,
    plan_local,
    prepare_recorded,
)
from kubemill.substrates.local.verdict import (
    SUPERVISOR_LOST,
    observed_records,
    record_events,
    recorded_plan,
)

DEFAULT_NAMESPACE = "default"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
STOP_MARGIN = 5.0
"""Extra seconds ``delete``/``interrupt`` wait beyond the replicas' grace period."""
LEFTOVER_GRACE = 0.5
"""SIGTERM-to-SIGKILL wait for processes left behind by a dead supervisor."""
FOLLOW_INTERVAL = 0.05
"""Seconds between two looks for new log lines when following a job."""
QUICK_FOLLOW_INTERVAL = 0.02
"""The same while following a job supervised here with few replicas: each look reads every
replica's log, cheap for a few, and the job's end is seen this much sooner."""
QUICK_FOLLOW_LOGS = 32
FOLLOW_CHECK_EVERY = 0.1
"""How often a follower of a job supervised elsewhere asks the database whether it ended."""


def _namespace(namespace: str | None) -> str:
    """The namespace to use (``default`` when none is given); every method that takes one
    checks it here, so a name such as ``../..`` is refused the same way everywhere."""
    if not namespace:
        return DEFAULT_NAMESPACE
    if not _DNS_LABEL.match(namespace):
        raise SubstrateError(
            f"namespace {namespace!r} is not a valid name; use lowercase letters,"
            " digits and '-', starting and ending with a letter or digit"
        )
    return namespace


def _utc(moment: float | None) -> datetime | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC)


@dataclass
class _LocalRun:
    """A job supervised by a thread of this process (``detach=False``)."""

    supervisor: Supervisor
    thread: threading.Thread


class LocalBackend:
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
        self.supervisor_options = supervisor_options or SupervisorOptions()
        self.exclusive = exclusive
        """This process runs nothing but the one foreground job it submits (``kubemill
        run``): every process that ends up below it is that job's, even one that cleared
        its environment of the job's mark, as below a detached supervisor."""
        self._runs: dict[str, _LocalRun] = {}
        self._detached: list[subprocess.Popen[bytes]] = []
        """Detached supervisors started here, kept to be reaped (they are our children)."""
        self._runs_lock = threading.Lock()

    # --- submit ------------------------------------------------------------------------

    def submit(self, job: Job, options: SubmitOptions) -> JobView:
        """Record the job and start it: in a thread here, or under a detached supervisor."""
        support = entry_for(job.KIND).local
        if not support.runs:
            raise SubstrateError(
                f"{job.KIND} does not run on the local substrate: {support.why_not}"
            )
        job = job.model_copy(deep=True)
        self._set_namespace(job, options.namespace)
        uid = str(uuid.uuid4())
        job.metadata.uid = uid
        job.metadata.creation_timestamp = datetime.now(UTC).isoformat(timespec="seconds")
        job.status = type(job.status)()
        base_dir = str(Path(options.base_dir or Path.cwd()).absolute())
        if not Path(base_dir).is_dir():
            raise SubstrateError(f"base directory {base_dir} does not exist")
        job_dir = self._inside_state_dir(
            self.state_dir / "jobs" / job.namespace / f"{job.name}-{uid[:8]}"
        )
        if is_controller(job.KIND):
            return self._submit_controller(job, uid, base_dir, job_dir)
        ctx = PodContext.for_job(
            job_uid=uid, namespace=job.namespace, base_dir=base_dir, job_dir=str(job_dir)
        )
        environments = self._environments(job)
        log_policy = LogPolicy.load(self.config_path)
        # Read at submit, so a broken replicaStarts is an error here, not a job that fails.
        start_limits = self.supervisor_options.start_limits or StartLimits.load(self.config_path)
        me = procinfo.identify(os.getpid())
        mode = "detached" if options.detach else "foreground"
        wanted, ttl = listing_fields(job)
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
                manifest=_manifest(job),
                status=JobStatus().to_wire(),
                base_dir=base_dir,
                job_dir=str(job_dir),
                environments={k: v.to_json() for k, v in environments.items()},
                replicas=_replica_records(uid, prepared),
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
        except OSError as exc:
            # Nothing can run without its log files: forget the job rather than leave a
            # record no supervisor will ever take.
            self.store.remove_job(uid)
            raise SubstrateError(
                f"cannot create the job's log directory {job_dir / 'logs'}:"
                f" {exc.strerror or exc}; make {self.state_dir} writable, or set"
                f" {STATE_DIR_ENV} to a writable directory"
            ) from exc
        self._warn_ignored_containers(uid, job, prepared.plan)
        if options.detach:
            self._start_detached(uid, job_dir)
        else:
            self._start_here(uid, prepared, start_limits)
        return self.get(job.name, job.namespace)

    def _submit_controller(self, job: Job, uid: str, base_dir: str, job_dir: Path) -> JobView:
        """Record a controller's object (a job with no replicas: a schedule) and start its
        loop, always detached: it never ends, so no foreground process could see it through.

        Its template is checked as a run's job would be (a file not on this machine), at
        the controller's field paths: a run refused at every due time helps no one."""
        sample = controller_for(job.KIND).rules.sample_run(job)
        if sample is not None:
            run = sample.job
            refused = entry_for(run.KIND).local.refused(
                run, lambda path: (Path(base_dir) / path).exists()
            )
            if refused:
                where = f"{sample.spec_path}."
                raise NotRunnableLocally(
                    [replace(e, path=e.path.replace("spec.", where, 1)) for e in refused]
                )
        wanted, ttl = listing_fields(job)
        self.store.insert_job(
            NewJob(
                uid=uid,
                namespace=job.namespace,
                name=job.name,
                kind=job.KIND,
                manifest=_manifest(job),
                status=type(job.status)().to_wire(),
                base_dir=base_dir,
                job_dir=str(job_dir),
                environments={},
                replicas=[],
                ports={},
                supervisor=None,
                supervisor_mode="detached",
                wanted=wanted,
                ttl=ttl,
            )
        )
        try:
            job_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.store.remove_job(uid)
            raise SubstrateError(
                f"cannot create the directory of {job.KIND} {job.name}, {job_dir}:"
                f" {exc.strerror or exc};"
                f" make {self.state_dir} writable, or set {STATE_DIR_ENV} to a writable directory"
            ) from exc
        self._start_detached(uid, job_dir, kind=job.KIND)
        return self.get(job.name, job.namespace)

    def _inside_state_dir(self, path: Path) -> Path:
        """``path``, if it stays inside the state directory once resolved; else refuse it.

        Names are validated before this, so this is the last guard, for a job model whose
        name or namespace was changed after validation (a job directory elsewhere would be
        written, and later deleted, outside kubemill's own directory).
        """
        root = self.state_dir.resolve()
        if not path.resolve().is_relative_to(root):
            raise SubstrateError(
                f"refusing to write {path}: it is outside the state directory {root};"
                " check the job's metadata.name and namespace"
            )
        return path

    def _set_namespace(self, job: Job, namespace: str | None) -> None:
        for candidate in (namespace, job.metadata.namespace):
            if candidate is not None:
                _namespace(candidate)
        if namespace is None:
            return
        given = job.metadata.namespace
        if given and given != namespace:
            raise SubstrateError(
                f"the manifest says namespace {given!r} but {namespace!r} was asked for;"
                " remove metadata.namespace or ask for the same one"
            )
        job.metadata.namespace = namespace

    def _environments(self, job: Job) -> dict[str, Environment]:
        config = ImageConfig.load(self.config_path)
        _check_replica_cap(job, config)
        images: dict[str, Environment] = {}
        # Every container's image: which container runs is the kind's choice, made by the
        # Plan after this (by name, or the first one for kinds without a fixed name: MPI).
        for spec in job.replica_specs.values():
            for container in spec.template.spec.containers:
                image = container.image or ""
                if image not in images:
                    images[image] = config.resolve(image)
        return images

    def _warn_ignored_containers(self, uid: str, job: Job, plan: Plan) -> None:
        """Say so when a pod template has containers that do not run locally."""
        for rtype, spec in job.replica_specs.items():
            runs = next((r.container for r in plan.replicas if r.replica_type == rtype), None)
            if runs is None:
                continue  # no replica of the type
            pod = spec.template.spec
            others = [c.name for c in pod.containers if c.name != runs]
            others += [f"{c.name} (init)" for c in pod.init_containers or []]
            if others:
                self.store.add_event(
                    uid,
                    type="Warning",
                    reason="ContainersIgnored",
                    message=f"{rtype}: only container {runs!r} runs on the"
                    f" local substrate; not run: {', '.join(others)}",
                )

    def _start_here(self, uid: str, prepared: Prepared, start_limits: StartLimits) -> None:
        options = replace(self.supervisor_options, start_limits=start_limits)
        supervisor = Supervisor(
            self.store, uid, prepared=prepared, options=options, exclusive=self.exclusive
        )
        # Not a daemon: a script that submits with detach=False and ends still sees its
        # job through. The thread must live as long as the job: replicas get SIGKILL
        # when the thread that started them ends (PR_SET_PDEATHSIG is per thread).
        thread = threading.Thread(
            target=_supervise_quietly, args=(supervisor,), name=f"kubemill-supervisor-{uid[:8]}"
        )
        with self._runs_lock:
            self._runs[uid] = _LocalRun(supervisor, thread)
        thread.start()

    def _start_detached(
        self, uid: str, job_dir: Path, *, hand_over: bool = False, kind: str = ""
    ) -> None:
        # A controller's loop is its own module: it submits and deletes jobs, it runs none.
        module = "schedules" if is_controller(kind) else "supervisor"
        argv = [
            sys.executable,
            "-m",
            f"kubemill.substrates.local.{module}",
            "--state-dir",
            str(self.state_dir),
            "--job-uid",
            uid,
        ]
        env = None
        if self.config_path is not None:
            # The detached supervisor reads the start limits (replicaStarts) itself, from
            # the config this backend was given, not the user's default one.
            env = {**os.environ, CONFIG_ENV: str(Path(self.config_path).absolute())}
        with (job_dir / "supervisor.log").open("ab") as out:
            proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                close_fds=True,
                start_new_session=True,
            )
        # Reap supervisors that already ended, so a long-lived SDK process collects no zombies.
        self._detached = [p for p in self._detached if p.poll() is None]
        self._detached.append(proc)
        ident = procinfo.identify(proc.pid)
        if hand_over:
            # Resuming a job whose supervisor is gone: the new one waits for this.
            if ident is None or not self.store.hand_over(uid, ident):
                proc.kill()
                proc.wait()
                raise SubstrateError(
                    "the job changed while a new supervisor was started for it (it finished,"
                    " or another process resumed it); see `kubemill get`"
                )
        elif ident is not None:
            # The supervisor claims the job itself too; whichever comes first wins the same.
            self.store.claim_supervisor(uid, ident, mode="detached")

    # --- reads -------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> JobView:
        """The job now (healed if its supervisor died). Raises ``JobNotFound``."""
        rec = self._fresh(self.store.job(_namespace(namespace), name))
        if rec is None:
            # Deleted by its TTL just now.
            return self._not_found(name, namespace)
        return self._view(rec)

    def list(self, namespace: str | None = None) -> list[JobView]:
        """Every job (of ``namespace``, or all), oldest first."""
        views = []
        for rec in self.store.jobs(None if namespace is None else _namespace(namespace)):
            fresh = self._fresh(rec)
            if fresh is not None:
                views.append(self._view(fresh))
        return views

    def wait(
        self, name: str, namespace: str | None = None, timeout: float | None = None
    ) -> JobView:
        """Block until the job has finished and every replica stopped, or ``timeout``.

        Returns the job as it is then; check ``view.finished`` after a timeout.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        rec = self.store.job(_namespace(namespace), name)
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
            rec = self.store.job(_namespace(namespace), name)
            now = time.monotonic()
            if now >= next_heal:
                next_heal = now + 1.0
                healed = self._fresh(rec)
                if healed is None:
                    return self._not_found(name, namespace)
                rec = healed
            if rec.finished and rec.supervisor_state == "done":
                return self._view(rec)
            if deadline is not None and now >= deadline:
                return self._view(rec)
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
        rec = self.store.job(_namespace(namespace), name)
        replicas = self.store.replicas(rec.uid)
        if replica is not None:
            replicas = [_pick_replica(rec, replicas, replica)]
        query = query or LogQuery()
        logs = [ReplicaLog(r.name, r.log_path, query) for r in replicas]
        if not follow:
            return read_all(logs)
        return _follow_logs(self, rec.uid, logs)

    def progress(self, name: str, namespace: str | None = None) -> builtins.list[ProgressPoint]:
        """Every report of the first replica (in plan order) that made one: the replica
        the job's ``trainerStatus`` follows (:mod:`.progress`)."""
        rec = self.store.job(_namespace(namespace), name)
        self._fresh(rec)
        directory = Path(progress_dir(str(rec.job_dir)))
        for replica in self.store.replicas(rec.uid):
            points = history(Path(progress_file(str(directory), replica.name)))
            if points:
                return points
        return []

    def events(self, name: str, namespace: str | None = None) -> builtins.list[EventRecord]:
        """The job's events, oldest first."""
        rec = self.store.job(_namespace(namespace), name)
        self._fresh(rec)
        out: builtins.list[EventRecord] = []
        for row in self.store.events(rec.uid):
            out.append(
                EventRecord(
                    time=datetime.fromtimestamp(row.time, UTC),
                    type="Warning" if row.type == "Warning" else "Normal",
                    reason=row.reason,
                    message=row.message,
                    count=row.count,
                )
            )
        return out

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
        rec = self._fresh(self.store.job(_namespace(namespace), name))
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
            self._judge_unsupervised(rec)
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

    def _require_unfinished(self, name: str, namespace: str | None, verb: str) -> JobRecord:
        rec = self._fresh(self.store.job(_namespace(namespace), name))
        if rec is None:
            self._not_found(name, namespace)
            raise AssertionError("unreachable")
        if rec.finished:
            phase = JobStatus.model_validate(rec.status).phase
            raise SubstrateError(
                f"job {name} has already finished ({phase}); only a running or suspended job"
                f" can be {'suspended' if verb == 'suspend' else 'resumed'}. To run it again:"
                f" kubemill delete {name}, then submit it again"
            )
        return rec

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Stop every process of the job, verify none is left, and forget the job."""
        rec = self.store.job(_namespace(namespace), name)
        self._stop(rec, "delete", force=False)
        if is_controller(rec.kind):
            self._delete_runs(rec)
        self._kill_leftovers(rec, verify=True)
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
        self.store.remove_job(rec.uid)
        remove_socket(exec_socket_path(rec.job_dir, rec.uid))
        shutil.rmtree(rec.job_dir, ignore_errors=True)
        with self._runs_lock:
            self._runs.pop(rec.uid, None)

    def _stop(self, rec: JobRecord, what: str, *, force: bool, why: str = "") -> None:
        """Have the job's supervisor stop it (``interrupt`` or ``delete``) and wait.

        An interrupt is a stop annotation on the recorded job (value ``why``), which the
        supervisor's next reconcile carries out; a delete is a request to let go.
        """
        timeout = _grace(rec) + STOP_MARGIN
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
                self._judge_unsupervised(fresh)
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
        if rec.supervisor_state != "done" and not self._supervisor_alive(rec):
            rec = self._heal(rec)
        if rec.finished and rec.supervisor_state == "done":
            return self._expire(rec)
        return rec

    def _finish_delete(self, rec: JobRecord) -> JobRecord | None:
        """Complete a delete whose caller did not (None: done).

        A delete asks the supervisor to stop the job and let go, then removes it; if the
        deleting process died in between (killed, its terminal closed), the job would stay
        recorded as running with nothing running. As an API server finishes a deletion
        whoever asked for it, the next reader finishes it; the deleter, if still at it,
        finds nothing left to remove. A process that survives SIGKILL keeps the record,
        for ``delete`` to report.
        """
        try:
            self._kill_leftovers(rec, verify=True)
        except SubstrateError:
            return rec
        self._forget(rec)
        return None

    def _heal(self, rec: JobRecord) -> JobRecord:
        """The supervisor died: kill what is left, and have the core judge the job."""
        if is_controller(rec.kind):
            return self._heal_controller(rec)
        self._kill_leftovers(rec, verify=False)
        now = time.time()
        lost = []
        for r in self.store.replicas(rec.uid):
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
        self._judge_unsupervised(rec, now=now, lost=True)
        judged = self.store.job_by_uid(rec.uid)
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
        self.store.save_replicas(lost)
        self.store.set_supervisor_state(rec.uid, "done")
        healed = self.store.job_by_uid(rec.uid)
        return healed if healed is not None else rec

    def _heal_controller(self, rec: JobRecord) -> JobRecord:
        """A controller's loop died: no run starts any more (its runs, jobs of their own, go
        on). Reported as a job's lost supervisor is, and ``resume`` starts a new loop."""
        who = f"pid {rec.supervisor.pid}" if rec.supervisor is not None else "it never started"
        self.store.add_event(
            rec.uid,
            type="Warning",
            reason=SUPERVISOR_LOST,
            message=f"the loop of {rec.kind} {rec.namespace}/{rec.name} ({who}) is gone: no"
            f" run starts until `kubemill resume {rec.name}` starts a new one",
        )
        self.store.set_supervisor_state(rec.uid, "done")
        healed = self.store.job_by_uid(rec.uid)
        return healed if healed is not None else rec

    def _judge_unsupervised(
        self, rec: JobRecord, *, now: float | None = None, lost: bool = False
    ) -> None:
        """Ask the core about a job no supervisor runs; record its status and events once.

        ``lost``: the supervisor died while it ran the job; unless the job was asked to
        stop or to suspend (which the core then carries out as asked, nothing running
        any more), the core is told the substrate lost it (``Halt``).
        """
        moment = time.time() if now is None else now
        current = self.store.job_by_uid(rec.uid)
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
        pods = observed_records(self.store.replicas(rec.uid), lost=lost)
        plan = recorded_plan(job, self.store.ports(rec.uid), files_root=str(rec.files_dir))
        result = reconcile(
            job,
            plan,
            Observed(pods=pods, halt=halt),
            datetime.fromtimestamp(moment, UTC),
            options=self.supervisor_options.reconcile,
            lifecycle=lifecycle_for(job.KIND, local=True),
        )
        # Pod deletions are moot: no process of the job runs any more.
        status = result.status
        if self.store.settle_without_supervisor(
            rec.uid,
            status.to_wire(),
            finished=status.finished,
            supervisor_done=current.supervisor_state == "done",
        ):
            record_events(self.store, rec.uid, result, when=moment)

    def _kill_leftovers(self, rec: JobRecord, *, verify: bool) -> None:
        """SIGTERM/SIGKILL every replica process group that is still ours."""
        survivors: list[int] = []
        for r in self.store.replicas(rec.uid):
            if r.process is None:
                continue
            if not procinfo.stop_group(r.process, grace=LEFTOVER_GRACE) and verify:
                survivors.extend(procinfo.group_members(r.process.pid))
        # Processes that left the replicas' groups, re-parented away if the supervisor died.
        stray = procinfo.stop_processes(
            lambda: procinfo.marked(f"{rec.uid}/"), grace=LEFTOVER_GRACE
        )
        if verify:
            survivors.extend(stray)
        if survivors:
            raise SubstrateError(
                f"could not stop every process of job {rec.name}: pids {sorted(survivors)}"
                " survive SIGKILL (stuck in the kernel?); check them with `ps`"
            )

    def _expire(self, rec: JobRecord) -> JobRecord | None:
        """Delete a finished job whose ttlSecondsAfterFinished has passed (the core decides)."""
        job = rec.load_job()
        if job.run_policy.ttl_seconds_after_finished is None:
            return rec
        prepared = prepare_recorded(rec, self.store.ports(rec.uid))
        result = reconcile(
            job,
            prepared.plan,
            Observed(),
            datetime.now(UTC),
            lifecycle=lifecycle_for(job.KIND, local=True),
        )
        if not any(isinstance(a, DeleteJob) for a in result.actions):
            return rec
        self.store.remove_job(rec.uid)
        remove_socket(prepared.ctx.exec_socket)  # left by a supervisor that died
        shutil.rmtree(rec.job_dir, ignore_errors=True)
        return None

    # --- helpers -----------------------------------------------------------------------

    def _run(self, uid: str) -> _LocalRun | None:
        with self._runs_lock:
            return self._runs.get(uid)

    def _not_found(self, name: str, namespace: str | None) -> JobView:
        # Re-raise the store's own JobNotFound, with its message.
        self.store.job(_namespace(namespace), name)
        raise AssertionError("unreachable")

    def _view(self, rec: JobRecord) -> JobView:
        job = rec.load_job()
        replicas = tuple(_replica_view(r) for r in self.store.replicas(rec.uid))
        return JobView(job=job, status=job.status, replicas=replicas, created=_utc(rec.created))


def _check_replica_cap(job: Job, config: ImageConfig) -> None:
    """Refuse a job with more replicas than this machine is configured to start at once."""
    total = sum(job.replica_count(rtype) for rtype in job.replica_specs)
    cap = config.max_replicas_per_job
    if total > cap:
        where = config.path or config_path(None)
        raise SubstrateError(
            f"job {job.name} asks for {total} replicas, over the local cap of {cap} per job"
            f" (each replica is a process on this machine); to allow more, set"
            f" `{MAX_REPLICAS_KEY}: {total}` in {where}"
        )


def _supervise_quietly(supervisor: Supervisor) -> None:
    # A crash is recorded on the job by the supervisor itself; the thread just ends.
    with contextlib.suppress(Exception):
        supervisor.run()


def _follow_logs(backend: LocalBackend, uid: str, logs: list[ReplicaLog]) -> Iterator[LogLine]:
    run = backend._run(uid)
    if run is not None:
        # Supervised by a thread of this process (`kubemill run`): its own flag says when it
        # let go of the job (no replica can write any more), without a database read, so
        # it is asked on every pass and the last lines are printed as soon as the job ends.
        interval = QUICK_FOLLOW_INTERVAL if len(logs) <= QUICK_FOLLOW_LOGS else FOLLOW_INTERVAL
        yield from follow(
            logs, finished=run.supervisor.finished.is_set, interval=interval, check_every=0.0
        )
        return

    def finished() -> bool:
        rec = backend.store.job_by_uid(uid)
        if rec is None:
            return True
        fresh = backend._fresh(rec)
        return fresh is None or (fresh.finished and fresh.supervisor_state == "done")

    yield from follow(logs, finished=finished, check_every=FOLLOW_CHECK_EVERY)


def _pick_replica(rec: JobRecord, replicas: list[ReplicaRecord], wanted: str) -> ReplicaRecord:
    key = wanted.lower()
    for r in replicas:
        short = r.name[len(rec.name) + 1 :] if r.name.startswith(rec.name + "-") else r.name
        if key in (r.name.lower(), short.lower()):
            return r
    known = ", ".join(r.name[len(rec.name) + 1 :] for r in replicas)
    raise SubstrateError(f"job {rec.name} has no replica {wanted!r} (its replicas: {known})")


def _manifest(job: Job) -> dict[str, object]:
    wire = job.to_wire()
    wire.pop("status", None)
    return wire


def _grace(rec: JobRecord) -> float:
    job = rec.load_job()
    graces = [
        spec.template.spec.termination_grace_period_seconds for spec in job.replica_specs.values()
    ]
    return max([float(g) for g in graces if g is not None] or [DEFAULT_GRACE_SECONDS])


def _replica_records(uid: str, prepared: Prepared) -> list[ReplicaRecord]:
    records = []
    ports = prepared.network.ports
    for position, rep in enumerate(prepared.plan.replicas):
        main_container(rep)  # fails early if the template lost its main container
        records.append(
            ReplicaRecord(
                job_uid=uid,
                name=rep.name,
                replica_type=rep.replica_type,
                index=rep.index,
                position=position,
                log_path=prepared.specs[rep.name].log_path,
                address=replica_address(
                    rep.ports,
                    ports,
                    replica=rep.name,
                    preferred=prepared.job.DEFAULT_PORT_NAME,
                ),
            )
        )
    return records


def _replica_view(r: ReplicaRecord) -> ReplicaView:
    return ReplicaView(
        name=r.name,
        replica_type=r.replica_type,
        index=r.index,
        phase=r.phase,
        exit_code=r.exit_code,
        restarts=r.restart_count + r.retired_restarts,
        pid=r.process.pid if r.process is not None and r.phase == "Running" else None,
        started=_utc(r.started),
        finished=_utc(r.finished),
        reason=r.reason,
        message=r.message,
        address=r.address,
    )
