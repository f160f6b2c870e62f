"""Progress reports from a job's program: ``kubemill.report(step=..., total=..., **metrics)``.

A replica's program says how far it got and what its scalar metrics are; kubemill turns
the reports into the job's ``status.trainerStatus`` (the shape Kubeflow Trainer v2 gives
its jobs' trainer status: ``progressPercentage``, ``estimatedRemainingSeconds``, ``metrics``,
``lastUpdatedTime``), which ``kubemill get`` shows as PROGRESS and ETA and the dashboard
plots over steps.

This module imports only the standard library and nothing else of kubemill, so that a job
whose image has no kubemill can copy it, or write the protocol itself (the forwarder below,
which runs in kubemill's own image, sends through :mod:`kubemill.http_client`, itself of the
standard library only, imported when it runs):

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

**On Kubernetes** the file is in an ``emptyDir`` the replica's pod shares with a sidecar
running this module's forwarder (:func:`main`, ``--forward URL ...``): it follows the file,
keeps the latest report (merged as above: :func:`merge`) and POSTs it to the operator at
most once per interval, authenticated by the pod's own service-account token of the
``kubemill-progress`` audience (see :func:`forward`).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from kubemill.http_client import HttpClient

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
    # Readable by the pod's other users: on Kubernetes a sidecar of another uid forwards it
    # (the file is in a directory of the job only: locally its 0700 job dir, there the pod's).
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return True


# --- the forwarder (the sidecar of a replica's pod on Kubernetes) ------------------------------

FORWARD_AUDIENCE = "kubemill-progress"
"""The audience of the service-account token the forwarder presents: the operator asks the API
server (a TokenReview) whether a token of this audience is bound to a pod of the job; the
API server itself accepts no token of it."""
FORWARD_INTERVAL = 2.0
"""Seconds between two reports the forwarder sends (the core's default ``progress_interval``:
a report sent faster would only wait in the operator)."""
FORWARD_READ_LIMIT = 1 << 20
"""Bytes of the file read per look: a program that reports madly cannot stall the forwarder."""
FORWARD_MAX_BACKOFF = 30.0
"""The longest wait between two tries while the operator does not take the report."""
FORWARD_FINAL_TRIES = 5
"""Tries of the last report once the pod is stopping (its grace period is short)."""


def merge(previous: dict[str, Any] | None, line: dict[str, Any], read_at: float) -> dict[str, Any]:
    """The state of a replica's progress after one :func:`validate`\\ d report.

    A report updates what it names and the rest keeps its value; ``time`` is that of the
    step shown (a report without a step leaves it), ``origin`` the (time, step) of the first
    report with a step of the program's current run (a lower step starts a new run: a
    restart), the speed an ETA is measured by. Keys: step, total, time, metrics, origin."""
    when = line["time"] if line["time"] is not None else read_at
    step = line["step"]
    origin = previous["origin"] if previous is not None else None
    # A lower step than the last one is a new run of the program (a restart).
    restarted = step is not None and previous is not None and step < (previous["step"] or 0)
    if step is not None and (origin is None or restarted):
        origin = [when, step]
    carried = step is None and previous is not None
    metrics = dict(previous["metrics"]) if previous is not None else {}
    metrics.update(line["metrics"])
    return {
        "step": previous["step"] if carried and previous is not None else step,
        "total": line["total"] or (previous["total"] if previous is not None else None),
        "time": previous["time"] if carried and previous is not None else when,
        "metrics": metrics,
        "origin": origin,
    }


class Follower:
    """What has been read of one progress file, and the merged state (:func:`merge`): the
    forwarder's on Kubernetes and the local supervisor's alike.

    A missing file is one not written yet; a shorter one was truncated and is read again. A
    line that breaks the protocol is counted in :attr:`skipped` and told to ``on_bad`` with
    why; the reports around it count as usual."""

    def __init__(
        self,
        path: str,
        *,
        read_limit: int = FORWARD_READ_LIMIT,
        on_bad: Callable[[str], None] | None = None,
    ) -> None:
        from pathlib import Path  # here: `import kubemill` (a job's program) stays cheap

        self.path = Path(path)
        self.read_limit = read_limit
        self.on_bad = on_bad
        self.offset = 0
        self.partial = b""
        self.skipping = False
        """Inside a line longer than :data:`MAX_LINE`: dropped to its end."""
        self.state: dict[str, Any] | None = None
        self.skipped = 0

    def poll(self, size: int | None = None) -> None:
        """Read what was appended since the last call (at most ``read_limit`` bytes);
        ``size``: the file's, when the caller has just seen it (no ``stat`` then)."""
        if size is None:
            try:
                size = self.path.stat().st_size
            except OSError:
                return
        if size < self.offset:
            self.offset, self.partial, self.skipping = 0, b"", False
        if size == self.offset:
            return
        try:
            with self.path.open("rb") as stream:
                stream.seek(self.offset)
                data = stream.read(self.read_limit)
        except OSError:
            return
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        read_at = time.time()
        for line in lines:
            if self.skipping:
                self.skipping = False
                continue
            if not line.strip():
                continue
            try:
                self.state = merge(self.state, parse_line(line), read_at)
            except BadReport as exc:
                self._bad(str(exc))
        if len(self.partial) > MAX_LINE:
            self._bad(f"a line of over {len(self.partial)} bytes; at most {MAX_LINE}")
            self.partial, self.skipping = b"", True

    def _bad(self, why: str) -> None:
        self.skipped += 1
        if self.on_bad is not None:
            self.on_bad(why)


def _post(client: HttpClient, target: str, token_file: str, body: Any, timeout: float) -> int:
    """POST ``body`` with the token read afresh (the kubelet rotates it); the HTTP status, 0
    when nothing answered, -1 when there is no token to send. After a failure the connection
    is closed: the next try goes through the Service again, maybe to another replica."""
    from pathlib import Path

    from kubemill.http_client import HttpAnswer, NoAnswer

    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError:
        return -1
    if not token:
        return -1
    header = f"Bearer {token}"
    client.authorization = lambda: header
    try:
        return client.send("POST", target, body=body, timeout=(timeout, timeout)).status
    except HttpAnswer as exc:
        client.close()
        return exc.status
    except NoAnswer:
        client.close()
        return 0


def forward(
    url: str,
    *,
    path: str,
    token_file: str,
    job: dict[str, str],
    stopping: Callable[[], bool],
    interval: float = FORWARD_INTERVAL,
    poll_every: float = 0.5,
    max_backoff: float = FORWARD_MAX_BACKOFF,
    log: Callable[[str], None] | None = None,
) -> int:
    """Follow ``path`` and POST its latest state to ``url`` until ``stopping()``; returns 0.

    The body is ``{"apiVersion", "kind", "namespace", "name", "report"}`` (``job`` gives the
    first four; ``report`` is :func:`merge`'s state). A report is sent when it changed, at
    most once per ``interval``; while the operator does not take it (not there, not leading,
    refusing) it is tried again, waiting twice as long each time (from 0.25 s) up to
    ``max_backoff``, and the newest state is the one sent. Once ``stopping()``
    (the pod's containers ended: the kubelet stops its sidecars), the file is read a last
    time and its last report sent with up to :data:`FORWARD_FINAL_TRIES` tries."""

    def say(text: str) -> None:
        if log is not None:
            log(text)
        else:
            sys.stderr.write(f"kubemill-progress: {text}\n")
            sys.stderr.flush()

    from urllib.parse import urlsplit

    from kubemill.http_client import HttpClient

    parts = urlsplit(url)
    # kubemill's one HTTP client: one connection kept to the operator, no proxy from the
    # environment (the token goes to the operator and nowhere else).
    client = HttpClient(f"{parts.scheme}://{parts.netloc}", user_agent="kubemill-progress")
    target = parts.path or "/"
    follower = Follower(path)
    sent: dict[str, Any] | None = None
    due = 0.0
    failures = 0
    last_problem = ""
    final_tries = 0
    while True:
        stop = bool(stopping())
        follower.poll()
        state = follower.state
        now = time.monotonic()
        if state is not None and state != sent and (now >= due or stop):
            body = {**job, "report": state}
            status = _post(client, target, token_file, body, timeout=min(5.0, max(interval, 1.0)))
            if 200 <= status < 300:
                sent, failures = state, 0
                due = now + interval
                if last_problem:
                    say("the operator takes reports again")
                    last_problem = ""
            else:
                failures += 1
                due = now + min(max_backoff, 0.25 * 2 ** min(failures - 1, 8))
                problem = (
                    "no token to send yet" if status == -1
                    else "the operator does not answer" if status == 0
                    else f"the operator answered {status}"
                )  # fmt: skip
                if problem != last_problem:
                    say(f"{problem}; trying again")
                    last_problem = problem
        if stop:
            final_tries += 1
            if state is None or state == sent or final_tries >= FORWARD_FINAL_TRIES:
                client.close()
                return 0
            time.sleep(min(poll_every, 0.2))
            continue
        time.sleep(poll_every)


def main(argv: list[str] | None = None) -> int:
    """``--forward URL --token-file F --api-version V --kind K --namespace N --name J``: the
    forwarder (:func:`forward`) of ``--file`` (default ``$KUBEMILL_PROGRESS_FILE``) until
    SIGTERM or SIGINT. The sidecar runs it as ``python -c "...; p.main()" ARGS``."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="python -m kubemill.progress")
    parser.add_argument("--forward", required=True, metavar="URL", help="the operator's endpoint")
    parser.add_argument("--token-file", required=True, help="the projected token's path")
    parser.add_argument("--file", default=os.environ.get(PROGRESS_FILE_ENV, ""))
    parser.add_argument("--interval", type=float, default=FORWARD_INTERVAL)
    for name in ("--api-version", "--kind", "--namespace", "--name"):
        parser.add_argument(name, required=True, help="the job's")
    args = parser.parse_args(argv)
    if not args.file:
        parser.error(f"--file: no file given and {PROGRESS_FILE_ENV} is not set")
    stop: list[int] = []

    def stopped(signum: int, _frame: object) -> None:
        stop.append(signum)

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    job = {
        "apiVersion": args.api_version,
        "kind": args.kind,
        "namespace": args.namespace,
        "name": args.name,
    }
    return forward(
        args.forward,
        path=args.file,
        token_file=args.token_file,
        job=job,
        stopping=lambda: bool(stop),
        interval=args.interval,
    )


if __name__ == "__main__":
    sys.exit(main())
