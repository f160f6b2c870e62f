"""``kubemill get``: the job list, a controller kind's own table, and ``-o yaml|json``.

The job list is one path on every substrate: one row per job (:func:`job_rows`), drawn by
:func:`kubemill.cli.table.jobs_text`. It is also the command's hot path (a thousand jobs
in history), so this module imports only the standard library, the table and the local
store at first: on the local substrate the rows come from one query of the store, without
the job models; the SDK, rich and the registry are imported only when the store says a
job needs the core first, for another substrate, a named job or kind, or ``-o``.

The console script hands the plain forms of the command line (``kubemill [--state-dir D]
[--substrate S] [-n NS] get [-n NS] [-o table]``) to :func:`get_jobs` itself
(:func:`plain_get`): typer runs every option of a command through a pydantic TypeAdapter
(its ``_adapters`` module imports pydantic), which took longer than the listing of a
thousand jobs. Any other form, ``--help`` included, goes through typer to the same
:func:`get_jobs`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kubemill.cli.settings import Settings, Substrate
from kubemill.cli.styling import colour_wanted, write
from kubemill.cli.table import empty_text, jobs_text
from kubemill.substrates.rows import JobSummary

if TYPE_CHECKING:
    from rich.table import Table

    from kubemill.substrates.base import JobView
    from kubemill.substrates.history import JobRecord


def get_jobs(settings: Settings, name: str | None, *, output: str, history: bool = False) -> None:
    """``kubemill get [NAME | KIND] [-o yaml|json] [--history]``: a kind's plural, singular
    or short name (``tfjobs``, ``tfj``), as with kubectl, lists the jobs of that kind;
    ``history`` adds the records of deleted jobs the substrate keeps (:func:`history_rows`)."""
    kind = None
    if name:
        from kubemill.kinds import kind_named  # the registry: only when a name is given

        kind = kind_named(name)
    one_namespace = settings.namespace is not None
    if history:
        if name is not None and kind is None:
            import typer

            raise typer.BadParameter(
                "lists jobs: give no job name (a kind is fine)", param_hint="--history"
            )
        _get_with_history(settings, kind, output=output)
        return
    if name is None and output == "table":
        rows = job_rows(settings)
        colour = colour_wanted(sys.stdout)
        text = jobs_text(rows, one_namespace=one_namespace, colour=colour) if rows else ""
        write(text or empty_text("job", colour=colour), sys.stdout)
        return
    client = settings.client()
    if name and kind is None:
        views = [client.get(name, namespace=settings.namespace)]
    else:
        views = client.list(namespace=settings.namespace)
        if kind is not None:
            views = [view for view in views if view.kind == kind]
    if output != "table":
        _print_objects(views, single=name is not None and kind is None, fmt=output)
        return
    from kubemill.sdk.summary import has_own_table, row_of

    colour = colour_wanted(sys.stdout)
    if not views:
        write(empty_text(kind or "job", colour=colour), sys.stdout)
    elif kind is not None and all(has_own_table(view) for view in views):
        from kubemill.cli.console import stdout_console

        stdout_console().print(own_table(views, one_namespace=one_namespace))
    else:
        rows = [row_of(view) for view in views]
        write(jobs_text(rows, one_namespace=one_namespace, colour=colour), sys.stdout)


DELETED_SUFFIX = " (deleted)"
"""After a deleted job's state in ``get --history``."""


def _get_with_history(settings: Settings, kind: str | None, *, output: str) -> None:
    """The jobs there are, then the records of deleted ones, oldest deletion last."""
    client = settings.client()
    views = client.list(namespace=settings.namespace)
    records = client.history(namespace=settings.namespace)
    if kind is not None:
        views = [v for v in views if v.kind == kind]
        records = [r for r in records if r.kind == kind]
    if output != "table":
        items = [job_object(v) for v in views] + [record_object(r) for r in records]
        _print_data({"apiVersion": "v1", "kind": "List", "items": items}, fmt=output)
        return
    from kubemill.sdk.summary import row_of

    colour = colour_wanted(sys.stdout)
    rows = [row_of(v) for v in views] + history_rows(records)
    one_namespace = settings.namespace is not None
    text = jobs_text(rows, one_namespace=one_namespace, colour=colour) if rows else ""
    write(text or empty_text(kind or "job", colour=colour), sys.stdout)


def history_rows(records: Sequence[JobRecord]) -> list[JobSummary]:
    """A deleted job's row: as its last state was, the state marked deleted."""
    from dataclasses import replace

    from kubemill.sdk.summary import row_of

    rows = []
    for record in records:
        row = row_of(record.view)
        rows.append(replace(row, phase=row.phase + DELETED_SUFFIX))
    return rows


def record_object(record: JobRecord) -> dict[str, Any]:
    """A deleted job as ``-o yaml|json`` prints it: its last object, with when and why it
    was deleted as annotations."""
    from kubemill.cli.views import timestamp

    obj = job_object(record.view)
    annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
    if record.deleted is not None:
        annotations["kubemill.dev/deleted-at"] = timestamp(record.deleted)
    annotations["kubemill.dev/deleted-by"] = record.deleted_by
    return obj


def plain_get(argv: Sequence[str]) -> int | None:
    """Run ``kubemill get`` of a plain command line (:mod:`kubemill.cli.plain`) and return
    its exit code; ``None`` for any other command line, which typer runs."""
    settings = plain_get_settings(argv)
    if settings is None:
        return None
    from kubemill.cli.plain import end_as_typer

    def listing() -> int:
        get_jobs(settings, None, output="table")
        return 0

    return end_as_typer(listing)


def plain_get_settings(argv: Sequence[str]) -> Settings | None:
    """The settings of ``[global options] get [-n NS] [-o table]`` as typer reads them;
    ``None`` for anything else (another verb or option, a job or kind, ``--help``, a value
    typer would refuse)."""
    from kubemill.cli.plain import read_plain

    command = read_plain(argv, "get", options=("--output",))
    if command is None or command.options.get("output", "table") != "table":
        return None
    return command.settings


def job_rows(settings: Settings) -> list[JobSummary]:
    """Every job's row (of the chosen namespace), oldest first.

    The local store answers from one query when no job needs the core; otherwise (a
    supervisor died, a TTL may have passed, a record it cannot read as it is) the SDK lists
    the jobs, which has the core heal, delete or report them, and the rows are theirs, as
    on every other substrate.
    """
    if settings.substrate is Substrate.LOCAL:
        from kubemill.substrates.local.store import Store

        store = Store(settings.state_dir)
        try:
            rows = store.summaries(settings.namespace)
        finally:
            store.close()
        if rows is not None:
            return rows
    from kubemill.sdk.summary import row_of

    return [row_of(view) for view in settings.client().list(namespace=settings.namespace)]


def own_table(views: Sequence[JobView], *, one_namespace: bool = False) -> Table:
    """NAME, the kind's own columns (a schedule's: SCHEDULE, SUSPEND, LAST RUN, LAST RUN
    NAME, upstream's printer columns), STATE, AGE: one row per object of a controller's
    kind, as its registry record lists them."""
    from rich.table import Table

    from kubemill.cli.views import age, phase_text
    from kubemill.kinds import listing_of

    table = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 3, 0, 0))
    namespaced = not one_namespace and any(view.namespace != "default" for view in views)
    rows = []
    for view in views:
        listing = listing_of(view.kind)
        assert listing is not None, f"{view.kind} has no table of its own"
        rows.append((view, listing.columns(view.job)))
    own = [header for header, _ in rows[0][1]] if rows else []
    headers = ("NAME", *own, "STATE", "AGE")
    for header in ("NAMESPACE", *headers) if namespaced else headers:
        table.add_column(header, no_wrap=True)
    for view, columns in rows:
        table.add_row(
            *([view.namespace] if namespaced else []),
            view.name,
            *(cell if isinstance(cell, str) else age(cell) for _, cell in columns),
            phase_text(view.phase),
            age(view.created),
        )
    return table


def job_object(view: JobView) -> dict[str, Any]:
    """The job as Kubernetes would return it: spec plus the status observed now."""
    from kubemill.cli.views import timestamp

    obj = view.job.to_wire()
    obj["status"] = view.status.to_wire()
    if view.created is not None:
        obj.setdefault("metadata", {}).setdefault("creationTimestamp", timestamp(view.created))
    return obj


def _print_objects(views: Sequence[JobView], *, single: bool, fmt: str) -> None:
    data: dict[str, Any]
    if single:
        data = job_object(views[0])
    else:
        data = {"apiVersion": "v1", "kind": "List", "items": [job_object(v) for v in views]}
    _print_data(data, fmt=fmt)


def _print_data(data: dict[str, Any], *, fmt: str) -> None:
    import typer

    if fmt == "json":
        typer.echo(json.dumps(data, indent=2))
    else:
        import yaml

        typer.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


__all__ = [
    "get_jobs",
    "history_rows",
    "job_object",
    "job_rows",
    "own_table",
    "plain_get",
    "plain_get_settings",
    "record_object",
]
