"""How jobs look in a terminal: ``describe``, ``logs``, ``delete`` and the live view of
``run`` (``get`` and its job table are :mod:`kubemill.cli.listing` and
:mod:`kubemill.cli.table`, whose phase colours and ages are used here too).

The same tables and log prefixes serve ``run``, so a job reads the same whether it is
being followed live or looked up afterwards, on either substrate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kubemill.api import ConditionType
from kubemill.cli.console import stdout_console
from kubemill.cli.errors import fail, stderr_console
from kubemill.cli.settings import Settings
from kubemill.cli.table import PHASE_STYLES, age_text, columns_text
from kubemill.sdk.summary import (
    progress_words,
    ready_replicas,
    restarts,
    short_replica_name,
    total_replicas,
    web_ui,
)
from kubemill.substrates.base import EventRecord, JobView, LogLine, ReplicaView

REPLICA_COLOURS = (
    "cyan",
    "magenta",
    "green",
    "yellow",
    "blue",
    "bright_cyan",
    "bright_magenta",
    "bright_green",
    "bright_yellow",
    "bright_blue",
)


# --- small formatting helpers ----------------------------------------------------------------


def age(since: datetime | None, *, now: datetime | None = None) -> str:
    """How long ago, the kubectl way: ``42s``, ``5m``, ``3h``, ``2d``."""
    if since is None:
        return "-"
    moment = now or datetime.now(UTC if since.tzinfo is not None else None)
    return age_text((moment - since).total_seconds())


def phase_text(phase: str) -> Text:
    """A phase word in its colour."""
    return Text(phase, style=PHASE_STYLES.get(phase, ""))


def resolve_replica(view: JobView, wanted: str) -> ReplicaView:
    """The replica the user meant by ``worker-1``, ``Worker-1`` or ``myjob-worker-1``."""
    key = wanted.lower()
    for replica in view.replicas:
        if key in (replica.name.lower(), short_replica_name(view.name, replica.name).lower()):
            return replica
    known = ", ".join(short_replica_name(view.name, r.name) for r in view.replicas) or "none yet"
    fail(f"job {view.name} has no replica {wanted!r} (its replicas: {known})")
    raise AssertionError("unreachable")  # fail() exits


REPLICA_HEADERS = ("REPLICA", "TYPE", "INDEX", "PHASE", "RESTARTS", "EXIT CODE", "ADDRESS")


def replica_table(view: JobView) -> Text:
    """One row per replica: type, index, phase, restarts, exit code, address.

    Laid out as ``kubemill get`` lays out its jobs (:func:`~.table.columns_text`), not by
    rich's table, which measured every cell at each refresh of ``run``'s live view and for
    its final table: ~2 ms of a job's end, against ~0.4 to print the drawn lines. Drawn
    with colours, which the console keeps or drops as it would its own styles."""
    rows = [
        (
            short_replica_name(view.name, replica.name),
            replica.replica_type,
            str(replica.index),
            replica.phase,
            str(replica.restarts),
            "-" if replica.exit_code is None else str(replica.exit_code),
            replica.address or "-",
        )
        for replica in view.replicas
    ]
    drawn = columns_text(REPLICA_HEADERS, rows, colour=True, state=REPLICA_HEADERS.index("PHASE"))
    return Text.from_ansi(drawn.rstrip("\n"), no_wrap=True, overflow="ellipsis")


def status_panel(view: JobView) -> RenderableType:
    """The live view of ``run``: the job's state over its replica table."""
    head = Text.assemble(
        (f"{view.kind} {view.name}", "bold"),
        "  ",
        phase_text(view.phase),
        f"  {ready_replicas(view)}/{total_replicas(view)} ready, {restarts(view)} restarts",
    )
    return Group(head, replica_table(view))


class LogPrinter:
    """Prints log lines prefixed by their replica, in a colour of its own."""

    def __init__(self, console: Console, job_name: str, replicas: Iterable[str] = ()) -> None:
        self.console = console
        self.job_name = job_name
        self.colours: dict[str, str] = {}
        self.width = 0
        for name in replicas:
            self._colour(short_replica_name(job_name, name))

    def _colour(self, short: str) -> str:
        if short not in self.colours:
            self.colours[short] = REPLICA_COLOURS[len(self.colours) % len(REPLICA_COLOURS)]
            self.width = max(self.width, len(short))
        return self.colours[short]

    def render(self, line: LogLine) -> Text:
        """The line as printed: ``worker-1 | text``."""
        short = short_replica_name(self.job_name, line.replica)
        colour = self._colour(short)
        return Text.assemble((f"{short:<{self.width}} | ", colour), line.text.rstrip("\n"))

    def print(self, line: LogLine) -> None:
        self.console.print(self.render(line))


def rotated_away_note(line: LogLine) -> str:
    """What a follower is told when the log rotated output away before it was read."""
    return (
        f"kubemill: {line.rotated_away} bytes of {line.replica}'s output before the next line"
        " were rotated away before they were read (the follower fell behind); the log keeps"
        " containerLogMaxFiles files of containerLogMaxSize each (the config file sets both)"
    )


# --- commands ----------------------------------------------------------------------------------


def timestamp(moment: datetime) -> str:
    if moment.tzinfo is None:
        return moment.isoformat(timespec="seconds")
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def describe_job(settings: Settings, name: str) -> None:
    """``kubemill describe NAME``: like ``kubectl describe``."""
    client = settings.client()
    view = client.get(name, namespace=settings.namespace)
    events = client.events(name, namespace=settings.namespace)
    stdout_console().print(describe_view(view, events))


def describe_view(view: JobView, events: Sequence[EventRecord]) -> RenderableType:
    """The full description of a job as one renderable."""
    status = view.status
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    fields.add_row("Name:", view.name)
    fields.add_row("Namespace:", view.namespace)
    fields.add_row("Kind:", f"{view.kind} ({view.job.api_version})")
    fields.add_row("State:", phase_text(view.phase))
    fields.add_row("Created:", _when(view.created))
    fields.add_row("Start Time:", _when(status.start_time))
    fields.add_row("Completion Time:", _when(status.completion_time))
    if web_ui(view):
        fields.add_row("Web UI:", web_ui(view))
    trainer = status.trainer_status
    if trainer is not None:
        done, left = progress_words(view)
        metrics = " ".join(f"{m.name}={m.value}" for m in trainer.metrics)
        fields.add_row("Progress:", f"{done}, ETA {left} ({_when(trainer.last_updated_time)})")
        if metrics:
            fields.add_row("Metrics:", metrics)
    policy = view.job.run_policy
    fields.add_row(
        "Run Policy:",
        ", ".join(
            f"{key}={value}"
            for key, value in (
                ("cleanPodPolicy", policy.clean_pod_policy),
                ("backoffLimit", policy.backoff_limit),
                ("activeDeadlineSeconds", policy.active_deadline_seconds),
                ("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished),
                ("suspend", policy.suspend),
            )
            if value is not None
        )
        or "-",
    )

    conditions = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"):
        conditions.add_column(header, no_wrap=header != "MESSAGE")
    for cond in status.conditions:
        conditions.add_row(
            cond.type.value,
            cond.status,
            cond.reason or "-",
            _when(cond.last_transition_time),
            cond.message or "-",
        )

    counts = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("TYPE", "WANTED", "ACTIVE", "SUCCEEDED", "FAILED", "RESTARTS", "RESTART POLICY"):
        counts.add_column(header, no_wrap=True)
    for rtype in view.job.replica_specs:
        rstatus = status.replica_statuses.get(rtype)
        counts.add_row(
            rtype,
            str(view.job.replica_count(rtype)),
            *(
                [
                    str(rstatus.active),
                    str(rstatus.succeeded),
                    str(rstatus.failed),
                    str(rstatus.restarts),
                ]
                if rstatus
                else ["0", "0", "0", "0"]
            ),
            view.job.restart_policy(rtype).value,
        )

    replicas = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("NAME", "PHASE", "RESTARTS", "EXIT CODE", "ADDRESS", "PID", "STARTED", "REASON"):
        replicas.add_column(header, no_wrap=header != "REASON")
    for replica in view.replicas:
        replicas.add_row(
            replica.name,
            phase_text(replica.phase),
            str(replica.restarts),
            "-" if replica.exit_code is None else str(replica.exit_code),
            replica.address or "-",
            "-" if replica.pid is None else str(replica.pid),
            _when(replica.started),
            ": ".join(part for part in (replica.reason, replica.message) if part) or "-",
        )

    event_table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("TYPE", "REASON", "AGE", "COUNT", "MESSAGE"):
        event_table.add_column(header, no_wrap=header != "MESSAGE")
    for event in events:
        event_table.add_row(
            Text(event.type, style="yellow" if event.type == "Warning" else ""),
            event.reason,
            age(event.time),
            str(event.count),
            event.message,
        )

    def section(title: str, body: RenderableType, empty: bool) -> list[RenderableType]:
        return [
            Text(title, style="bold"),
            Padding(Text("<none>") if empty else body, (0, 0, 0, 2), expand=False),
        ]

    return Group(
        fields,
        *section("Conditions:", conditions, not status.conditions),
        *section("Replica Statuses:", counts, not view.job.replica_specs),
        *section("Replicas:", replicas, not view.replicas),
        *section("Events:", event_table, not events),
    )


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return f"{timestamp(moment)} ({age(moment)} ago)"


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_since(text: str) -> timedelta | datetime:
    """``--since``: a duration as ``kubectl`` takes it (``5s``, ``1h30m``) or an RFC 3339 time."""
    value = text.strip()
    if value and _DURATION_PART.sub("", value) == "":
        seconds = sum(float(n) * _DURATION_UNITS[unit] for n, unit in _DURATION_PART.findall(value))
        return timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"--since: {text!r} is neither a duration (5s, 2m, 1h30m) nor a time"
            " (RFC 3339, e.g. 2026-01-02T03:04:05Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class LogOptions:
    """``kubemill logs`` options as typed (``since`` still text)."""

    tail: int | None = None
    since: str | None = None
    limit_bytes: int | None = None
    timestamps: bool = False


def show_logs(
    settings: Settings,
    name: str,
    *,
    replica: str | None,
    follow: bool,
    options: LogOptions | None = None,
) -> int:
    """``kubemill logs NAME [--replica R] [--follow] [--tail N] ...``; the exit code."""
    options = options or LogOptions()
    try:
        since = None if options.since is None else parse_since(options.since)
    except ValueError as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc
    client = settings.client()
    view = client.get(name, namespace=settings.namespace)
    chosen = resolve_replica(view, replica).name if replica else None
    console = stdout_console()
    printer = LogPrinter(console, view.name, (r.name for r in view.replicas))
    lines: Iterator[LogLine] = client.logs(
        name,
        namespace=settings.namespace,
        replica=chosen,
        follow=follow,
        tail=options.tail,
        since=since,
        limit_bytes=options.limit_bytes,
        timestamps=options.timestamps,
    )
    try:
        for line in lines:
            if line.rotated_away:
                # On stderr, so that stdout stays the log itself.
                stderr_console().print(rotated_away_note(line), style="yellow")
            if chosen:
                # One replica: its output as it is, like `kubectl logs POD`.
                console.print(Text(line.text.rstrip("\n")))
            else:
                printer.print(line)
    except KeyboardInterrupt:
        return 130
    # A closed pipe (`| head -1`) ends the command through rich (exit 1, no traceback);
    # the lines not yet read are never read, so memory stays flat.
    return 0


def delete_job(settings: Settings, name: str) -> None:
    """``kubemill delete NAME``."""
    settings.client().delete(name, namespace=settings.namespace)
    stdout_console().print(f"job {name} deleted")


def interrupt_job(settings: Settings, name: str, *, force: bool) -> None:
    """``kubemill interrupt NAME``: stop it for good (Failed, reason Interrupted)."""
    view = settings.client().interrupt(
        name, namespace=settings.namespace, force=force, why="kubemill interrupt"
    )
    stdout_console().print(
        Text.assemble(f"job {name} ", phase_text(view.phase), _reason(view, ConditionType.FAILED))
    )


def suspend_job(settings: Settings, name: str) -> None:
    """``kubemill suspend NAME``: a job's replicas stop and it stays until resumed; a
    schedule starts no new run (runs already started go on, as jobs of their own)."""
    view = settings.client().suspend(name, namespace=settings.namespace)
    console = stdout_console()
    runs = _runs_of(view)
    if runs is not None:
        console.print(
            f"schedule {name} suspended: no new run starts; runs already started go on"
            f" ({runs}s of their own: `{settings.next_command('get', f'{runs.lower()}s')}`)",
        )
    else:
        console.print(f"job {name} suspended: its replicas are being stopped")
    console.print(Text.assemble(("Next: ", "dim"), settings.next_command("resume", name)))


def scale_job(settings: Settings, name: str, replicas: int, group: str | None) -> None:
    """``kubemill scale NAME --replicas N [--group G]``: the core starts or stops replicas."""
    view = settings.client().scale(name, replicas, group=group, namespace=settings.namespace)
    which = f"group {group}" if group else "its group"
    stdout_console().print(
        f"{view.kind} {name} scaled: {which} asks for {replicas} replica(s); the replicas"
        " are being started or stopped",
    )
    stdout_console().print(Text.assemble(("Next: ", "dim"), settings.next_command("get", name)))


def resume_job(settings: Settings, name: str) -> None:
    """``kubemill resume NAME``: a job's replicas start again; a schedule starts runs
    again at its next due time."""
    view = settings.client().resume(name, namespace=settings.namespace)
    console = stdout_console()
    runs = _runs_of(view)
    if runs is not None:
        console.print(
            f"schedule {name} resumed: its next run starts at its next due time (times"
            " missed while suspended are not made up)",
        )
        console.print(
            Text.assemble(
                ("Next: ", "dim"),
                settings.next_command("get", name),
                "  |  ",
                settings.next_command("get", f"{runs.lower()}s"),
            )
        )
        return
    console.print(f"job {name} resumed: its replicas are being started")
    console.print(
        Text.assemble(
            ("Next: ", "dim"),
            settings.next_command("get", name),
            "  |  ",
            settings.next_command("logs", name, "-f"),
        )
    )


def _runs_of(view: JobView) -> str | None:
    """The kind of the runs a schedule (a controller kind) creates; None for a job."""
    from kubemill.sdk.client import runs_of

    return runs_of(view.kind)


def _reason(view: JobView, kind: ConditionType) -> str:
    cond = view.status.condition(kind)
    return f" ({cond.reason})" if cond is not None and cond.status == "True" else ""


def kinds_table() -> Table:
    """``kubemill kinds``: every registered kind, as the docs' kinds table lists it."""
    from kubemill.kinds import describe, entries

    rows = [describe(entry) for entry in entries()]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in rows[0] if rows else ():
        table.add_column(column.upper())
    for row in rows:
        table.add_row(*row.values())
    return table
