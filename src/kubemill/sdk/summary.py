"""What a job looks like in a list, for every front end over the SDK (the CLI's tables and the
dashboard's pages read it here, so they never disagree): its state word, ready and total
replicas, restarts, where it can be reached, and its replicas' short names; and the whole
row of a job list (:func:`row_of`), as the local store reads it without the models.

What differs between kinds is the registry's answer, never a kind named here: a controller's
object (it creates jobs of another kind) has no replicas of its own, and its record's
listing says its state word and its last run.
"""

from __future__ import annotations

from kubemill.kinds import is_controller, listing_of, web_ui_of
from kubemill.substrates.base import JobView
from kubemill.substrates.local.records import READY_PHASES
from kubemill.substrates.rows import NOT_KNOWN, JobSummary, ProgressSummary


def short_replica_name(job_name: str, replica: str) -> str:
    """``worker-1`` for ``myjob-worker-1``: the replica's name within its job."""
    prefix = f"{job_name}-"
    return replica[len(prefix) :] if replica.startswith(prefix) else replica


def total_replicas(view: JobView) -> int:
    """How many replicas the job asks for (what it has, if that is more)."""
    wanted = sum(view.job.replica_count(t) for t in view.job.replica_specs)
    return max(wanted, len(view.replicas))


def ready_replicas(view: JobView) -> int:
    """Replicas running or done successfully."""
    return sum(1 for r in view.replicas if r.phase in READY_PHASES)


def restarts(view: JobView) -> int:
    """Restarts of every replica together."""
    return sum(r.restarts for r in view.replicas)


def runs_no_pods(view: JobView) -> bool:
    """A controller's object (it creates jobs of another kind, listed beside it): no
    replicas and no restarts of its own (the registry's answer)."""
    return is_controller(view.kind)


def has_own_table(view: JobView) -> bool:
    """Whether the job's kind lists its objects in a table of its own (a controller's
    record says its columns): ``kubemill get <kind>`` shows that table."""
    return listing_of(view.kind) is not None


def state_of(view: JobView) -> str:
    """The job's one word: its phase, or what its controller's record words it as (a
    schedule's ``Suspended`` while it starts no run)."""
    listing = listing_of(view.kind)
    return view.phase if listing is None else listing.state(view.job)


def endpoint(view: JobView) -> str:
    """Where a service cluster serves (``status.endpoint``), "" for a job without one."""
    found = getattr(view.status, "endpoint", None)
    return found if isinstance(found, str) else ""


def web_ui(view: JobView) -> str:
    """The URL of the job's web UI when its status names one (its engine's record says
    where: a Spark driver's), else ``""``."""
    address = web_ui_of(view.job)
    return f"http://{address}" if address else ""


def progress(view: JobView) -> ProgressSummary | None:
    """The program's progress reports (``status.trainerStatus``), None if it made none."""
    shown = view.status.trainer_status
    if shown is None:
        return None
    return ProgressSummary(
        shown.progress_percentage, shown.step, shown.total, shown.estimated_remaining_seconds
    )


def progress_words(view: JobView) -> tuple[str, str]:
    """PROGRESS and ETA as every table words them (``45%``, ``2m10s``; ``-`` unknown)."""
    shown = progress(view)
    if shown is None:
        return NOT_KNOWN, NOT_KNOWN
    return shown.words(finished=view.finished)


def row_of(view: JobView) -> JobSummary:
    """The job's row of a job list (what :meth:`Store.summaries
    <kubemill.substrates.local.store.Store.summaries>` reads of a local job as it is
    stored)."""
    created = view.created or view.status.start_time
    controller = runs_no_pods(view)
    listing = listing_of(view.kind)
    last_name, last_at = ("", None) if listing is None else listing.last_run(view.job)
    return JobSummary(
        namespace=view.namespace,
        name=view.name,
        kind=view.kind,
        phase=state_of(view),
        ready=0 if controller else ready_replicas(view),
        total=0 if controller else total_replicas(view),
        restarts=0 if controller else restarts(view),
        created=None if created is None else created.timestamp(),
        endpoint=endpoint(view),
        controller=controller,
        last_run=None if last_at is None else last_at.timestamp(),
        last_run_name=None if listing is None else last_name,
        progress=progress(view),
        finished=view.finished,
    )


__all__ = [
    "endpoint",
    "has_own_table",
    "progress",
    "progress_words",
    "ready_replicas",
    "restarts",
    "row_of",
    "runs_no_pods",
    "short_replica_name",
    "state_of",
    "total_replicas",
    "web_ui",
]
