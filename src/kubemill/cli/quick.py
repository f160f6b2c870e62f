"""``kubemill get`` (the job list, as a table) on the local substrate, without typer, rich
or the job models.

Listing a thousand jobs took 0.65 s: typer builds a pydantic adapter per option on every
command, the job models are imported, each stored manifest was validated back into its
model, and rich measured every cell. Here the console script reads the arguments of
the common forms itself (``kubemill [--state-dir D] [--substrate local] [-n NS] get [-n
NS] [-o table]``), asks :func:`~kubemill.substrates.local.summary.read_summaries` for one
row per job, and prints the very table :func:`kubemill.cli.views.jobs_table` draws (a
test compares the two).

Anything else -- another verb or option, ``--help``, a job name, another substrate, a
plugin to load, a state that needs healing or migrating, a terminal that rich would
treat differently -- returns ``None`` and the full command runs, which answers exactly
as it always did.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Sequence

from kubemill.substrates.local.summary import (
    JobSummary,
    ProgressSummary,
    eta_text,
    progress_text,
    read_summaries,
)

HEADERS = ("NAME", "KIND", "STATE", "REPLICAS", "RESTARTS", "AGE")
GAP = 3
"""Spaces between two columns (``jobs_table``'s right padding)."""
PIPE_WIDTH = 200
"""Table width when stdout is a file or pipe: wide enough that nothing is cut short
(``views.stdout_console``)."""

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
    # A SparkApplication's states (the spark-operator's words).
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
"""A phase's colour (rich style names; :data:`ANSI` for those used here)."""

ANSI = {
    "bold": "1",
    "dim": "2",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
    "magenta": "35",
    "bold red": "1;31",
}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_GLOBAL = {"--state-dir": "state_dir", "--substrate": "substrate", "--namespace": "namespace"}
_GET = {"--namespace": "namespace", "--output": "output"}
_SHORT = {"-n": "--namespace", "-o": "--output"}


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


def quick_get(argv: Sequence[str]) -> int | None:
    """Print the job list and return 0, or ``None`` if the full command must answer."""
    options = _parse(argv)
    if options is None or os.environ.get("KUBEMILL_ENGINES"):
        return None
    substrate = options.get("substrate") or os.environ.get("KUBEMILL_SUBSTRATE") or "local"
    namespace = options.get("namespace")
    if substrate.lower() != "local" or options.get("output", "table") != "table":
        return None
    if namespace is not None and not _DNS_LABEL.match(namespace):
        return None  # the full command says what is wrong with it
    colour = _colour()
    if colour is None:
        return None
    state_dir = options.get("state_dir") or None
    summaries = read_summaries(state_dir, namespace)
    if summaries is None:
        return None
    if not summaries:
        text = _styled("No jobs found.", "dim", colour) + "\n"
    else:
        text = jobs_text(summaries, one_namespace=namespace is not None, colour=colour)
        if _too_wide(text, terminal=colour):
            return None  # rich shrinks a table wider than its console
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader has had enough (`kubemill get | head`): not an error. Later flushes
        # (at exit) go nowhere instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


LAST_RUN = "LAST RUN"
"""The column of a schedule's last run, shown when the list holds a schedule."""
NONE = "-"
"""A cell with nothing to show: a schedule's replicas and restarts (it has none; its runs
are jobs of their own, listed beside it)."""


PROGRESS_HEADERS = ("PROGRESS", "ETA")
"""The columns of a program's progress reports, shown when a listed job has reported."""


def last_run_text(name: str, ago: str, *, schedule: bool) -> str:
    """A schedule's last run as the job list shows it: ``NAME (5m ago)``; ``-`` before
    its first run, and for a job that is no schedule."""
    if not schedule or not name:
        return NONE
    return f"{name} ({ago} ago)" if ago else name


def jobs_text(
    summaries: Sequence[JobSummary],
    *,
    one_namespace: bool = False,
    colour: bool = False,
    now: float | None = None,
) -> str:
    """The table of ``kubemill get``, laid out as ``jobs_table`` lays it out."""
    moment = time.time() if now is None else now
    namespaced = not one_namespace and any(s.namespace != "default" for s in summaries)
    # A service cluster's endpoint gets a column of its own, only when one is listed;
    # so does a schedule's last run.
    endpoints = any(s.endpoint for s in summaries)
    schedules = any(s.schedule for s in summaries)
    progress = any(s.progress is not None for s in summaries)
    headers = (
        *(("NAMESPACE",) if namespaced else ()),
        *HEADERS,
        *(PROGRESS_HEADERS if progress else ()),
        *(("ENDPOINT",) if endpoints else ()),
        *((LAST_RUN,) if schedules else ()),
    )
    rows = [
        (
            *([s.namespace] if namespaced else []),
            s.name,
            s.kind,
            s.phase,
            NONE if s.schedule else f"{s.ready}/{s.total}",
            NONE if s.schedule else str(s.restarts),
            age_text(moment - s.created),
            *(progress_cells(s.progress, finished=s.finished) if progress else []),
            *([s.endpoint] if endpoints else []),
            *([_last_run(s, moment)] if schedules else []),
        )
        for s in summaries
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    state = headers.index("STATE")
    lines = [_line(headers, widths, colour, bold=True, state=-1)]
    lines += [_line(row, widths, colour, bold=False, state=state) for row in rows]
    return "".join(lines)


def progress_cells(shown: ProgressSummary | None, *, finished: bool) -> list[str]:
    """The PROGRESS and ETA cells of one job (both tables draw them here)."""
    if shown is None:
        return [NONE, NONE]
    return [
        progress_text(shown.percent, shown.step, shown.total),
        eta_text(shown.eta, finished=finished),
    ]


def _last_run(summary: JobSummary, moment: float) -> str:
    ago = "" if summary.last_run is None else age_text(moment - summary.last_run)
    return last_run_text(summary.last_run_name, ago, schedule=summary.schedule)


def _line(cells: Sequence[str], widths: list[int], colour: bool, *, bold: bool, state: int) -> str:
    parts = []
    last = len(cells) - 1
    for i, cell in enumerate(cells):
        pad = " " * (widths[i] - len(cell) + (0 if i == last else GAP))
        style = "bold" if bold else (PHASE_STYLES.get(cell, "") if i == state else "")
        parts.append(_styled(cell, style, colour) + pad)
    return "".join(parts) + "\n"


def _styled(text: str, style: str, colour: bool) -> str:
    code = ANSI.get(style) if colour else None
    return f"\x1b[{code}m{text}\x1b[0m" if code else text


def _colour() -> bool | None:
    """Whether to colour (a terminal, as rich sees one); ``None``: let rich decide."""
    if any(os.environ.get(v) for v in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")):
        return None
    try:
        terminal = os.isatty(sys.stdout.fileno())
    except (AttributeError, ValueError, OSError):
        return None
    if not terminal:
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM", "") in ("dumb", "unknown", ""):
        return None
    return True


def _too_wide(text: str, *, terminal: bool) -> bool:
    """Wider than rich's console would be: the terminal, else at least ``PIPE_WIDTH``."""
    if os.environ.get("COLUMNS"):
        return True  # rich's own reading of it decides
    if terminal:
        try:
            columns = os.get_terminal_size(sys.stdout.fileno()).columns
        except OSError:
            return True
    else:
        columns = PIPE_WIDTH
    longest = max(len(re.sub(r"\x1b\[[0-9;]*m", "", line)) for line in text.splitlines())
    return longest > columns


def _parse(argv: Sequence[str]) -> dict[str, str] | None:
    """The options of ``[global options] get [options]``; ``None`` for anything else."""
    found: dict[str, str] = {}
    args = list(argv)
    allowed = _GLOBAL
    seen_get = False
    while args:
        arg = args.pop(0)
        if arg == "get" and not seen_get:
            seen_get, allowed = True, _GET
            continue
        name, eq, value = arg.partition("=")
        name = _SHORT.get(name, name)
        if not eq and arg[:2] in _SHORT and len(arg) > 2 and not arg.startswith("--"):
            name, value, eq = _SHORT[arg[:2]], arg[2:], "="  # -nNS, -otable
        if name not in allowed:
            return None
        if not eq:
            if not args:
                return None
            value = args.pop(0)
        found[allowed[name]] = value
    return found if seen_get else None


__all__ = ["PHASE_STYLES", "PIPE_WIDTH", "age_text", "jobs_text", "quick_get"]
