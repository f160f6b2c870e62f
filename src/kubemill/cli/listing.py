"""``kubemill get``: the job list, a schedule kind's own table, and ``-o yaml|json``.

The job table itself is :func:`kubemill.cli.views.jobs_table` (``run`` prints it too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from kubemill.cli.settings import Settings
from kubemill.cli.views import age, jobs_table, phase_text, stdout_console, timestamp
from kubemill.engines.spark.api.scheduled import ScheduledSparkApplication
from kubemill.sdk.summary import has_schedule_columns
from kubemill.substrates.base import JobView


def get_jobs(settings: Settings, name: str | None, *, output: str) -> None:
    """``kubemill get [NAME | KIND] [-o yaml|json]``: a kind's plural, singular or short name
    (``scheduledsparkapplications``, ``tfj``), as with kubectl, lists the jobs of that kind."""
    client = settings.client()
    kind = kind_named(name) if name else None
    if name and kind is None:
        views = [client.get(name, namespace=settings.namespace)]
    else:
        views = client.list(namespace=settings.namespace)
        if kind is not None:
            views = [view for view in views if view.kind == kind]
    single = name is not None and kind is None
    if output != "table":
        _print_objects(views, single=single, fmt=output)
        return
    console = stdout_console()
    one_namespace = settings.namespace is not None
    if not views:
        console.print(f"No {kind or 'job'}s found.", style="dim")
    elif kind is not None and all(has_schedule_columns(view) for view in views):
        console.print(schedules_table(views, one_namespace=one_namespace))
    else:
        console.print(jobs_table(views, one_namespace=one_namespace))


def kind_named(name: str) -> str | None:
    """The registered kind ``name`` names as kubectl would take it (``tfjobs``, ``tfjob``,
    ``tfj``, ``TFJob``, ``tfjobs.kubemill.dev``), or None: then it names a job."""
    from kubemill.api import GROUP
    from kubemill.kinds import entries

    wanted = name.lower()
    for entry in entries():
        api = entry.api
        names = {api.kind, api.plural, api.singular, *api.short_names}
        names |= {f"{api.plural}.{GROUP}", f"{api.kind}.{GROUP}"}
        if wanted in {n.lower() for n in names}:
            return entry.kind
    return None


def schedules_table(views: Sequence[JobView], *, one_namespace: bool = False) -> Table:
    """NAME, SCHEDULE, SUSPEND, LAST RUN, LAST RUN NAME, STATE, AGE: one row per schedule
    (upstream's printer columns, and its state)."""
    table = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 3, 0, 0))
    namespaced = not one_namespace and any(view.namespace != "default" for view in views)
    headers = ("NAME", "SCHEDULE", "SUSPEND", "LAST RUN", "LAST RUN NAME", "STATE", "AGE")
    for header in ("NAMESPACE", *headers) if namespaced else headers:
        table.add_column(header, no_wrap=True)
    for view in views:
        assert isinstance(view.job, ScheduledSparkApplication)
        spec = view.job.spec
        status = view.job.status
        zone = f" ({spec.time_zone})" if spec.time_zone else ""
        table.add_row(
            *([view.namespace] if namespaced else []),
            view.name,
            f"{spec.schedule}{zone}",
            "true" if spec.suspend else "false",
            age(status.last_run),
            status.last_run_name or "-",
            phase_text(view.phase),
            age(view.created),
        )
    return table


def job_object(view: JobView) -> dict[str, Any]:
    """The job as Kubernetes would return it: spec plus the status observed now."""
    obj = view.job.to_wire()
    obj["status"] = view.status.to_wire()
    if view.created is not None:
        obj.setdefault("metadata", {}).setdefault("creationTimestamp", timestamp(view.created))
    return obj


def _print_objects(views: Sequence[JobView], *, single: bool, fmt: str) -> None:
    import typer

    data: dict[str, Any]
    if single:
        data = job_object(views[0])
    else:
        data = {"apiVersion": "v1", "kind": "List", "items": [job_object(v) for v in views]}
    if fmt == "json":
        typer.echo(json.dumps(data, indent=2))
    else:
        import yaml

        typer.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


__all__ = ["get_jobs", "job_object", "kind_named", "schedules_table"]
