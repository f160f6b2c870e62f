"""``kubemill cluster``: service clusters as jobs of their kind, on either substrate; every
service engine the registry has (each ``Engine`` with a ``cluster``, a ``ServiceEngine``).

    kubemill cluster create ENGINE --workers 2   # the engine's cluster; returns once Ready
    kubemill cluster list                        # the clusters, Ready or not, and endpoints
    kubemill cluster stop NAME                   # deletes it: no process, no object left

``create <engine>`` builds that service engine's manifest from its options (its
``ServiceEngine.manifest``) and submits it through the SDK, so on Kubernetes the operator
reconciles it and locally the supervisor runs its replicas (the engine's ``LocalSupport``).
It then waits until the core judges it Ready and prints the endpoint
(:func:`kubemill.deploy.serving.wait_serving`; ``--no-wait``: returns once submitted). The
cluster keeps serving in the background: locally under a detached supervisor, until
``cluster stop`` (or ``kubemill interrupt``/``delete``).

``kubemill run`` of a service cluster's manifest does the same as ``create``: a service
never ends, so ``run`` returns once it is Ready (:func:`serve`).

Only typer is imported at the top, as in :mod:`kubemill.cli.app`.
"""

# No `from __future__ import annotations`: typer reads the annotations (see app.py).
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kubemill.api import ClusterOptions, Job, JobStatus
    from kubemill.cli.settings import Settings

cluster_app = typer.Typer(
    name="cluster",
    help="Service clusters as jobs: create one and wait until it serves, list, stop.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

DEFAULT_TIMEOUT = 600.0


def service_kinds() -> frozenset[str]:
    """The kinds ``cluster list`` shows and ``cluster stop`` stops: every service
    engine's."""
    from kubemill.kinds import service_engines

    return frozenset(engine.kind for engine in service_engines().values())


def is_service(kind: str) -> bool:
    """Whether jobs of ``kind`` serve until stopped (never finish): ``run`` waits for
    Ready rather than for the end."""
    from kubemill.sdk.client import is_service as serves

    return serves(kind)


def serve(settings: "Settings", job: "Job", *, base_dir: str, timeout: float, wait: bool) -> int:
    """Submit a service cluster (detached) and, with ``wait``, return once it is Ready,
    printing its endpoint. Returns the exit code."""
    from rich.text import Text

    from kubemill.cli.console import stdout_console
    from kubemill.deploy.serving import NotServing, wait_serving

    console = stdout_console()
    client = settings.client()
    view = client.submit(job, detach=True, namespace=settings.namespace, base_dir=base_dir)
    name = view.name
    stop = settings.next_command("cluster stop", name)
    if not wait:
        console.print(Text.assemble((f"{view.kind} {name}", "bold"), " submitted."))
        console.print(Text.assemble(("Next: ", "dim"), settings.next_command("get", name)))
        return 0
    try:
        with console.status(f"waiting for {name} to be ready") as status:
            view = wait_serving(
                client, name, view.namespace, timeout=timeout, progress=status.update
            )
    except NotServing as exc:
        console.print(Text(str(exc), style="red"))
        console.print(
            Text.assemble(("Next: ", "dim"), settings.next_command("describe", name), "  |  ", stop)
        )
        return 1
    console.print(
        Text.assemble(
            (f"{view.kind} {name}", "bold"),
            " is ready at ",
            (str(getattr(view.status, "endpoint", "")), "bold green"),
            "; it keeps serving in the background.",
        )
    )
    for what, address in _client_addresses(view.job, view.status).items():
        console.print(Text.assemble((f"{what}: ", "dim"), (address, "bold")))
    console.print(Text.assemble(("Stop it: ", "dim"), stop))
    return 0


def _client_addresses(job: "Job", status: "JobStatus") -> "Mapping[str, str]":
    """What the job's service engine says clients connect to, beyond its endpoint."""
    from kubemill.kinds import service_engines

    for engine in service_engines().values():
        service = engine.cluster
        if engine.kind == job.KIND and service is not None and service.addresses is not None:
            return service.addresses(job, status)
    return {}


def _env_pairs(values: list[str] | None) -> dict[str, str]:
    from kubemill.cli.errors import fail

    pairs: dict[str, str] = {}
    for value in values or []:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            fail(f"--env: expected KEY=VALUE, got {value!r}")
        pairs[key] = rest
    return pairs


def _settings(ctx: typer.Context) -> "Settings":
    from kubemill.cli.settings import Settings

    return ctx.obj if isinstance(ctx.obj, Settings) else Settings()


@cluster_app.command("create")
def create_command(
    ctx: typer.Context,
    engine: Annotated[
        str,
        typer.Argument(help="A service engine of the registry (another is refused, naming them)."),
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="The cluster's name (default: generated).")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="Worker replicas.")] = 1,
    worker_cpu: Annotated[float, typer.Option("--worker-cpu", help="CPUs per worker.")] = 1,
    worker_mem: Annotated[
        str, typer.Option("--worker-mem", help="Memory per worker: bytes or e.g. 2g.")
    ] = "2g",
    supervisors: Annotated[int, typer.Option("--supervisors", help="Supervisor replicas.")] = 1,
    supervisor_cpu: Annotated[
        float | None, typer.Option("--supervisor-cpu", help="CPUs per supervisor (default 1).")
    ] = None,
    supervisor_mem: Annotated[
        str | None,
        typer.Option("--supervisor-mem", help="Memory per supervisor (default 4g)."),
    ] = None,
    min_workers: Annotated[
        int | None,
        typer.Option("--min-workers", help="Ready workers needed to be Ready (default all)."),
    ] = None,
    worker_cache_mem: Annotated[
        str | None,
        typer.Option("--worker-cache-mem", help="Each worker's cache: a size or a % of memory."),
    ] = None,
    image: Annotated[str | None, typer.Option("--image", help="The pods' image.")] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="KEY=VALUE for every supervisor and worker (repeatable)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for Ready.", min=0)
    ] = DEFAULT_TIMEOUT,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait until it is Ready (default).")
    ] = True,
) -> None:
    """Create a cluster of the engine's kind and wait until it is Ready; print its endpoint."""
    from kubemill.api import ClusterOptions
    from kubemill.cli.commands import user_errors

    user_errors(_create)(
        ctx,
        engine,
        name,
        ClusterOptions(
            workers=workers,
            worker_cpu=worker_cpu,
            worker_mem=worker_mem,
            supervisors=supervisors,
            supervisor_cpu=supervisor_cpu,
            supervisor_mem=supervisor_mem,
            min_workers=min_workers,
            worker_cache_mem=worker_cache_mem,
            image=image,
            env=_env_pairs(env),
        ),
        timeout,
        wait,
    )


def _create(
    ctx: typer.Context,
    engine: str,
    name: str | None,
    options: "ClusterOptions",
    timeout: float,
    wait: bool,
) -> None:
    import secrets
    from pathlib import Path

    from kubemill.cli.errors import fail
    from kubemill.kinds import load_one, service_engines

    engines = service_engines()
    if engine not in engines:
        fail(f"cluster create: unknown engine {engine!r}; kubemill creates {sorted(engines)}")
    # A cluster is addressed by its name later (`cluster stop NAME`): short and new.
    service = engines[engine].cluster
    assert service is not None  # service_engines() lists the engines that have one
    manifest = service.manifest(name or f"{engine}-{secrets.token_hex(3)}", options)
    job = load_one(manifest, name="kubemill cluster create")
    raise typer.Exit(
        serve(_settings(ctx), job, base_dir=str(Path.cwd()), timeout=timeout, wait=wait)
    )


@cluster_app.command("list")
def list_command(ctx: typer.Context) -> None:
    """List the clusters: state, ready workers, endpoint, age."""
    from kubemill.cli.commands import user_errors

    user_errors(_list)(ctx)


def _list(ctx: typer.Context) -> None:
    from rich.table import Table

    from kubemill.cli.console import stdout_console
    from kubemill.cli.views import age

    settings = _settings(ctx)
    kinds = service_kinds()
    views = [v for v in settings.client().list(namespace=settings.namespace) if v.kind in kinds]
    table = Table(box=None, pad_edge=False)
    for column in ("NAME", "KIND", "STATE", "WORKERS", "ENDPOINT", "AGE"):
        table.add_column(column, overflow="fold")
    for view in views:
        ready = getattr(view.status, "ready_replicas", {}) or {}
        # Workers: every replica type but the first, which leads (supervisors, a head).
        workers = list(view.job.replica_specs)[1:]
        total = sum(view.job.replica_count(rtype) for rtype in workers)
        table.add_row(
            view.name,
            view.kind,
            view.phase,
            f"{sum(ready.get(rtype, 0) for rtype in workers)}/{total}",
            str(getattr(view.status, "endpoint", None) or "-"),
            age(view.created),
        )
    if not views:
        stdout_console().print("No clusters.")
        return
    stdout_console().print(table)


@cluster_app.command("stop")
def stop_command(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="The cluster.")]
) -> None:
    """Stop a cluster for good: its processes (or pods) end and it is deleted."""
    from kubemill.cli.commands import user_errors

    user_errors(_stop)(ctx, name)


def _stop(ctx: typer.Context, name: str) -> None:
    from kubemill.cli.console import stdout_console
    from kubemill.cli.errors import fail

    settings = _settings(ctx)
    client = settings.client()
    view = client.get(name, namespace=settings.namespace)
    # Its kind's engine alone is asked (service_kinds() would import every engine's).
    if not is_service(view.kind):
        fail(f"{name} is a {view.kind}, not a cluster; stop it with `kubemill delete {name}`")
    client.delete(name, namespace=settings.namespace)
    stdout_console().print(f"{view.kind} {name} stopped and deleted.")
