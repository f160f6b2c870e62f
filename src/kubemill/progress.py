"""Progress reports from a job's program: ``kubemill.report(step=..., total=..., **metrics)``.

A replica's program says how far it got and what its scalar metrics are; kubemill turns
the reports into the job's ``status.trainerStatus`` (the shape Kubeflow Trainer v2 gives
its jobs' trainer status: ``progressPercentage``, ``estimatedRemainingSeconds``, ``metrics``,
``lastUpdatedTime``), which ``kubemill get`` shows as PROGRESS and ETA and the dashboard
plots over steps.

This module imports only the standard library and nothing else of kubemill, so that a job
whose image has no kubemill can copy it, or write the protocol itself:

**The protocol.** Every replica's environment names a file in ``KUBEMILL_PROGRESS_FILE``
(:data:`PROGRESS_FILE_ENV`). A report is one line appended to it: a JSON object with

- ``step`` (optional): an integer >= 0, how far the program got (an epoch, a batch);
- ``total`` (optional): an integer >= 1, the step at which it is done;
- ``time`` (optional): when, in seconds since the epoch (the reader's clock when absent);
- any other key: a metric, a finite number (``"loss": 0.25``); at most
  :data:`MAX_METRICS` of them, names of at most :data:`MAX_NAME` characters.

A report updates what it names: what it leaves out keeps its last value (give ``total``
once, report the loss every epoch and the step every batch). For instance, from a shell::

    echo '{"step": 3, "total": 10, "loss": 0.41}' >> "$KUBEMILL_PROGRESS_FILE"

A line is written whole with one ``write`` in append mode, so
lines of concurrent writers never interleave. A line that is not such an object (or longer
than :data:`MAX_LINE` bytes) is skipped with a warning, and the reports before and after it
count as usual. Without the variable (not run by kubemill) :func:`report` does nothing.

Which replica counts: every replica may report, and the job's status follows the first
replica in the job's order that did (the replica type its engine lists first: a master, a
chief, worker 0, a launcher, a driver); reporting from rank 0 only is enough.

How often: the program may report as often as it likes (each report is one small line);
kubemill reads the file as it supervises the job and writes the status at most once per
``ReconcileOptions.progress_interval`` (the latest report wins; the last one is written
when the job ends).
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

PROGRESS_FILE_ENV = "KUBEMILL_PROGRESS_FILE"
"""The variable naming the file a replica appends its progress reports to."""
MAX_LINE = 4096
"""The longest report line (bytes, newline included) a reader accepts."""
MAX_METRICS = 32
"""The most metrics one report may carry."""
MAX_NAME = 64
"""The longest metric name (Kubeflow Trainer's limit on a metric's name)."""
RESERVED = ("step", "total", "time")
"""Keys of a report line that are not metrics."""


class BadReport(ValueError):
    """A report line or call that does not follow the protocol (the message says why)."""


def _check_number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadReport(f"{key} must be a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise BadReport(f"{key} must be finite, not {value}")
    return float(value)


def _check_count(key: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BadReport(f"{key} must be an integer >= {least}, not {value!r}")
    return value


def validate(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` checked against the protocol: ``{"step", "total", "time", "metrics"}``
    (each of the first three ``None`` when absent); raises :class:`BadReport`."""
    step = report.get("step")
    total = report.get("total")
    when = report.get("time")
    metrics = {k: v for k, v in report.items() if k not in RESERVED}
    if step is not None:
        step = _check_count("step", step, 0)
    if total is not None:
        total = _check_count("total", total, 1)
    if when is not None:
        when = _check_number("time", when)
    if len(metrics) > MAX_METRICS:
        raise BadReport(f"{len(metrics)} metrics; at most {MAX_METRICS} per report")
    checked: dict[str, float] = {}
    for name, value in metrics.items():
        if not name or len(name) > MAX_NAME:
            raise BadReport(f"metric name {name!r} must have 1 to {MAX_NAME} characters")
        checked[name] = _check_number(f"metric {name!r}", value)
    if step is None and total is None and not checked:
        raise BadReport("a report needs a step, a total or a metric")
    return {"step": step, "total": total, "time": when, "metrics": checked}


def parse_line(line: bytes) -> dict[str, Any]:
    """One line of a progress file, validated (see :func:`validate`); raises
    :class:`BadReport` naming what is wrong with it."""
    if len(line) > MAX_LINE:
        raise BadReport(f"a line of {len(line)} bytes; at most {MAX_LINE}")
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadReport(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadReport(f"a report is a JSON object, not {type(value).__name__}")
    return validate(value)


def report(step: int | None = None, total: int | None = None, **metrics: float) -> bool:
    """Report this replica's progress and scalar metrics to kubemill.

    ``report(step=3, total=10, loss=0.41, accuracy=0.88)`` after the third of ten epochs.
    Every argument is optional, but a report needs at least one. Returns whether it was
    written: ``False`` when the program is not run by kubemill (no
    ``KUBEMILL_PROGRESS_FILE``). Raises :class:`BadReport` on arguments the protocol does
    not allow (a step that is not an integer, a metric that is not a finite number), so a
    mistake shows where it is made. Cheap enough to call every step: one short append.
    """
    path = os.environ.get(PROGRESS_FILE_ENV)
    line: dict[str, Any] = dict(metrics)
    if step is not None:
        line["step"] = step
    if total is not None:
        line["total"] = total
    validate(line)
    if not path:
        return False
    line["time"] = time.time()
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
    if len(data) > MAX_LINE:
        raise BadReport(f"the report is {len(data)} bytes as a line; at most {MAX_LINE}")
    # One write in append mode: concurrent writers' lines never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return True
