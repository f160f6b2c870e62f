"""The ``kubemill`` command tree: global options, one function per verb, error handling.

Only typer and the standard library are imported here, so ``kubemill --help`` starts
fast. Each command imports what it needs (rich, the SDK, the api models, the
kubernetes renderer) inside its body.
"""

# No `from __future__ import annotations` here: typer would evaluate every annotation
# from its string form (a compile() each) on every start, `--help` included.
import functools
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import typer

from kubemill.cli.settings import Settings, Substrate

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


P = ParamSpec("P")
R = TypeVar("R")


def user_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Report the errors a user can act on as one red line and exit 1 (no traceback).

    Applied to each command rather than around the whole app so that it also holds
    under typer's test runner, which calls commands without :func:`run_app`.
    """

    @functools.wraps(command)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except Exception as exc:
            from kubemill.cli.errors import report

            code = report(exc)
            if code is None:
                raise
            raise typer.Exit(code) from None

    return guarded


class OutputFormat(StrEnum):
    """``get -o``: a table for people, YAML or JSON for programs."""

    TABLE = "table"
    YAML = "yaml"
    JSON = "json"


class GangScheduler(StrEnum):
    """``render --gang-scheduler``: the schedulers whose PodGroup kubemill writes."""

    VOLCANO = "volcano"
    SCHEDULER_PLUGINS = "scheduler-plugins"


NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", help="Namespace of the job (default: the job's own, else 'default')."
    ),
]


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
    replay: list[str] = []
    typed = {
        "substrate": ("--substrate", substrate.value),
        "kubeconfig": ("--kubeconfig", kubeconfig),
        "context": ("--context", context),
        "state_dir": ("--state-dir", state_dir),
    }
    for param, (flag, value) in typed.items():
        source = ctx.get_parameter_source(param)
        if value is not None and source is not None and source.name == "COMMANDLINE":
            replay += [flag, _quote(value)]
    if namespace is not None:
        replay += ["--namespace", _quote(namespace)]
    ctx.obj = Settings(
        substrate=substrate,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        state_dir=state_dir,
        replay_flags=replay,
    )


def _quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def _settings(ctx: typer.Context, namespace: str | None = None) -> Settings:
    settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings()
    if namespace is not None:
        settings.namespace = namespace
        if "--namespace" not in settings.replay_flags:
            settings.replay_flags += ["--namespace", _quote(namespace)]
    return settings


@app.command()
@user_errors
def run(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Job manifest (YAML) holding one job.")],
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Submit and return at once; the job runs on.")
    ] = False,
    namespace: NamespaceOption = None,
) -> None:
    """Submit a job; follow its replicas and logs until it ends (exit 0 only if it Succeeded)."""
    from kubemill.cli.run import run_job

    raise typer.Exit(run_job(_settings(ctx, namespace), file, detach=detach))


@app.command()
@user_errors
def get(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="One job; all jobs when left out.")] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="table, yaml or json.")
    ] = OutputFormat.TABLE,
    namespace: NamespaceOption = None,
) -> None:
    """List jobs, or show one: state, replicas ready/total, restarts, age."""
    from kubemill.cli.listing import get_jobs

    get_jobs(_settings(ctx, namespace), name, output=output.value)


@app.command()
@user_errors
def describe(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job.")],
    namespace: NamespaceOption = None,
) -> None:
    """Show a job in detail: conditions, replica statuses and events."""
    from kubemill.cli.views import describe_job

    describe_job(_settings(ctx, namespace), name)


@app.command()
@user_errors
def logs(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job.")],
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
        show_logs(_settings(ctx, namespace), name, replica=replica, follow=follow, options=options)
    )


@app.command()
@user_errors
def delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job.")],
    namespace: NamespaceOption = None,
) -> None:
    """Stop every replica of a job and remove it."""
    from kubemill.cli.views import delete_job

    delete_job(_settings(ctx, namespace), name)


@app.command()
@user_errors
def interrupt(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job.")],
    force: Annotated[
        bool, typer.Option("--force", help="Kill the replicas at once (no grace period).")
    ] = False,
    namespace: NamespaceOption = None,
) -> None:
    """Stop a job for good and keep it: Failed, reason Interrupted (as Ctrl-C during run)."""
    from kubemill.cli.views import interrupt_job

    interrupt_job(_settings(ctx, namespace), name, force=force)


@app.command()
@user_errors
def suspend(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job.")],
    namespace: NamespaceOption = None,
) -> None:
    """Suspend a job (runPolicy.suspend): its replicas stop until `kubemill resume`."""
    from kubemill.cli.views import suspend_job

    suspend_job(_settings(ctx, namespace), name)


@app.command()
@user_errors
def resume(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job.")],
    namespace: NamespaceOption = None,
) -> None:
    """Resume a suspended job: its replicas start again."""
    from kubemill.cli.views import resume_job

    resume_job(_settings(ctx, namespace), name)


@app.command()
@user_errors
def validate(
    paths: Annotated[
        list[Path], typer.Argument(help="Manifest files, or directories of *.yaml files.")
    ],
) -> None:
    """Check manifests: OK per file, or every problem with its field path (exit 1)."""
    from kubemill.cli.manifests import validate_paths

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
) -> None:
    """Print, as YAML, every object the operator creates for the job on a cluster."""
    from kubemill.cli.manifests import render_file

    render_file(
        file,
        namespace=_settings(ctx, namespace).namespace,
        gang_scheduler=gang_scheduler.value if gang_scheduler else None,
        show_secrets=show_secrets,
    )


@app.command()
@user_errors
def install(
    ctx: typer.Context,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the manifests (to pipe into kubectl apply).")
    ] = False,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace of the operator (kubemill-system)."),
    ] = None,
    image: Annotated[
        str | None, typer.Option(help="Operator image (default: kubemill-operator:<version>).")
    ] = None,
    watch_namespace: Annotated[
        list[str] | None,
        typer.Option(
            help="Serve only this namespace (repeatable; Roles instead of a ClusterRole)."
        ),
    ] = None,
    gang_scheduler: Annotated[
        GangScheduler | None, typer.Option(help="Grant and configure this gang scheduler.")
    ] = None,
    serve_upstream_groups: Annotated[
        bool,
        typer.Option(
            help="Also reconcile each kind's upstream group (kubeflow.org, ...: kubemill kinds)."
        ),
    ] = False,
    replicas: Annotated[
        int | None, typer.Option(min=1, help="Operator replicas, leader-elected (2).")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Say what would be created or changed; write nothing."),
    ] = False,
    force_conflicts: Annotated[
        bool,
        typer.Option(
            "--force-conflicts", help="Take back fields someone else changed (kubectl edit, ...)."
        ),
    ] = False,
    wait: Annotated[
        bool, typer.Option(help="Wait for the CRDs and the operator to be ready.")
    ] = True,
    timeout: Annotated[
        float, typer.Option(min=0, help="Seconds to wait for readiness (--wait).")
    ] = 300.0,
) -> None:
    """Install the operator into the cluster: CRDs, RBAC and Deployment (YAML with --print).

    Server-side apply with field manager `kubemill`: running it again changes only what
    differs, so it also upgrades. The cluster is the one of --kubeconfig/--context.
    """
    from kubemill.substrates.kubernetes import install as installer

    given = {"namespace": namespace, "image": image, "replicas": replicas}
    # Options left out keep the generator's defaults (one source of truth).
    objects = installer.install_manifests(
        watch_namespaces=watch_namespace or None,
        gang_scheduler=gang_scheduler.value if gang_scheduler else None,
        serve_upstream_groups=serve_upstream_groups,
        **{key: value for key, value in given.items() if value is not None},  # type: ignore[arg-type]
    )
    if print_only:
        from kubemill.cli.manifests import print_yaml

        print_yaml(objects)
        return
    from kubemill.substrates.kubernetes.client.connection import Http, connect

    settings = _settings(ctx)
    connection = connect(kubeconfig=settings.kubeconfig, context=settings.context)
    http = Http(connection)
    typer.echo(f"installing kubemill {_version()} into {connection.server}" + _dry(dry_run))
    installer.install(http, objects, dry_run=dry_run, force=force_conflicts, progress=typer.echo)
    if wait and not dry_run:
        installer.wait_ready(http, objects, timeout=timeout, progress=typer.echo)
    if not dry_run:
        typer.echo("kubemill operator installed; `kubemill version` shows it")


@app.command()
@user_errors
def uninstall(
    ctx: typer.Context,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace of the operator (kubemill-system)."),
    ] = None,
    crds: Annotated[
        bool,
        typer.Option("--crds", help="Also delete the CRDs, and with them every kubemill job."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
    ] = False,
) -> None:
    """Remove what `kubemill install` created; the CRDs and their jobs stay unless --crds."""
    from kubemill.substrates.kubernetes import install as installer
    from kubemill.substrates.kubernetes.client.connection import Http, connect

    settings = _settings(ctx)
    http = Http(connect(kubeconfig=settings.kubeconfig, context=settings.context))
    where = namespace or installer.DEFAULT_NAMESPACE
    jobs = installer.count_jobs(http)
    total = sum(jobs.values())
    listed = ", ".join(f"{count} {kind}" for kind, count in jobs.items())
    if total and crds:
        typer.echo(
            f"warning: deleting the CRDs deletes {_jobs(total)} ({listed})" + _dry(dry_run),
            err=True,
        )
    done = installer.uninstall(
        http, namespace=where, delete_crds=crds, dry_run=dry_run, progress=typer.echo
    )
    if not done.deleted:
        typer.echo(f"nothing of kubemill's found in namespace {where}")
    if total and not crds:
        typer.echo(
            f"warning: {_jobs(total)} ({listed}) kept with the CRDs; no operator reconciles "
            "them now (`kubemill uninstall --crds` deletes them)",
            err=True,
        )


def _jobs(count: int) -> str:
    return f"{count} job{'s' if count != 1 else ''}"


def _dry(dry_run: bool) -> str:
    return " (dry run)" if dry_run else ""


def _version() -> str:
    from kubemill import __version__

    return __version__


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def operator(ctx: typer.Context) -> None:
    """Run the kubemill operator against a cluster (options: kubemill operator --help)."""
    # Its options live with the operator (one definition for `kubemill operator` and
    # `python -m kubemill.substrates.kubernetes.operator`); importing them here would load
    # kopf and the kubernetes client on every `kubemill --help`.
    from kubemill.substrates.kubernetes.operator.__main__ import app as operator_app

    operator_app(args=list(ctx.args), prog_name="kubemill operator")


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

    raise typer.Exit(submit(_settings(ctx), list(ctx.args)))


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

    raise typer.Exit(run_doctor(_settings(ctx), repair=repair))


@app.command()
@user_errors
def kinds() -> None:
    """List the job kinds kubemill runs: names, accepted apiVersions, local support."""
    from kubemill.cli.views import kinds_table, stdout_console

    stdout_console().print(kinds_table())


@app.command()
@user_errors
def version(
    ctx: typer.Context,
    client: Annotated[
        bool, typer.Option("--client", help="Only this program's version; ask no cluster.")
    ] = False,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace of the operator (kubemill-system)."),
    ] = None,
) -> None:
    """Print kubemill's version, and the installed operator's when a cluster is reachable."""
    import platform

    typer.echo(f"kubemill {_version()} (Python {platform.python_version()})")
    if client:
        return
    from kubemill.substrates.base import SubstrateError
    from kubemill.substrates.kubernetes import install as installer
    from kubemill.substrates.kubernetes.client.connection import Http, connect
    from kubemill.substrates.kubernetes.client.errors import KubeconfigError

    settings = _settings(ctx)
    where = namespace or installer.DEFAULT_NAMESPACE
    try:
        connection = connect(kubeconfig=settings.kubeconfig, context=settings.context)
    except KubeconfigError:
        if settings.kubeconfig is not None:
            raise
        return  # no cluster configured at all: the client is all there is
    try:
        found = installer.operator_version(Http(connection), where)
    except SubstrateError as exc:
        typer.echo(f"operator: unknown ({exc})", err=True)
        return
    if found is None:
        typer.echo(
            f"operator: not installed in namespace {where} of {connection.server} "
            "(`kubemill install`)"
        )
        return
    typer.echo(
        f"operator {found['version']} (image {found['image']}, "
        f"{found['available']}/{found['replicas']} replicas available, "
        f"namespace {where}, {connection.server})"
    )


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

    settings = _settings(ctx)
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
            _exit_at_once(done)
        raise


def _exit_at_once(done: SystemExit) -> None:
    """End the process now that the command has said everything, skipping the teardown.

    Freeing every module's objects on the way out took 30-70 ms after `kubemill run` had
    printed its verdict, which a script waiting for the job's end pays each time; the
    kernel frees the memory at once. Only when nothing is left to do: the exit handlers
    run, the output is flushed, and no other (non-daemon) thread is still working, such
    as a supervisor that has not let go of its job, and no profiler or debugger is
    attached. Otherwise the usual exit happens.
    """
    import atexit
    import os
    import threading

    code = done.code
    if code is not None and not isinstance(code, int):
        return  # a message to print: the usual exit does that
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return  # a profiler or debugger writes its results once the program returns
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        return  # e.g. a closed pipe: let the usual exit report it as it always did
    os._exit(code or 0)
