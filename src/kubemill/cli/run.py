"""``kubemill run``: submit a job, then follow it until it ends.

In the foreground the job's log lines stream above a live per-replica table, and the
exit code says whether the job Succeeded. Ctrl-C stops the job and records it as
Failed with reason ``Interrupted`` (exit 130); a second Ctrl-C skips the grace period.
SIGTERM and SIGHUP (a closed terminal) stop the job the same way.
``--detach`` submits, prints the commands to follow the job, and returns at once.
A service cluster (Mars's: it never ends) is submitted detached and ``run`` returns
once the core judges it Ready, printing its endpoint; it keeps serving in the background
until ``kubemill cluster stop``, ``interrupt`` or ``delete`` (:mod:`kubemill.cli.clusters`).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from kubemill.api import ConditionType, Job
from kubemill.cli.errors import fail
from kubemill.cli.settings import Settings, Substrate
from kubemill.cli.styling import colour_wanted, styled, write
from kubemill.sdk import JobClient
from kubemill.sdk.manifests import load_path
from kubemill.substrates.base import JobNotFound, JobView

if TYPE_CHECKING:
    from rich.console import Console

    from kubemill.cli.views import LogPrinter

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_DELETED = 1
"""The job was deleted (from another shell) while ``run`` followed it."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that stop a foreground job cleanly (recorded as Interrupted). The exit code is
then 128 + the signal's number, as a shell reports it: 130 for Ctrl-C."""

STATUS_POLL_SECONDS = 0.25
LOG_DRAIN_SECONDS = 5.0
"""How long to let the log follower print the last lines once the job has ended."""


def run_job(settings: Settings, file: Path, *, detach: bool, runtimes: Sequence[Path] = ()) -> int:
    """Submit the one job in ``file``; follow it unless ``detach``. Returns the exit code.
    ``runtimes``: manifest files of training runtimes the job may name (local substrate)."""
    know_runtimes(settings, runtimes)
    jobs = load_path(file)
    if len(jobs) != 1:
        fail(f"{file} holds {len(jobs)} jobs; `kubemill run` takes a manifest with one job")
    job = jobs[0]
    from kubemill.sdk.client import is_service

    if is_service(job.KIND):
        # A service never ends: return once it is Ready (or submitted, with --detach),
        # leaving it serving in the background. (`kubemill cluster`'s module imports typer,
        # which a plain `run --detach` does without: kubemill.cli.plain.)
        from kubemill.cli.clusters import DEFAULT_TIMEOUT, serve

        base = str(file.resolve().parent)
        return serve(settings, job, base_dir=base, timeout=DEFAULT_TIMEOUT, wait=not detach)
    # In the foreground this process runs nothing but the job, as a detached supervisor
    # does: whatever ends up below it (a daemon that cleared its environment too) is the
    # job's and ends with it.
    client = settings.client(exclusive=not detach)
    # Relative workingDir and the default working directory are the manifest's folder,
    # so `kubemill run examples/x.yaml` works from anywhere.
    base_dir = str(file.resolve().parent)
    controls = _controls(job.KIND)
    if detach or controls:
        # A schedule never ends and has no logs of its own: there is nothing to follow.
        view = client.submit(job, detach=True, namespace=settings.namespace, base_dir=base_dir)
        # Two lines, drawn as `kubemill get` draws its table (kubemill.cli.styling: the same
        # text and the same ANSI styles rich would print, coloured when rich would colour):
        # rich is the follower's, and importing it cost ~14 ms, a tenth of the command.
        out = sys.stdout
        colour = colour_wanted(out)
        submitted = styled(f"{view.kind} {view.name}", "bold", colour)
        lines = [f"{submitted} submitted; it runs in the background."]
        if controls:
            runs = settings.next_command("get", f"{controls.lower()}s")
            commands = [settings.next_command("get", f"{job.KIND.lower()}s"), runs]
            why = styled(f"  (its runs are {controls}s)", "dim", colour)
            lines.append(styled("Next: ", "dim", colour) + "  |  ".join(commands) + why)
        else:
            commands = _next_commands(settings, view.name, detached=True)
            lines.append(styled("Next: ", "dim", colour) + "  |  ".join(commands))
        write("".join(f"{line}\n" for line in lines), out)
        return EXIT_SUCCEEDED
    from kubemill.cli.console import stdout_console

    follower = Follower(client, stdout_console(), settings)
    return follower.run(job, base_dir=base_dir)


def know_runtimes(settings: Settings, files: Sequence[Path], *, keep: bool = True) -> None:
    """Make known the training runtimes a job may name, before it is loaded: the config
    file's ``runtimes:``, those the state directory keeps, then ``files`` (``--runtime``),
    each replacing an earlier one of its name. ``run`` keeps ``files`` in the state
    directory, for the job's later commands, and takes them on the local substrate only (on
    a cluster, runtimes are the cluster's); ``validate`` and ``render`` (``keep=False``)
    resolve the same way and keep nothing."""
    if keep and settings.substrate is not Substrate.LOCAL:
        if files:
            fail(
                "--runtime is for the local substrate; on a cluster, apply the runtime"
                " (kubectl apply -f FILE), or install the defaults: kubemill install --runtimes"
            )
        return
    from kubemill.substrates.local import known_objects

    if keep and files:
        known_objects.keep(files, settings.state_dir)
        files = ()
    known_objects.make_known(
        [
            *known_objects.config_files(),
            *known_objects.kept_files(settings.state_dir),
            *(file.expanduser() for file in files),
        ]
    )


class Follower:
    """Runs one job in the foreground: logs and a live table until it ends."""

    def __init__(self, client: JobClient, console: Console, settings: Settings) -> None:
        self.client = client
        self.console = console
        self.settings = settings
        self.interrupted = threading.Event()
        self.wake = threading.Event()
        """Set when the table should be looked at again: a stop signal, or the job ended."""
        self.ended: JobView | None = None
        """The job as ``wait`` returned it: finished, its processes stopped (final)."""
        self.log_error: Exception | None = None
        self.signal_number: int = signal.SIGINT
        self.shown_ui = ""

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # The first signal asks for a clean stop. Restoring the defaults makes a second
        # Ctrl-C raise KeyboardInterrupt (a forced stop) and a second SIGTERM end us at once.
        self.signal_number = signum
        self.interrupted.set()
        self.wake.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for other in STOP_SIGNALS[1:]:
            signal.signal(other, signal.SIG_DFL)

    def run(self, job: Job, *, base_dir: str) -> int:
        # Only a job followed in the foreground has a live table and its log lines (not
        # `run --detach`, which prints two lines).
        from rich.live import Live
        from rich.text import Text

        from kubemill.cli.views import LogPrinter, status_panel

        namespace = self.settings.namespace
        previous = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        view = None
        try:
            view = self.client.submit(job, detach=False, namespace=namespace, base_dir=base_dir)
            name = view.name
            printer = LogPrinter(self.console, name, (r.name for r in view.replicas))
            logs = threading.Thread(
                target=self._follow_logs, args=(name, printer), name="kubemill-logs", daemon=True
            )
            # Wakes the loop below the moment the job ends, rather than at its next look.
            ender = threading.Thread(
                target=self._wait_for_end, args=(name,), name="kubemill-wait", daemon=True
            )
            with Live(
                status_panel(view),
                console=self.console,
                refresh_per_second=4,
                transient=True,
            ) as live:
                logs.start()
                ender.start()
                while not view.finished and not self.interrupted.is_set():
                    self.wake.wait(STATUS_POLL_SECONDS)
                    view = self._latest(name)
                    live.update(status_panel(view))
                    self._show_ui(view, live.console)
                if self.interrupted.is_set() and not view.finished:
                    live.console.print(Text("Interrupted: stopping the job ...", style="yellow"))
                    view = self._interrupt(name)
                logs.join(LOG_DRAIN_SECONDS)
            if self.log_error is not None:
                raise self.log_error
            view = self._latest(name)
        except JobNotFound:
            if view is None:
                raise
            # `kubemill delete` from elsewhere: the supervisor here stopped the replicas
            # and the job's records and logs are gone. Not a success, and not "no job".
            self.console.print(
                Text.assemble(
                    ("✘ ", "red"),
                    (f"{view.kind} {view.name} ", "bold"),
                    ("deleted while running", "bold red"),
                    " (by `kubemill delete`); its replicas were stopped and its logs removed",
                )
            )
            return EXIT_DELETED
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self._finish(view, interrupted=self.interrupted.is_set())

    def _latest(self, name: str) -> JobView:
        """The job now: as ``wait`` returned it once it ended (the last view there is: no
        read of our own on the way to the end), else read."""
        ended = self.ended
        if ended is not None and ended.finished:
            return ended
        return self.client.get(name, namespace=self.settings.namespace)

    def _show_ui(self, view: JobView, console: Console) -> None:
        """The job's web UI (a Spark driver's), once, as soon as its status names it."""
        from rich.text import Text

        from kubemill.sdk.summary import web_ui

        url = web_ui(view)
        if url and url != self.shown_ui:
            self.shown_ui = url
            console.print(Text.assemble(("Web UI: ", "bold"), url))

    def _wait_for_end(self, name: str) -> None:
        # Locally this joins the supervisor's thread: no polling on the way to the end. An
        # error (e.g. the job was deleted) is the loop's own read's to report.
        with contextlib.suppress(Exception):
            self.ended = self.client.wait(name, namespace=self.settings.namespace)
        self.wake.set()

    def _follow_logs(self, name: str, printer: LogPrinter) -> None:
        try:
            for line in self.client.logs(name, namespace=self.settings.namespace, follow=True):
                printer.print(line)
        except Exception as exc:
            # Raised again in the main thread, which reports it like any other error.
            self.log_error = exc

    def _interrupt(self, name: str) -> JobView:
        try:
            return self.client.interrupt(name, namespace=self.settings.namespace, why=self._why())
        except KeyboardInterrupt:
            # A second Ctrl-C while replicas get their grace period: stop them now.
            return self.client.interrupt(
                name, namespace=self.settings.namespace, force=True, why=self._why()
            )

    def _why(self) -> str:
        """The stop annotation's value: what stopped the run."""
        if self.signal_number == signal.SIGINT:
            return "Ctrl-C in kubemill run"
        return f"{signal.Signals(self.signal_number).name} to kubemill run"

    def _finish(self, view: JobView, *, interrupted: bool) -> int:
        from rich.text import Text

        from kubemill.cli.views import replica_table, status_panel
        from kubemill.sdk.summary import short_replica_name

        console = self.console
        console.print(status_panel(view) if view.replicas else replica_table(view))
        failed = view.status.condition(ConditionType.FAILED)
        if view.status.is_true(ConditionType.SUCCEEDED):
            console.print(
                Text.assemble(
                    ("✔ ", "green"),
                    (f"{view.kind} {view.name} ", "bold"),
                    ("Succeeded", "green"),
                    _took(view),
                )
            )
            _print_next(console, self.settings, view.name)
            return EXIT_SUCCEEDED
        reason = message = ""
        if failed is not None and failed.status == "True":
            reason, message = failed.reason, failed.message
        broken = [r for r in view.replicas if r.phase == "Failed"]
        named = ", ".join(
            f"{r.name} (exit code {r.exit_code})" if r.exit_code is not None else r.name
            for r in broken
        )
        detail = message
        if named and not all(short_replica_name(view.name, r.name) in message for r in broken):
            detail = f"{message.rstrip('.')}; failed: {named}" if message else f"failed: {named}"
        console.print(
            Text.assemble(
                ("✘ ", "red"),
                (f"{view.kind} {view.name} ", "bold"),
                (view.phase, "bold red"),
                f" ({reason})" if reason else "",
                f": {detail}" if detail else "",
            )
        )
        # Point at the first failed replica's own log: that is where the reason is.
        first_failed = short_replica_name(view.name, broken[0].name) if broken else ""
        _print_next(console, self.settings, view.name, replica=first_failed)
        return 128 + self.signal_number if interrupted else EXIT_FAILED


def _took(view: JobView) -> str:
    start, end = view.status.start_time, view.status.completion_time
    if start is None or end is None:
        return ""
    return f" in {(end - start).total_seconds():.1f}s"


def _controls(kind: str) -> str | None:
    """The kind of the jobs ``kind`` creates, if it is a controller kind (a schedule)."""
    from kubemill.sdk.client import runs_of

    return runs_of(kind)


def _next_commands(
    settings: Settings, name: str, *, detached: bool = False, replica: str = ""
) -> list[str]:
    """The commands to run next: follow a detached job, or look into one that ended."""
    commands = [settings.next_command("logs", name, *(["--replica", replica] if replica else []))]
    if detached:
        commands = [settings.next_command("get", name), settings.next_command("logs", name, "-f")]
    commands += [settings.next_command("describe", name), settings.next_command("delete", name)]
    return commands


def _print_next(console: Console, settings: Settings, name: str, *, replica: str = "") -> None:
    """The commands to look into a job that ended, on the follower's console."""
    from rich.text import Text

    commands = _next_commands(settings, name, replica=replica)
    console.print(Text.assemble(("Next: ", "dim"), "  |  ".join(commands)))
