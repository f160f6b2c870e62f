"""A job list's row of a locally recorded job (:class:`~kubemill.substrates.rows.JobSummary`),
read from the columns the listing query selects: the stored status in its wire form, beside
``wanted`` and ``ttl`` (:func:`~.state_schema.listing_fields`), without the job models.

Apart from :mod:`.records` so that a submission, which loads the store, makes none of a job
list's records; :meth:`~.store.Store.summaries` imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from kubemill.substrates.local import procinfo
from kubemill.substrates.local.records import (
    SUPERVISOR_START_GRACE,
    phase_of,
)
from kubemill.substrates.rows import JobSummary, ProgressSummary

SCHEDULE_STATE = "scheduleState"
"""The status field only a schedule's status has (a controller that creates runs on a cron
schedule; empty before its first pass): what tells a controller's row, without the models."""
SUSPENDED = "Suspended"


def schedule_phase(state: str, *, suspended: bool) -> str:
    """A schedule's word in the job list: ``Suspended`` while its ``spec.suspend`` keeps
    new runs from starting (upstream's state stays ``Scheduled`` then, with ``suspend``
    in a column of its own, which the job list has not), else its state (``New`` before
    its first pass, ``Scheduled``, ``FailedValidation``)."""
    word = state or "New"
    return SUSPENDED if suspended and word in ("New", "Scheduled") else word


def progress_of(status: Mapping[str, Any]) -> ProgressSummary | None:
    """A status's ``trainerStatus`` in its wire form, None if the job reported none."""
    trainer = status.get("trainerStatus")
    if not isinstance(trainer, dict):
        return None

    def number(key: str) -> int | None:
        value = trainer.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return ProgressSummary(
        number("progressPercentage"),
        number("step"),
        number("total"),
        number("estimatedRemainingSeconds"),
    )


def job_summary(row: tuple[Any, ...], now: float) -> JobSummary | None:
    """A job list's row from one row of :data:`~.state_schema.LISTING_QUERY` (a plain tuple,
    in the query's order: a thousand rows read by name cost more than the query); None when
    the job needs the core first (its supervisor died: heal it; its TTL may have passed:
    delete it) or its record cannot be read as it is (the full read reports what is wrong)."""
    (namespace, name, kind, wanted, ttl, finished, status, created, state) = row[:9]
    if state != "done" and not _supervisor_alive(row[9:12], created, now):
        return None
    if finished and state == "done" and ttl is not None and _expired(status, ttl, now):
        return None
    wire = _status(status)
    if wire is None:
        return None
    suspend, present, ready, restarts = row[12:16]
    summary = JobSummary(
        namespace,
        name,
        kind,
        phase_of(wire, finished=bool(finished)),
        ready,
        max(wanted, present),
        restarts,
        created,
        _endpoint(wire),
        # A job that asks for no replicas and has none is a controller's object: the
        # registry's controllers are the kinds without replica specs.
        controller=wanted == 0 and present == 0,
        progress=progress_of(wire),
        finished=bool(finished),
    )
    if SCHEDULE_STATE not in wire:
        return summary
    return _as_schedule(summary, wire, suspended=bool(suspend))


def _supervisor_alive(recorded: tuple[Any, ...], created: float, now: float) -> bool:
    pid, start, boot = recorded
    if pid is None or start is None:
        # Submitted, supervisor not recorded yet: the submitter has some time.
        return now - created < SUPERVISOR_START_GRACE
    return procinfo.is_alive(procinfo.ProcessId(pid=pid, start_ticks=start, boot_id=boot or ""))


def _status(status: str) -> Mapping[str, Any] | None:
    """The stored status in its wire form, None if it is not a JSON object."""
    try:
        wire = json.loads(status)
    except ValueError:
        return None
    return wire if isinstance(wire, dict) else None


def _endpoint(wire: Mapping[str, Any]) -> str:
    """A service cluster's ``status.endpoint`` ("" for none)."""
    endpoint = wire.get("endpoint")
    return endpoint if isinstance(endpoint, str) else ""


def _as_schedule(
    summary: JobSummary, wire: Mapping[str, Any], *, suspended: bool
) -> JobSummary | None:
    """A schedule's row: its schedule state and its last run (None: a time it cannot read,
    which the full read reports)."""
    last = wire.get("lastRun")
    try:
        last_run = None if last is None else datetime.fromisoformat(str(last)).timestamp()
    except ValueError:
        return None
    return replace(
        summary,
        phase=schedule_phase(str(wire.get(SCHEDULE_STATE) or ""), suspended=suspended),
        last_run=last_run,
        last_run_name=str(wire.get("lastRunName") or ""),
    )


def _expired(status: str, ttl: float, now: float) -> bool:
    """Whether the TTL may have passed (the core decides): when in doubt, say so."""
    try:
        completed = json.loads(status).get("completionTime")
        finished_at = datetime.fromisoformat(completed).timestamp()
    except (ValueError, TypeError, AttributeError):
        return True
    return now >= finished_at + ttl
