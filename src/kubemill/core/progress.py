"""A job's ``trainerStatus`` from its replicas' progress reports, at a bounded rate.

The substrate reads the reports (:class:`~kubemill.core.model.ObservedProgress`); this
module decides what the status says, so the rule is the same on every substrate:

- **Whose report.** The first replica in the Plan's order that reported (a master, a
  chief, worker 0, a launcher, a driver): one program's numbers, never a mix of ranks.
- **The shape** is Kubeflow Trainer v2's ``TrainerStatus``: ``progressPercentage`` is
  ``100 * step / total`` rounded down (within 0..100), ``estimatedRemainingSeconds`` the
  steps left at the speed measured since the report's ``origin`` (the first report of
  the program's current run), ``metrics`` the reported numbers as text, and
  ``lastUpdatedTime`` when the status was written. kubemill adds ``step`` and ``total``.
- **The rate.** A new report is written at once if the status has none yet, or if
  ``progress_interval`` has passed since ``lastUpdatedTime``; otherwise it waits (the
  pass asks to be run again when the interval is over) and the latest report then wins.
  A finished job gets its latest report at once, so the last numbers are never lost.
  The same report is never written twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from kubemill.api import Metric, TrainerStatus
from kubemill.core.model import ObservedProgress

INT32_MAX = 2**31 - 1
"""Upstream's fields are int32: an ETA past it (68 years) is written as the largest."""


def _value(number: float) -> str:
    """A metric as upstream's string: a short, exact-enough decimal (``0.2347``, ``3``)."""
    return f"{number:.6g}"


def _eta_seconds(report: ObservedProgress) -> int | None:
    if report.step is None or report.total is None or report.origin is None:
        return None
    since, first_step = report.origin
    done = report.step - first_step
    elapsed = (report.time - since).total_seconds()
    if done <= 0 or elapsed <= 0:
        return None
    left = max(0, report.total - report.step)
    return min(INT32_MAX, round(left * elapsed / done))


def summary(report: ObservedProgress, now: datetime) -> TrainerStatus:
    """The status one report makes, written at ``now``."""
    percent = None
    if report.step is not None and report.total is not None:
        percent = max(0, min(100, 100 * report.step // report.total))
    return TrainerStatus(
        progress_percentage=percent,
        estimated_remaining_seconds=_eta_seconds(report),
        metrics=[Metric(name=name, value=_value(value)) for name, value in report.metrics],
        last_updated_time=now,
        step=report.step,
        total=report.total,
    )


def _same_report(a: TrainerStatus, b: TrainerStatus) -> bool:
    return a.model_dump(exclude={"last_updated_time"}) == b.model_dump(
        exclude={"last_updated_time"}
    )


def trainer_status(
    previous: TrainerStatus | None,
    reports: Sequence[ObservedProgress],
    order: Sequence[str],
    now: datetime,
    *,
    interval: timedelta,
    final: bool,
) -> tuple[TrainerStatus | None, timedelta | None]:
    """The ``trainerStatus`` to record and, when a newer report waits for the rate bound,
    how long until it may be written. ``order`` is the Plan's replica names in order;
    ``final``: the job has finished (the latest report is written whatever the rate)."""
    by_pod = {r.pod: r for r in reports}
    chosen = next((by_pod[name] for name in order if name in by_pod), None)
    if chosen is None:
        return previous, None
    fresh = summary(chosen, now)
    if previous is not None and _same_report(previous, fresh):
        return previous, None
    last = previous.last_updated_time if previous is not None else None
    if final or last is None or now - last >= interval:
        return fresh, None
    return previous, last + interval - now
