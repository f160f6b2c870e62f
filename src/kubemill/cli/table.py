"""The job table of ``kubemill get``, drawn as text: one row per :class:`JobSummary`,
whichever substrate listed the jobs and however it read them.

Drawn here rather than by rich: rich measured every cell of a thousand rows and cost as
much to import as the listing itself. Columns are padded to their widest cell, three
spaces apart, the way ``kubectl get`` lays them out; a phase is coloured (ANSI) on a
terminal, as :func:`~.styling.colour_wanted` decides. Only the standard library and the
plain records of :mod:`kubemill.substrates.rows` are imported.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kubemill.cli.styling import styled
from kubemill.substrates.rows import NOT_KNOWN, JobSummary, ProgressSummary

HEADERS = ("NAME", "KIND", "STATE", "REPLICAS", "RESTARTS", "AGE")
PROGRESS_HEADERS = ("PROGRESS", "ETA")
"""The columns of a program's progress reports, shown when a listed job has reported."""
LAST_RUN = "LAST RUN"
"""The column of a controller's last run, shown when the list holds a controller."""
GAP = 3
"""Spaces between two columns."""
PIPE_WIDTH = 200
"""The width of rich's console when stdout is a file or pipe (``views.stdout_console``):
wide enough that nothing is cut short."""

PHASE_STYLES = {
    "Succeeded": "green",
    "Running": "cyan",
    "Restarting": "yellow",
    "Pending": "yellow",
    "Created": "yellow",
    "Suspended": "yellow",
    "Failed": "bold red",
    "Unknown": "magenta",
    "Stopped": "dim",
    "Scheduled": "cyan",
    "FailedValidation": "bold red",
    # An application run again as a whole words its states in capitals (Spark's words).
    "COMPLETED": "green",
    "RUNNING": "cyan",
    **dict.fromkeys(
        (
            "NEW",
            "SUBMITTED",
            "SUCCEEDING",
            "PENDING_RERUN",
            "INVALIDATING",
            "SUSPENDING",
            "SUSPENDED",
            "RESUMING",
        ),
        "yellow",
    ),
    **dict.fromkeys(("FAILING", "FAILED", "SUBMISSION_FAILED"), "bold red"),
    "UNKNOWN": "magenta",
}
"""A phase's colour (rich style names, which ``describe`` and ``run`` use;
:data:`~.styling.ANSI` for those drawn here)."""


def age_text(seconds: float) -> str:
    """How long ago, the kubectl way: ``42s``, ``5m``, ``3h``, ``2d``."""
    whole = max(0, int(seconds))
    if whole < 120:
        return f"{whole}s"
    if whole < 2 * 3600:
        return f"{whole // 60}m"
    if whole < 2 * 86400:
        return f"{whole // 3600}h"
    return f"{whole // 86400}d"


def last_run_text(name: str, ago: str) -> str:
    """A controller's last run as the job list shows it: ``NAME (5m ago)``."""
    return f"{name} ({ago} ago)" if ago else name


def progress_cells(shown: ProgressSummary | None, *, finished: bool) -> list[str]:
    """The PROGRESS and ETA cells of one job."""
    if shown is None:
        return [NOT_KNOWN, NOT_KNOWN]
    return list(shown.words(finished=finished))


def jobs_text(
    rows: Sequence[JobSummary],
    *,
    one_namespace: bool = False,
    colour: bool = False,
    now: float | None = None,
) -> str:
    """NAME, KIND, STATE, REPLICAS ready/total, RESTARTS, AGE: one line per job, and a
    header line. Like ``kubectl get -A``, NAMESPACE comes first once jobs live in more
    than the default one (unless the list is of ``one_namespace``); PROGRESS and ETA once
    a listed job has reported progress, ENDPOINT once a service cluster has one, LAST RUN
    once a controller that keeps its last run is listed. A controller has no replicas and
    no restarts of its own (its runs are jobs of their own, listed beside it): ``-`` there."""
    moment = time.time() if now is None else now
    namespaced = not one_namespace and any(r.namespace != "default" for r in rows)
    endpoints = any(r.endpoint for r in rows)
    last_runs = any(r.last_run_name is not None for r in rows)
    progress = any(r.progress is not None for r in rows)
    headers = (
        *(("NAMESPACE",) if namespaced else ()),
        *HEADERS,
        *(PROGRESS_HEADERS if progress else ()),
        *(("ENDPOINT",) if endpoints else ()),
        *((LAST_RUN,) if last_runs else ()),
    )
    lines = [
        (
            *([r.namespace] if namespaced else []),
            r.name,
            r.kind,
            r.phase,
            NOT_KNOWN if r.controller else f"{r.ready}/{r.total}",
            NOT_KNOWN if r.controller else str(r.restarts),
            NOT_KNOWN if r.created is None else age_text(moment - r.created),
            *(progress_cells(r.progress, finished=r.finished) if progress else []),
            *([r.endpoint] if endpoints else []),
            *([_last_run(r, moment)] if last_runs else []),
        )
        for r in rows
    ]
    return columns_text(headers, lines, colour=colour, state=headers.index("STATE"))


def columns_text(
    headers: Sequence[str], lines: Sequence[Sequence[str]], *, colour: bool, state: int
) -> str:
    """A header line and one line per row, each column padded to its widest cell and
    :data:`GAP` spaces apart; the header bold and the cells of column ``state`` in their
    phase's colour, when colouring. ``get``'s job table, and ``run``'s replica table."""
    widths = [max([len(h), *(len(line[i]) for line in lines)]) + GAP for i, h in enumerate(headers)]
    widths[-1] -= GAP
    drawn = [_line(headers, widths, colour, bold=True, state=-1)]
    drawn += [_line(line, widths, colour, bold=False, state=state) for line in lines]
    return "".join(drawn)


def empty_text(what: str, *, colour: bool) -> str:
    """The line of an empty list: ``No jobs found.``, dimmed."""
    return styled(f"No {what}s found.", "dim", colour) + "\n"


def _last_run(row: JobSummary, moment: float) -> str:
    if not row.last_run_name:
        return NOT_KNOWN
    ago = "" if row.last_run is None else age_text(moment - row.last_run)
    return last_run_text(row.last_run_name, ago)


def _line(cells: Sequence[str], widths: list[int], colour: bool, *, bold: bool, state: int) -> str:
    if not colour:
        # Every cell padded to its column and the gap (the last one to its column only).
        return "".join(map(str.ljust, cells, widths)) + "\n"
    parts = []
    for i, cell in enumerate(cells):
        style = "bold" if bold else (PHASE_STYLES.get(cell, "") if i == state else "")
        parts.append(styled(cell, style, colour) + " " * (widths[i] - len(cell)))
    return "".join(parts) + "\n"


__all__ = [
    "HEADERS",
    "PHASE_STYLES",
    "PIPE_WIDTH",
    "age_text",
    "columns_text",
    "empty_text",
    "jobs_text",
    "last_run_text",
    "progress_cells",
]
