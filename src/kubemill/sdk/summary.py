"""What a job looks like in a list, for every front end over the SDK (the CLI's tables and the
dashboard's pages read it here, so they never disagree): its state word, ready and total
replicas, restarts, where it can be reached, and its replicas' short names."""

from __future__ import annotations

from kubemill.engines.spark.api.application import SparkApplicationStatus
from kubemill.engines.spark.api.scheduled import (
    ScheduledSparkApplication,
    ScheduledSparkApplicationStatus,
)
from kubemill.kinds import is_controller
from kubemill.substrates.base import JobView
from kubemill.substrates.local.summary import (
    READY_PHASES,
    ProgressSummary,
    eta_text,
    progress_text,
    schedule_phase,
)


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


def has_schedule_columns(view: JobView) -> bool:
    """Whether the job is listed with a schedule's columns (its cron schedule, suspend,
    last run, schedule state): a ScheduledSparkApplication."""
    return isinstance(view.job, ScheduledSparkApplication)


def schedule_state(view: JobView) -> str:
    """A schedule's state in the job list (``Suspended`` while suspended), as the quick
    listing words it (:func:`~kubemill.substrates.local.summary.schedule_phase`)."""
    assert isinstance(view.job, ScheduledSparkApplication)
    status = view.status
    state = (
        status.schedule_state.value if isinstance(status, ScheduledSparkApplicationStatus) else ""
    )
    return schedule_phase(state, suspended=bool(view.job.spec.suspend))


def state_of(view: JobView) -> str:
    """The job's one word: its phase, or a schedule's state."""
    return schedule_state(view) if has_schedule_columns(view) else view.phase


def endpoint(view: JobView) -> str:
    """Where a service cluster serves (``status.endpoint``), "" for a job without one."""
    found = getattr(view.status, "endpoint", None)
    return found if isinstance(found, str) else ""


def web_ui(view: JobView) -> str:
    """The URL of the job's web UI when its status names one (a Spark driver's
    ``driverInfo.webUIAddress``), else ``""``."""
    status = view.status
    if isinstance(status, SparkApplicationStatus) and status.driver_info.web_ui_address:
        return f"http://{status.driver_info.web_ui_address}"
    return ""


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
        return progress_text(None, None, None), eta_text(None, finished=view.finished)
    return (
        progress_text(shown.percent, shown.step, shown.total),
        eta_text(shown.eta, finished=view.finished),
    )
