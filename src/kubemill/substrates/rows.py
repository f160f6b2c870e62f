"""A job list's row (:class:`JobSummary`, one per job) and how its progress cells are worded.

Plain data, so that every list is drawn by one renderer (``kubemill get``'s table) whichever
substrate listed the jobs: the local store reads the rows as they are stored, without the
job models; the SDK takes them from its job views (:func:`kubemill.sdk.summary.row_of`).
Only the standard library is imported.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressSummary:
    """What a job list shows of a job's ``status.trainerStatus``."""

    percent: int | None
    step: int | None
    total: int | None
    eta: int | None
    """``estimatedRemainingSeconds``."""

    def words(self, *, finished: bool) -> tuple[str, str]:
        """PROGRESS and ETA as every table words them: ``45%`` (``step 3`` without a total),
        ``2m10s``; ``-`` where unknown, and for the ETA once the job has finished (the
        estimate was of a run that is over)."""
        return progress_text(self.percent, self.step, self.total), eta_text(
            self.eta, finished=finished
        )


NOT_KNOWN = "-"
"""A cell with nothing to show (every table's ``-``)."""


def progress_text(percent: int | None, step: int | None, total: int | None) -> str:
    """``45%``; ``step 3`` without a total; ``-`` before any report."""
    if percent is not None:
        return f"{percent}%"
    if step is not None:
        return f"step {step}" if total is None else f"{step}/{total}"
    return NOT_KNOWN


def eta_text(seconds: int | None, *, finished: bool) -> str:
    """The estimated time left: ``42s``, ``5m10s``, ``3h05m``, ``2d04h``; ``-`` when
    unknown or once the job has finished."""
    if seconds is None or finished:
        return NOT_KNOWN
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


@dataclass(frozen=True)
class JobSummary:
    """One row of a job list (``kubemill get``): plain data, read from a substrate's store
    as it is or taken from a :class:`JobView`, so every list is drawn by one renderer."""

    namespace: str
    name: str
    kind: str
    phase: str
    """The job's one word: its phase, or a controller's state."""
    ready: int
    total: int
    """The replicas the job asks for, or the replicas it has if that is more."""
    restarts: int
    created: float | None
    """Seconds since the epoch; None if the substrate does not know."""
    endpoint: str = ""
    """Where a service cluster serves (``status.endpoint``), "" for none."""
    controller: bool = False
    """A controller's object: no replicas of its own (its runs are jobs of their own)."""
    last_run: float | None = None
    """When a controller's last run was due (seconds since the epoch), None before its
    first."""
    last_run_name: str | None = None
    """A controller's last run's name ("" before its first); None for a job whose kind
    keeps no last run."""
    progress: ProgressSummary | None = None
    """The program's progress reports (``status.trainerStatus``), None if it made none."""
    finished: bool = False


__all__ = ["NOT_KNOWN", "JobSummary", "ProgressSummary", "eta_text", "progress_text"]
