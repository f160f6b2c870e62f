"""The ``kubemill`` command tree: global options, one function per verb (the operator's in
:mod:`kubemill.cli.operator_commands`), error handling (:mod:`kubemill.cli.commands`).

Only typer and the standard library are imported here, so ``kubemill --help`` starts
fast. Each command imports what it needs (rich, the SDK, the api models, the
kubernetes renderer) inside its body.
"""

# No `from __future__ import annotations` here: typer would evaluate every annotation
# from its string form (a compile() each) on every start, `--help` included.
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from kubemill.cli.commands import (
    GangScheduler,
    JobArgument,
    NamespaceOption,
    settings_of,
    user_errors,
)
from kubemill.cli.ending import end_at_once
from kubemill.cli.operator_commands import install, operator, uninstall, version
from kubemill.cli.settings import Substrate, global_settings

app = typer.Typer(
    name="kubemill",
    help=(
        "Run distributed training and big-data jobs (`kubemill kinds` lists the kinds) "
        "on Kubernetes or as local processes."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich-formatted help would import rich on every `--help`.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


RuntimeFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--runtime",
        help="A training runtime manifest (may hold several) a job may name, resolved as"
        " `kubemill run --runtime` resolves it (nothing is kept). Repeatable.",
    ),
]
"""``validate`` and ``render``'s ``--runtime``."""


class OutputFormat(StrEnum):
    """``get -o``: a table for people, YAML or JSON for programs."""

    TABLE = "table"
    YAML = "yaml"
    JSON = "json"


@app.callback()
def global_options(
    ctx: typer.Context,
    substrate: Annotated[
        Substrate,
        typer.Option(envvar="KUBEMILL_SUBSTRATE", help="Where jobs run.", case_sensitive=False),
    ] = Substrate.LOCAL,
    kubeconfig: Annotated[
        str | None, typer.Option(help="kubeconfig file (kubernetes substrate).")
    ] = None,
    context: Annotated[
        str | None, typer.Option(help="kubeconfig context (kubernetes substrate).")
    ] = None,
    namespace: NamespaceOption = None,
    state_dir: Annotated[
        str | None,
        typer.Option(
            envvar="KUBEMILL_STATE_DIR",
            help="Where the local substrate keeps jobs and logs"
            " (default: $XDG_STATE_HOME/kubemill).",
        ),
    ] = None,
) -> None:
    """Run TensorFlow and PyTorch jobs on Kubernetes or as local processes."""
    typed = set()
    for param in ("substrate", "kubeconfig", "context", "state_dir"):
        source = ctx.get_parameter_source(param)
        if source is not None and source.name == "COMMANDLINE":
            typed.add(param)
    ctx.obj = global_settings(
        substrate=substrate,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        state_dir=state_dir,
        typed=typed,
    )


@app.command()
@user_errors
def run(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Job manifest (YAML) holding one job.")],
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Submit and return at once; the job runs on.")
    ] = False,
    namespace: NamespaceOption = None,
    runtime: Annotated[
        list[Path] | None,
        typer.Option(
            "--runtime",
            help="A training runtime manifest (may hold several) the job may name; kept by the"
            " local substrate for later commands. Repeatable.",
        ),
    ] = None,
) -> None:
    """Submit a job; follow its replicas and logs until it ends (exit 0 only if it Succeeded)."""
    from kubemill.cli.run import run_job

    settings = settings_of(ctx, namespace)
    raise typer.Exit(run_job(settings, file, detach=detach, runtimes=runtime or []))


@app.command()
@user_errors
def get(
    ctx: typer.Context,
    name: Annotated[
        str | None, typer.Argument(help="One job (NAME or KIND/NAME); all jobs when left out.")
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="table, yaml or json.")
    ] = OutputFormat.TABLE,
    namespace: NamespaceOption = None,
    history: Annotated[
        bool,
        typer.Option(
            "--history",
            help="Also the deleted jobs the substrate keeps records of (on Kubernetes, the "
            "operator's: kubemill install --history).",
        ),
    ] = False,
) -> None:
    """List jobs, or show one: state, replicas ready/total, restarts, age."""
    from kubemill.cli.listing import get_jobs

    get_jobs(settings_of(ctx, namespace), name, output=output.value, history=history)


@app.command()
@user_errors
def describe(
    ctx: typer.Context,
    name: JobArgument,
    namespace: NamespaceOption = None,
) -> None:
    """Show a job in detail: conditions, replica statuses and events."""
    from kubemill.cli.views import describe_job

    describe_job(settings_of(ctx, namespace), name)


@app.command()
@user_errors
def logs(
    ctx: typer.Context,
    name: JobArgument,
    replica: Annotated[
        str | None,
        typer.Option(
            "--replica", "-r", help="One replica: 'worker-1' or the full name 'JOB-worker-1'."
        ),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")
    ] = False,
    tail: Annotated[
        int,
        typer.Option("--tail", help="Only the last N lines of each replica (-1: all).", min=-1),
    ] = -1,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only lines written within a duration (5s, 2m, 1h30m) or since a time"
            " (RFC 3339, e.g. 2026-01-02T03:04:05Z).",
        ),
    ] = None,
    limit_bytes: Annotated[
        int | None,
        typer.Option("--limit-bytes", help="At most N bytes of each replica's log.", min=1),
    ] = None,
    timestamps: Annotated[
        bool, typer.Option("--timestamps", help="Prefix each line with its time (RFC 3339).")
    ] = False,
    namespace: NamespaceOption = None,
) -> None:
    """Print the output of a job's replicas, each line prefixed by its replica."""
    from kubemill.cli.views import LogOptions, show_logs

    options = LogOptions(
        tail=None if tail < 0 else tail,
        since=since,
        limit_bytes=limit_bytes,
        timestamps=timestamps,
    )
    raise typer.Exit(
        show_logs(
            settings_of(ctx, namespace), name, replica=replica, follow=follow, options=options
        )
    )


@app.command()
@user_errors
def delete(
    ctx: typer.Context,
    name: JobArgument,
    namespace: NamespaceOption = None,
) -> None:
    """Stop every replica of a job and remove it."""
    from kubemill.cli.views import delete_job

    delete_job(settings_of(ctx, namespace), name)


@app.command()
@user_errors
def interrupt(
    ctx: typer.Context,
    name: JobArgument,
    force: Annotated[
        bool, typer.Option("--force", help="Kill the replicas at once (no grace period).")
    ] = False,
    namespace: NamespaceOption = None,
) -> None:
    """Stop a job for good and keep it: Failed, reason Interrupted (as Ctrl-C during run)."""
    from kubemill.cli.views import interrupt_job

    interrupt_job(settings_of(ctx, namespace), name, force=force)


@app.command()
@user_errors
def suspend(
    ctx: typer.Context,
    name: JobArgument,
    namespace: NamespaceOption = None,
) -> None:
    """Suspend a job (runPolicy.suspend): its replicas stop until `kubemill resume`."""
    from kubemill.cli.views import suspend_job

    suspend_job(settings_of(ctx, namespace), name)


@app.command()
@user_errors
def resume(
    ctx: typer.Context,
    name: JobArgument,
    namespace: NamespaceOption = None,
) -> None:
    """Resume a suspended job: its replicas start again."""
    from kubemill.cli.views import resume_job

    resume_job(settings_of(ctx, namespace), name)


@app.command()
@user_errors
def scale(
    ctx: typer.Context,
    name: JobArgument,
    replicas: Annotated[int, typer.Option("--replicas", min=0, help="How many replicas.")],
    group: Annotated[
        str | None, typer.Option("--group", help="The group (default: the job's only one).")
    ] = None,
    namespace: NamespaceOption = None,
) -> None:
    """Give a group of a running job (a Ray cluster's workers) that many replicas."""
    from kubemill.cli.views import scale_job

    scale_job(settings_of(ctx, namespace), name, replicas, group)


@app.command()
@user_errors
def validate(
    ctx: typer.Context,
    paths: Annotated[
        list[Path], typer.Argument(help="Manifest files, or directories of *.yaml files.")
    ],
    runtime: RuntimeFiles = None,
) -> None:
    """Check manifests: OK per file, or every problem with its field path (exit 1)."""
    from kubemill.cli.manifests import validate_paths
    from kubemill.cli.run import know_runtimes

    know_runtimes(settings_of(ctx), runtime or [], keep=False)
    raise typer.Exit(validate_paths(paths))


@app.command()
@user_errors
def render(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Job manifest (YAML).")],
    namespace: NamespaceOption = None,
    gang_scheduler: Annotated[
        GangScheduler | None,
        typer.Option(help="Render the PodGroup and pod settings of this gang scheduler."),
    ] = None,
    show_secrets: Annotated[
        bool, typer.Option("--show-secrets", help="Print the values of Secrets (keys, tokens).")
    ] = False,
    runtime: RuntimeFiles = None,
    progress: Annotated[
        bool,
        typer.Option(
            "--progress/--no-progress",
            help="Job pods carry the progress sidecar, as a default `kubemill install` gives "
            "them; --no-progress: as an install with --no-progress.",
        ),
    ] = True,
) -> None:
    """Print, as YAML, every object the operator creates for the job on a cluster."""
    from kubemill.cli.manifests import render_file
    from kubemill.cli.run import know_runtimes

    settings = settings_of(ctx, namespace)
    know_runtimes(settings, runtime or [], keep=False)
    render_file(
        file,
        namespace=settings.namespace,
        gang_scheduler=gang_scheduler.value if gang_scheduler else None,
        show_secrets=show_secrets,
        progress=progress,
    )


app.command()(install)
app.command()(uninstall)
app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)(operator)


@app.command(
    name="spark-submit",
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        # click stops at the first plain word, so a "--" among the application's
        # arguments reaches it too.
        "allow_interspersed_args": False,
    },
    add_help_option=False,
)
@user_errors
def spark_submit(ctx: typer.Context) -> None:
    """Submit a Spark application with spark-submit's own arguments (--dry-run: print it)."""
    # The arguments go through untouched: spark-submit's options are read as Spark
    # reads them (kubemill spark-submit --help lists them), not by typer.
    from kubemill.cli.spark_submit import spark_submit as submit

    raise typer.Exit(submit(settings_of(ctx), list(ctx.args)))


@app.command()
@user_errors
def doctor(
    ctx: typer.Context,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Move a damaged database aside and start a fresh one (job logs are kept).",
        ),
    ] = False,
) -> None:
    """Check the local state database (SQLite's integrity check); exit 1 if it is damaged."""
    from kubemill.cli.doctor import doctor as run_doctor

    raise typer.Exit(run_doctor(settings_of(ctx), repair=repair))


@app.command()
@user_errors
def kinds() -> None:
    """List the job kinds kubemill runs: names, accepted apiVersions, local support."""
    from kubemill.cli.console import stdout_console
    from kubemill.cli.views import kinds_table

    stdout_console().print(kinds_table())


app.command()(version)


@app.command()
@user_errors
def dashboard(
    ctx: typer.Context,
    substrate: Annotated[
        Substrate | None,
        typer.Option(
            help="Where the jobs run (default: the global --substrate).", case_sensitive=False
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on; anything but loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8790,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the dashboard in a web browser.")
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="KUBEMILL_DASHBOARD_TOKEN",
            help="Every request must carry this token (needed off loopback).",
        ),
    ] = None,
    generate_token: Annotated[
        bool, typer.Option("--generate-token", help="Make a random token and print it.")
    ] = False,
) -> None:
    """Serve a web UI of the jobs: live list, one job, logs, actions, submit (Ctrl-C stops)."""
    import dataclasses

    from kubemill.cli.errors import fail
    from kubemill.dashboard import serve
    from kubemill.dashboard.security import BindRefused, check_bind, new_token

    settings = settings_of(ctx)
    if substrate is not None:
        settings = dataclasses.replace(settings, substrate=substrate)
    if generate_token:
        if token is not None:
            fail("give --token or --generate-token, not both")
        token = new_token()
    try:
        check_bind(host, token)
    except BindRefused as exc:
        fail(str(exc))
    if not 0 <= port <= 65535:
        fail(f"--port: {port} is not a TCP port (0-65535)")
    serve(
        settings.client(),
        host=host,
        port=port,
        token=token,
        open_browser=open_browser,
        announce=typer.echo,
    )


def _add_command_groups() -> None:
    # `kubemill env ...` and `kubemill cluster ...` live in modules of their own, which
    # import only typer at the top.
    from kubemill.cli.envs import env_app

    app.add_typer(env_app, name="env")
    from kubemill.cli.clusters import cluster_app

    app.add_typer(cluster_app, name="cluster")


_add_command_groups()


def run_app(argv: list[str] | None = None, *, exit_at_once: bool = False) -> None:
    """Run the CLI (the console script's entry point passes ``exit_at_once``)."""
    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="kubemill")
    except SystemExit as done:
        if exit_at_once:
            end_at_once(done)
        raise
