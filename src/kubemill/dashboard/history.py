"""The dashboard's deleted jobs: the records a substrate keeps of them (on Kubernetes, the
operator's; :meth:`JobClient.history`), as a section under the jobs table and as a page of
one record.

A record is shown with the job page's own sections (summary, conditions, replicas, events,
manifest), read from its :class:`~kubemill.substrates.history.JobRecord`: no actions, no logs
(a record keeps none), nothing live.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from aiohttp import web

from kubemill.dashboard.markup import esc, state_badge, time_tag
from kubemill.dashboard.pages import (
    JOB_SECTIONS,
    JobDetail,
    column_headers,
    layout,
)
from kubemill.dashboard.security import Guard
from kubemill.dashboard.views import in_our_group, iso, job_object, job_reference, job_row
from kubemill.sdk import JobClient, SubstrateError
from kubemill.sdk.summary import state_of
from kubemill.substrates.history import JobRecord

T = TypeVar("T")


class Dashboard(Protocol):
    """What of the server's state this module uses (:class:`kubemill.dashboard.server.
    Dashboard`; named by its shape, as the server imports this module)."""

    client: JobClient
    guard: Guard

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...


HISTORY_COLUMNS = ("Name", "Namespace", "Kind", "State", "Deleted", "Why", "Replicas", "Restarts")
DELETED_WHY = {"TTLExpired": "its TTL passed", "Deleted": "deleted"}
RECORD_SECTIONS = ("summary", "conditions", "replicas", "events", "manifest")
"""The job page's sections a record has what they show."""


def record_path(record: JobRecord) -> str:
    """The page of one record of a deleted job (by the job's uid: a name may recur)."""
    return "/history/" + quote(record.uid, safe="")


def history_section(records: Sequence[JobRecord], *, note: str = "") -> str:
    """The deleted jobs, latest deletion first; nothing when there are none (the local
    substrate keeps none: its finished jobs stay in the jobs table until deleted)."""
    heading = '<section aria-labelledby="h-history"><h2 id="h-history">Deleted jobs</h2>'
    if note:
        return f'{heading}<p class="none">{esc(note)}</p></section>'
    if not records:
        return ""
    rows = []
    for record in sorted(records, key=lambda r: iso(r.deleted), reverse=True):
        row = job_row(record.view)
        rows.append(
            f'<tr data-kind="{esc(row.kind)}" data-namespace="{esc(row.namespace)}"'
            f' data-name="{esc(row.name)}">'
            f'<th scope="row"><a href="{esc(record_path(record))}">{esc(row.name)}</a></th>'
            f"<td>{esc(row.namespace)}</td><td>{esc(row.kind)}</td>"
            f"<td>{state_badge(row.state)}</td>"
            f"<td>{time_tag(iso(record.deleted))}</td>"
            f"<td>{esc(DELETED_WHY.get(record.deleted_by, record.deleted_by))}</td>"
            f'<td class="num">{esc(row.replicas)}</td><td class="num">{esc(row.restarts)}</td>'
            "</tr>"
        )
    return (
        f'{heading}<div class="table-wrap"><table class="jobs history">'
        '<caption class="visually-hidden">Deleted jobs, latest deletion first</caption>'
        f"<thead><tr>{column_headers(HISTORY_COLUMNS)}</tr></thead>"
        f'<tbody id="history-rows">{"".join(rows)}</tbody></table></div></section>'
    )


def record_page(record: JobRecord, detail: JobDetail, *, csrf: str) -> str:
    """One deleted job as its record keeps it."""
    view = record.view
    sections = [
        f'<section class="panel panel-{s.key}" aria-labelledby="h-{s.key}">'
        f'<h2 id="h-{s.key}">{s.title}</h2><div>{s.render(detail)}</div></section>'
        for s in JOB_SECTIONS
        if s.key in RECORD_SECTIONS
    ]
    why = DELETED_WHY.get(record.deleted_by, record.deleted_by)
    body = (
        f'<h1><span class="kind">{esc(view.kind)}</span> {esc(view.name)}'
        ' <span class="deleted">(deleted)</span></h1>'
        f'<p class="record-note">Deleted {time_tag(iso(record.deleted))} ({esc(why)}).'
        " This is the record kept of it: its spec, final status, replicas and events; no"
        " logs.</p>"
        f'<div class="panels">{"".join(sections)}</div>'
    )
    return layout(f"{view.name} (deleted)", body, csrf=csrf, page="record")


# --- what the server asks (blocking SDK calls run in the dashboard's pool) --------------------


async def history_html(dashboard: Dashboard, chosen: dict[str, str]) -> str:
    """The deleted jobs the filters let through; a note instead when they cannot be read
    (a user may see the jobs but not the operator's records)."""
    try:
        records = await dashboard.call(dashboard.client.history)
    except SubstrateError as exc:
        return history_section([], note=f"The records of deleted jobs cannot be read: {exc}")
    shown = [
        r
        for r in records
        if (not chosen["kind"] or r.kind == chosen["kind"])
        and (not chosen["state"] or state_of(r.view) == chosen["state"])
        and (not chosen["namespace"] or r.namespace == chosen["namespace"])
    ]
    return history_section(shown)


async def latest_record(dashboard: Dashboard, namespace: str, reference: str) -> JobRecord | None:
    """The latest record of a deleted job that the job page's ``reference`` named, if the
    substrate keeps one: the record the page's own link names (:func:`.views.job_reference`:
    ``KIND/NAME``, or ``PLURAL.GROUP/NAME`` for an upstream group's job), else, for a bare
    name typed or kept from before, the latest record of that name."""
    records = await dashboard.call(dashboard.client.history, namespace)
    referred = [r for r in records if job_reference(r.view) == reference]
    if not referred and "/" not in reference:
        named = [r for r in records if r.name == reference]
        referred = [r for r in named if in_our_group(r.view)] or named  # as `get` looks
    return referred[-1] if referred else None


async def record_with_uid(dashboard: Dashboard, uid: str) -> JobRecord | None:
    records = await dashboard.call(dashboard.client.history)
    return next((r for r in records if r.uid == uid), None)


def add_routes(app: web.Application, dashboard: Dashboard) -> None:
    """``/history/<uid>``: the page of one record."""

    async def page(request: web.Request) -> web.Response:
        uid = request.match_info["uid"]
        record = await record_with_uid(dashboard, uid)
        if record is None:
            text = f"<h1>Not found</h1><p>No record of a deleted job with uid {esc(uid)}.</p>"
            csrf = dashboard.guard.csrf_token
            html, status = layout("Not found", text, csrf=csrf, page="missing"), 404
        else:
            html, status = record_html(dashboard, record), 200
        return web.Response(text=html, content_type="text/html", charset="utf-8", status=status)

    app.router.add_get("/history/{uid}", page)


def record_html(dashboard: Dashboard, record: JobRecord) -> str:
    from kubemill.substrates.kubernetes.render import dump_yaml

    detail = JobDetail(
        record.view,
        record.events,
        manifest_yaml=dump_yaml([job_object(record.view)]).removeprefix("---\n"),
    )
    return record_page(record, detail, csrf=dashboard.guard.csrf_token)
