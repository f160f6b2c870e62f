"""What a reader of the local substrate gets of a recorded job (its view, one replica by
name, its grace period), and a job supervised by a thread of this process
(:class:`LocalRun`). Its other reads (logs followed, events, progress, resources) are in
:mod:`.job_reads`, loaded when first asked for.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kubemill.substrates.base import Children, JobNotFound, JobView, ReplicaView, SubstrateError
from kubemill.substrates.local.launch import DEFAULT_GRACE_SECONDS
from kubemill.substrates.local.prepared import Prepared
from kubemill.substrates.local.store import JobRecord, ReplicaRecord, Store, checked_namespace

if TYPE_CHECKING:
    # The supervisor (its loop, the kubelet stand-in, the exec service) is imported only
    # by a process that supervises a job itself: a detached submission never does.
    from kubemill.substrates.local.supervisor import Supervisor, SupervisorOptions
    from kubemill.substrates.reads import ResourceReport


def _utc(moment: float | None) -> datetime | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC)


@dataclass
class LocalRun:
    """A job supervised by a thread of this process (``detach=False``)."""

    supervisor: Supervisor
    thread: threading.Thread

    @classmethod
    def of(
        cls,
        store: Store,
        uid: str,
        prepared: Prepared,
        *,
        options: SupervisorOptions,
        exclusive: bool,
    ) -> LocalRun:
        """A supervisor for the recorded job and its thread, not started yet."""
        from kubemill.substrates.local.supervisor import Supervisor

        supervisor = Supervisor(store, uid, prepared=prepared, options=options, exclusive=exclusive)
        # Not a daemon: a script that submits with detach=False and ends still sees its
        # job through. The thread must live as long as the job: replicas get SIGKILL
        # when the thread that started them ends (PR_SET_PDEATHSIG is per thread).
        thread = threading.Thread(
            target=_supervise_quietly, args=(supervisor,), name=f"kubemill-supervisor-{uid[:8]}"
        )
        return cls(supervisor, thread)


def _supervise_quietly(supervisor: Supervisor) -> None:
    # A crash is recorded on the job by the supervisor itself; the thread just ends.
    with contextlib.suppress(Exception):
        supervisor.run()


def job_view(store: Store, rec: JobRecord, replicas: list[ReplicaRecord] | None = None) -> JobView:
    """What a reader gets of a recorded job: the job, its status and its replicas.

    ``replicas``: the job's replica records when the caller read them already (a listing
    reads every job's in one query); else they are read here.
    """
    job = rec.load_job()
    if replicas is None:
        replicas = store.replicas(rec.uid)
    views = tuple(_replica_view(r) for r in replicas)
    return JobView(job=job, status=job.status, replicas=views, created=_utc(rec.created))


class ListedViews:
    """Each job's view as the last listing built it, with the records it was built from.

    Loading a manifest into its model is most of a listing's time; a reader that lists
    again and again (the dashboard, every half second) rebuilds only the views of jobs
    whose records changed. A view is a function of its records, and readers only read
    views, so one is handed out again as it is.
    """

    def __init__(self) -> None:
        self._known: dict[str, tuple[JobRecord, tuple[ReplicaRecord, ...], JobView]] = {}

    def views(
        self,
        store: Store,
        records: list[JobRecord],
        namespace: str | None,
    ) -> list[JobView]:
        """The views of ``records`` (the jobs of ``namespace``, or all), in their order;
        every job's replicas are read in one query."""
        replicas = store.replicas_of([rec.uid for rec in records])
        views = []
        for rec in records:
            mine = tuple(replicas[rec.uid])
            known = self._known.get(rec.uid)
            if known is not None and known[0] == rec and known[1] == mine:
                views.append(known[2])
                continue
            view = job_view(store, rec, list(mine))
            self._known[rec.uid] = (rec, mine, view)
            views.append(view)
        # Forget the listed namespace's jobs that are gone.
        listed = {rec.uid for rec in records}
        for uid, (rec, _, _) in list(self._known.items()):
            if uid not in listed and namespace in (None, rec.namespace):
                self._known.pop(uid, None)
        return views


class RecordReads:
    """The reads of a recorded job that need only the store (the local backend's)."""

    store: Store

    def _job(self, name: str, namespace: str | None) -> JobRecord:
        """The job ``name`` (``NAME`` or ``kind/NAME``, as kubectl and the Kubernetes
        substrate take it) of ``namespace``; :class:`JobNotFound` if there is none (of
        that kind). A name is one job of a namespace here, whatever its kind."""
        kind, bare = _split_kind(name)
        rec = self.store.job(checked_namespace(namespace), bare)
        if kind is not None and rec.kind != kind:
            raise JobNotFound(
                f"no {kind} {bare!r} in namespace {rec.namespace!r} (its kind is {rec.kind})"
            )
        return rec

    def resources(self, name: str, namespace: str | None = None) -> ResourceReport:
        """Each replica's CPU and memory as its supervisor sampled them (:mod:`.sampling`)."""
        from kubemill.substrates.local import job_reads  # not a submission's: see there

        return job_reads.resources(self.store, self._job(name, namespace))

    def children(self, name: str, namespace: str | None = None) -> Children | None:
        """Locally a program makes no pods: its kind's note says what its children are."""
        from kubemill.substrates.local import job_reads  # not a submission's: see there

        return job_reads.children(self._job(name, namespace))


def _split_kind(name: str) -> tuple[str | None, str]:
    """``NAME`` -> (None, NAME); ``kind/NAME`` -> (the kind it names, NAME), a kind named as
    ``kubemill get KIND`` takes it (:func:`kubemill.kinds.kind_named`)."""
    if "/" not in name:
        return None, name
    from kubemill.kinds import entries, kind_named  # the registry: only for a name with a kind

    prefix, _, bare = name.partition("/")
    kind = kind_named(prefix)
    if kind is None or not bare:
        known = ", ".join(f"{entry.api.singular}/NAME" for entry in entries())
        raise SubstrateError(f"cannot tell which job {name!r} means: write NAME or one of {known}")
    return kind, bare


def pick_replica(rec: JobRecord, replicas: list[ReplicaRecord], wanted: str) -> ReplicaRecord:
    key = wanted.lower()
    for r in replicas:
        short = r.name[len(rec.name) + 1 :] if r.name.startswith(rec.name + "-") else r.name
        if key in (r.name.lower(), short.lower()):
            return r
    known = ", ".join(r.name[len(rec.name) + 1 :] for r in replicas)
    raise SubstrateError(f"job {rec.name} has no replica {wanted!r} (its replicas: {known})")


def grace_of(rec: JobRecord) -> float:
    """The job's longest termination grace period, in seconds."""
    job = rec.load_job()
    graces = [
        spec.template.spec.termination_grace_period_seconds for spec in job.replica_specs.values()
    ]
    return max([float(g) for g in graces if g is not None] or [DEFAULT_GRACE_SECONDS])


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
