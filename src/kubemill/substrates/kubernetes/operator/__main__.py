"""``python -m kubemill.substrates.kubernetes.operator``: the operator without the kubemill CLI.

The same options as ``kubemill operator``; used by the operator tests and benchmarks, and
usable as a container entry point.
"""

from __future__ import annotations

from kubemill.substrates.kubernetes.operator.process import without_kubernetes_client

without_kubernetes_client()  # before kopf is imported (its docstring says why)

import logging  # noqa: E402
import platform  # noqa: E402
from typing import Annotated  # noqa: E402

import kopf  # noqa: E402
import typer  # noqa: E402

from kubemill.kinds import entries  # noqa: E402
from kubemill.substrates.kubernetes.operator.main import run_operator  # noqa: E402
from kubemill.substrates.kubernetes.operator.settings import (  # noqa: E402
    OperatorSettings,
    SettingsError,
)
from kubemill.version import __version__  # noqa: E402

app = typer.Typer(
    add_completion=False,
    # Plain help and errors, as every other kubemill command (rich draws boxes, and cuts
    # long option names to fit them).
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_UPSTREAM_HELP = "Also reconcile " + ", ".join(
    f"{group}/{version} {engine.kind}"
    for engine in entries()
    for group, version in engine.api.upstream_groups
)


@app.command()
def main(
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="Serve this namespace (repeat).")
    ] = None,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Serve every namespace.")
    ] = False,
    gang_scheduler_name: Annotated[
        str | None, typer.Option(help="volcano or scheduler-plugins: create PodGroups.")
    ] = None,
    metrics_port: Annotated[int, typer.Option(help="Prometheus /metrics port (0: off).")] = 8080,
    health_port: Annotated[int, typer.Option(help="/healthz port (0: off).")] = 8081,
    bind_address: Annotated[str, typer.Option(help="Address of both endpoints.")] = "0.0.0.0",  # noqa: S104
    serve_upstream_groups: Annotated[bool, typer.Option(help=_UPSTREAM_HELP)] = False,
    leader_election: Annotated[
        bool, typer.Option(help="Reconcile only while holding the Lease (several replicas).")
    ] = False,
    lease_duration: Annotated[int, typer.Option(help="Lease duration in seconds.")] = 15,
    lease_name: Annotated[str, typer.Option()] = "kubemill-operator",
    lease_namespace: Annotated[str | None, typer.Option()] = None,
    identity: Annotated[str | None, typer.Option(help="This replica's name.")] = None,
    workers: Annotated[int, typer.Option(help="Jobs reconciled at once.")] = 16,
    context: Annotated[str | None, typer.Option(help="kubeconfig context.")] = None,
    history: Annotated[
        int, typer.Option(help="Records of deleted jobs to keep, oldest pruned (0: none).")
    ] = 1000,
    history_namespace: Annotated[
        str | None, typer.Option(help="Namespace of the records (default: the operator's own).")
    ] = None,
    progress_port: Annotated[
        int, typer.Option(help="Port of the endpoint job pods report progress to (0: off).")
    ] = 0,
    progress_image: Annotated[
        str | None, typer.Option(help="Image of job pods' progress sidecar (none: no sidecar).")
    ] = None,
    progress_url: Annotated[
        str | None, typer.Option(help="The endpoint's URL for the sidecars (default: Service).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="kopf's debug log.")] = False,
    log_level: Annotated[
        str, typer.Option(help="Level of the operator's own log (DEBUG: every reconcile).")
    ] = "INFO",
) -> None:
    """Run the kubemill operator until SIGTERM or SIGINT."""
    extra: dict[str, str] = {}
    if lease_namespace:
        extra["lease_namespace"] = lease_namespace
    if identity:
        extra["identity"] = identity
    if history_namespace:
        extra["history_namespace"] = history_namespace
    try:
        settings = OperatorSettings(
            namespaces=list(namespace) if namespace else None,
            all_namespaces=all_namespaces,
            gang_scheduler_name=gang_scheduler_name,  # type: ignore[arg-type]  # checked inside
            metrics_port=metrics_port or None,
            health_port=health_port or None,
            bind_address=bind_address,
            serve_upstream_groups=serve_upstream_groups,
            leader_election=leader_election,
            lease_name=lease_name,
            lease_duration_seconds=lease_duration,
            workers=workers,
            context=context,
            history=history,
            progress_port=progress_port or None,
            progress_image=progress_image,
            progress_url=progress_url,
            **extra,  # type: ignore[arg-type]
        )
    except SettingsError as exc:
        raise typer.BadParameter(str(exc)) from None
    kopf.configure(verbose=verbose)
    if not verbose:
        # kopf logs every handler call at INFO; with a handler per pod event that is noise.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logger = logging.getLogger("kubemill.operator")
    logger.setLevel(log_level.upper())
    # First thing in the log: which build runs, and how it was told to run.
    logger.info(
        "kubemill operator %s (Python %s) starting; settings: %s",
        __version__,
        platform.python_version(),
        settings.describe(),
    )
    run_operator(settings)


if __name__ == "__main__":
    app()
