"""The commands about the operator on a cluster: ``kubemill install``, ``uninstall``,
``operator`` (run it) and ``version`` (this program's and the installed operator's).

Registered on the command tree by :mod:`kubemill.cli.app`; only typer is imported at the top.
"""

# No `from __future__ import annotations`: typer reads the annotations (see app.py).
from typing import Annotated

import typer

from kubemill.cli.commands import GangScheduler, settings_of, user_errors


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
    history: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Records of deleted jobs the operator keeps for `kubemill get --history` "
            "(1000; 0: none, and no grant for them).",
        ),
    ] = None,
    progress: Annotated[
        bool,
        typer.Option(
            help="Job pods send progress reports to the operator (a sidecar, a Service and "
            "tokenreviews/create); --no-progress: none of it."
        ),
    ] = True,
    runtimes: Annotated[
        bool,
        typer.Option(
            "--runtimes",
            help="Also install the training runtimes the engines offer (Kubeflow Trainer's "
            "runtime CRDs and its default ClusterTrainingRuntimes).",
        ),
    ] = False,
) -> None:
    """Install the operator into the cluster: CRDs, RBAC and Deployment (YAML with --print).

    Server-side apply with field manager `kubemill`: running it again changes only what
    differs, so it also upgrades. The cluster is the one of --kubeconfig/--context.
    """
    from kubemill.substrates.kubernetes import install as installer

    given = {"namespace": namespace, "image": image, "replicas": replicas, "history": history}
    # Options left out keep the generator's defaults (one source of truth).
    objects = installer.install_manifests(
        watch_namespaces=watch_namespace or None,
        gang_scheduler=gang_scheduler.value if gang_scheduler else None,
        serve_upstream_groups=serve_upstream_groups,
        extras=("runtimes",) if runtimes else (),
        progress=progress,
        **{key: value for key, value in given.items() if value is not None},  # type: ignore[arg-type]
    )
    if print_only:
        from kubemill.cli.manifests import print_yaml

        print_yaml(objects)
        return
    from kubemill.substrates.kubernetes.client.connection import Http, connect

    settings = settings_of(ctx)
    connection = connect(kubeconfig=settings.kubeconfig, context=settings.context)
    http = Http(connection)
    typer.echo(f"installing kubemill {_version()} into {connection.server}" + _dry(dry_run))
    installer.install(http, objects, dry_run=dry_run, force=force_conflicts, progress=typer.echo)
    if wait and not dry_run:
        installer.wait_ready(http, objects, timeout=timeout, progress=typer.echo)
    if not dry_run:
        typer.echo("kubemill operator installed; `kubemill version` shows it")


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

    settings = settings_of(ctx)
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


@user_errors
def operator(ctx: typer.Context) -> None:
    """Run the kubemill operator against a cluster (options: kubemill operator --help)."""
    # Its options live with the operator (one definition for `kubemill operator` and
    # `python -m kubemill.substrates.kubernetes.operator`); importing them here would load
    # kopf and the kubernetes client on every `kubemill --help`.
    from kubemill.substrates.kubernetes.operator.__main__ import app as operator_app

    operator_app(args=list(ctx.args), prog_name="kubemill operator")


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
    # Asking the cluster needs no extra: kubemill's own HTTP client reads the kubeconfig.
    from kubemill.substrates.base import SubstrateError
    from kubemill.substrates.kubernetes import install as installer
    from kubemill.substrates.kubernetes.client.connection import Http, connect
    from kubemill.substrates.kubernetes.client.errors import KubeconfigError

    settings = settings_of(ctx)
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
