"""The dashboard's HTML: whole pages for the first paint, and the fragments the server
pushes to keep them live.

Every value that came from a job (names, messages, log text, YAML) goes through
:func:`esc`; nothing is put into HTML any other way. The job page is a list of
:data:`JOB_SECTIONS`, each a heading and a body rendered from the same
:class:`JobDetail`: a later panel (a metrics plot, a resources panel) is one more entry,
pushed live like the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from kubemill.api import FieldError
from kubemill.dashboard.children import children_html
from kubemill.dashboard.markup import duration_tag, esc, job_path, state_badge, time_tag
from kubemill.dashboard.plots import resources_html
from kubemill.dashboard.views import (
    JobRow,
    actions_for,
    events_newest_last,
    iso,
    job_reference,
    job_row,
    replica_sort_key,
)
from kubemill.sdk.summary import (
    progress_words,
    runs_no_pods,
    short_replica_name,
    state_of,
)
from kubemill.substrates.base import (
    Children,
    EventRecord,
    JobView,
    ProgressPoint,
    ResourceReport,
)

STATIC_VERSION = "4"
"""Bumped when the shipped CSS/JS change, so browsers fetch them again."""


def layout(title: str, body: str, *, csrf: str, page: str, active: str = "", data: str = "") -> str:
    """A whole page: the shared header and navigation around ``body``."""
    nav = "".join(
        f'<a href="{href}"{" aria-current=page" if key == active else ""}>{label}</a>'
        for key, href, label in (("jobs", "/", "Jobs"), ("submit", "/submit", "Submit"))
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{esc(csrf)}">
<title>{esc(title)} · kubemill</title>
<link rel="stylesheet" href="/static/dashboard.css?v={STATIC_VERSION}">
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<script src="/static/dashboard.js?v={STATIC_VERSION}" defer></script>
</head>
<body data-page="{esc(page)}"{data}>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><span class="brand">kubemill</span><nav aria-label="Main">{nav}</nav>
<span id="live" class="live" role="status" aria-live="polite"></span></header>
<main id="main" tabindex="-1">
{body}
</main>
</body>
</html>
"""


NUMERIC_COLUMNS = frozenset({"Replicas", "Restarts", "Exit code", "Count"})
"""Columns of numbers: right-aligned, their headers too."""


def column_headers(names: Sequence[str]) -> str:
    return "".join(
        f'<th scope="col"{" class=num" if name in NUMERIC_COLUMNS else ""}>{name}</th>'
        for name in names
    )


def _option(value: str, *, selected: bool) -> str:
    chosen = " selected" if selected else ""
    return f'<option value="{esc(value)}"{chosen}>{esc(value)}</option>'


# --- the jobs page ---------------------------------------------------------------------------

JOB_COLUMNS = ("Name", "Namespace", "Kind", "State", "Age", "Duration", "Replicas", "Restarts")


def jobs_rows(views: Sequence[JobView]) -> str:
    """The jobs table's body: one row per job, newest first."""
    rows = sorted_rows(views)
    if not rows:
        return EMPTY_ROWS
    return "\n".join(row.html for row in rows)


EMPTY_ROWS = f'<tr class="empty"><td colspan="{len(JOB_COLUMNS) + 1}">No jobs yet.</td></tr>'
"""The jobs table's body when there is no job."""


@dataclass(frozen=True)
class RenderedRow:
    """One job's row of the jobs table, as the page holds it and the live stream patches it."""

    key: str
    """Which row of the page this one replaces (:func:`~.views.job_key`)."""
    order: str
    """Sorts the rows, newest first, as the strings compare (also the row's ``data-order``)."""
    html: str


def rendered_row(view: JobView) -> RenderedRow:
    """The job's row of the jobs table."""
    row = job_row(view)
    order = f"{iso(row.created)} {row.name}"
    return RenderedRow(row.key, order, _job_row_html(row, order))


def sorted_rows(views: Sequence[JobView]) -> list[RenderedRow]:
    """The jobs' rows, newest first."""
    return sorted(map(rendered_row, views), key=lambda row: row.order, reverse=True)


def _job_row_html(row: JobRow, order: str) -> str:
    link = (
        f'<a href="{esc(row.link.url)}" rel="noreferrer">{esc(row.link.label)}</a>'
        if row.link is not None
        else '<span class="none">-</span>'
    )
    return (
        f'<tr data-kind="{esc(row.kind)}" data-state="{esc(row.state)}"'
        f' data-namespace="{esc(row.namespace)}" data-name="{esc(row.name)}"'
        f' data-key="{esc(row.key)}" data-order="{esc(order)}">'
        f'<th scope="row"><a href="{esc(job_path(row.namespace, row.reference))}">'
        f"{esc(row.name)}</a></th>"
        f"<td>{esc(row.namespace)}</td><td>{esc(row.kind)}</td>"
        f"<td>{state_badge(row.state)}</td>"
        f"<td>{time_tag(iso(row.created), age=True)}</td>"
        f"<td>{duration_tag(iso(row.started), iso(row.ended))}</td>"
        f'<td class="num">{esc(row.replicas)}</td><td class="num">{esc(row.restarts)}</td>'
        f"<td>{link}</td></tr>"
    )


def filter_options(views: Sequence[JobView]) -> dict[str, list[str]]:
    """The values each filter offers: the kinds, states and namespaces present."""
    return {
        "kind": sorted({v.kind for v in views}),
        "state": sorted({state_of(v) for v in views}),
        "namespace": sorted({v.namespace for v in views}),
    }


def jobs_page(
    views: Sequence[JobView],
    *,
    shown: Sequence[JobView],
    csrf: str,
    chosen: dict[str, str],
    history: str = "",
) -> str:
    """The jobs table (``shown``: the jobs the filters let through) and its filters, which
    offer what ``views`` (every job) holds; ``history``: the deleted jobs' section
    (:func:`history_section`)."""
    options = filter_options(views)
    selects = []
    for key, label in (("kind", "Kind"), ("state", "State"), ("namespace", "Namespace")):
        values = sorted(set(options[key]) | ({chosen[key]} if chosen.get(key) else set()))
        items = "".join(_option(v, selected=chosen.get(key) == v) for v in values)
        selects.append(
            f'<label>{label} <select name="{key}" data-filter="{key}">'
            f'<option value="">all</option>{items}</select></label>'
        )
    headers = column_headers(JOB_COLUMNS)
    body = f"""<h1>Jobs</h1>
<form class="filters" method="get" action="/" aria-label="Filter jobs">
{"".join(selects)}
<noscript><button type="submit">Filter</button></noscript>
</form>
<div class="table-wrap">
<table class="jobs" aria-describedby="jobs-count">
<caption id="jobs-count" class="visually-hidden">Jobs, newest first</caption>
<thead><tr>{headers}<th scope="col">Link</th></tr></thead>
<tbody id="job-rows">
{jobs_rows(shown)}
</tbody>
</table>
</div>
{history}"""
    return layout("Jobs", body, csrf=csrf, page="jobs", active="jobs")


# --- one job --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobDetail:
    """Everything the job page shows, fetched through the SDK in one go."""

    view: JobView
    events: Sequence[EventRecord] = ()
    runs: Sequence[JobView] = ()
    """A schedule's runs (jobs it created)."""
    manifest_yaml: str = ""
    objects_yaml: str = ""
    objects_note: str = ""
    progress: Sequence[ProgressPoint] = ()
    """The program's progress reports, oldest first (:meth:`JobClient.progress`)."""
    resources: ResourceReport | None = None
    """Each replica's CPU and memory over time (:meth:`JobClient.resources`)."""
    children: Children | None = None
    """The pods the job's program created itself, if its kind has such."""


def _summary(detail: JobDetail) -> str:
    view = detail.view
    row = job_row(view)
    link = (
        f'<dt>{esc(row.link.label)}</dt><dd><a href="{esc(row.link.url)}" rel="noreferrer">'
        f"{esc(row.link.url)}</a></dd>"
        if row.link
        else ""
    )
    return (
        '<dl class="facts">'
        f"<dt>Kind</dt><dd>{esc(view.kind)}</dd>"
        f"<dt>Namespace</dt><dd>{esc(view.namespace)}</dd>"
        f"<dt>State</dt><dd>{state_badge(row.state)}</dd>"
        f"<dt>Created</dt><dd>{time_tag(iso(row.created))}"
        f" ({time_tag(iso(row.created), age=True)} ago)</dd>"
        f"<dt>Started</dt><dd>{time_tag(iso(row.started))}</dd>"
        f"<dt>Finished</dt><dd>{time_tag(iso(row.ended))}</dd>"
        f"<dt>Duration</dt><dd>{duration_tag(iso(row.started), iso(row.ended))}</dd>"
        f"<dt>Replicas ready</dt><dd>{esc(row.replicas)}</dd>"
        f"<dt>Restarts</dt><dd>{esc(row.restarts)}</dd>"
        f"{link}</dl>"
    )


def _conditions(detail: JobDetail) -> str:
    conditions = sorted(
        detail.view.status.conditions,
        key=lambda c: iso(c.last_transition_time or c.last_update_time),
    )
    if not conditions:
        return '<p class="none">No conditions yet.</p>'
    items = []
    for cond in conditions:
        moment = iso(cond.last_transition_time or cond.last_update_time)
        status = "" if cond.status == "True" else f" ({esc(cond.status)})"
        items.append(
            f'<li class="cond cond-{esc(cond.status.lower())} is-{esc(cond.type.value.lower())}">'
            f'<span class="when">{time_tag(moment)}</span>'
            f'<span class="what">{state_badge(cond.type.value)}{status}'
            f" <strong>{esc(cond.reason)}</strong></span>"
            f'<span class="why">{esc(cond.message)}</span></li>'
        )
    return f'<ol class="timeline">{"".join(items)}</ol>'


def _replicas(detail: JobDetail) -> str:
    view = detail.view
    if not view.replicas:
        return '<p class="none">No replicas (yet).</p>'
    head = column_headers(
        ("Replica", "Phase", "Restarts", "Exit code", "Reason", "Started", "Finished",
         "Address", "Logs")
    )  # fmt: skip
    rows = []
    for rep in sorted(view.replicas, key=replica_sort_key):
        short = short_replica_name(view.name, rep.name)
        # A replica kubemill stopped (the job ended, was suspended) exited non-zero too;
        # only the one that failed is marked.
        failed = rep.phase == "Failed"
        logs = job_path(
            view.namespace, job_reference(view), "/logs?" + urlencode({"replica": short})
        )
        rows.append(
            f'<tr data-replica="{esc(short)}"{" class=failed" if failed else ""}>'
            f'<th scope="row">{esc(short)}</th><td>{state_badge(rep.phase)}</td>'
            f'<td class="num">{rep.restarts}</td>'
            f'<td class="num exit">{"-" if rep.exit_code is None else rep.exit_code}</td>'
            f'<td><span class="reason">{esc(rep.reason or "-")}</span>'
            f"{'<br><small>' + esc(rep.message) + '</small>' if rep.message else ''}</td>"
            f"<td>{time_tag(iso(rep.started))}</td><td>{time_tag(iso(rep.finished))}</td>"
            f"<td>{esc(rep.address or '-')}</td>"
            f'<td><a href="{esc(logs)}">logs'
            f'<span class="visually-hidden"> of {esc(short)}</span></a></td></tr>'
        )
    return (
        f'<div class="table-wrap"><table class="replicas"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>{_lives(view)}"
    )


def _lives(view: JobView) -> str:
    """Each replica's life as a bar on the job's time line, from its start to its end (or
    now). The script places the bars (a running one grows); the table above holds the
    same facts in words, so the picture is hidden from screen readers."""
    replicas = [r for r in sorted(view.replicas, key=replica_sort_key) if r.started]
    if not replicas:
        return ""
    starts = [r.started for r in replicas if r.started is not None]
    begin = min([*starts, *([view.status.start_time] if view.status.start_time else [])])
    end = view.status.completion_time if view.finished else None
    bars = []
    for rep in replicas:
        short = short_replica_name(view.name, rep.name)
        exit_code = "" if rep.exit_code is None else f", exit code {rep.exit_code}"
        restarts = f", {rep.restarts} restarts" if rep.restarts else ""
        title = f"{short}: {rep.phase}{exit_code}{restarts} {rep.reason}".strip()
        mark = f"↻{rep.restarts}" if rep.restarts else ""
        bars.append(
            f'<div class="life"><span class="life-name">{esc(short)}</span>'
            f'<span class="life-track"><span class="life-bar phase-{esc(rep.phase.lower())}"'
            f' data-start="{iso(rep.started, precise=True)}"'
            f' data-end="{iso(rep.finished, precise=True)}"'
            f' title="{esc(title)}">{esc(mark)}</span></span></div>'
        )
    return (
        f'<div class="lives" aria-hidden="true" data-from="{iso(begin, precise=True)}"'
        f' data-to="{iso(end, precise=True)}">{"".join(bars)}</div>'
    )


def _events(detail: JobDetail) -> str:
    if not detail.events:
        return '<p class="none">No events.</p>'
    rows = "".join(
        f'<tr class="ev-{esc(e.type.lower())}"><td>{time_tag(iso(e.time))}</td>'
        f"<td>{esc(e.type)}</td><td>{esc(e.reason)}</td>"
        f'<td class="num">{e.count}</td><td>{esc(e.message)}</td></tr>'
        for e in events_newest_last(detail.events)
    )
    head = column_headers(("Time", "Type", "Reason", "Count", "Message"))
    return (
        f'<div class="table-wrap"><table class="events"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def _runs(detail: JobDetail) -> str:
    if not detail.runs:
        return '<p class="none">No runs yet.</p>'
    return (
        '<ul class="runs">'
        + "".join(
            f'<li><a href="{esc(job_path(r.namespace, job_reference(r)))}">{esc(r.name)}</a>'
            f" {state_badge(state_of(r))}</li>"
            for r in detail.runs
        )
        + "</ul>"
    )


def _manifest(detail: JobDetail) -> str:
    objects = (
        f"<details><summary>What the operator creates on Kubernetes (Secret values left"
        f' out)</summary><pre class="yaml"><code>{esc(detail.objects_yaml)}</code></pre></details>'
        if detail.objects_yaml
        else f'<p class="none">{esc(detail.objects_note)}</p>'
        if detail.objects_note
        else ""
    )
    return f'<pre class="yaml"><code>{esc(detail.manifest_yaml)}</code></pre>{objects}'


def _resources(detail: JobDetail) -> str:
    return resources_html(detail.view.name, detail.resources)


def _has_progress(detail: JobDetail) -> bool:
    return bool(detail.progress) or detail.view.status.trainer_status is not None


def plot_points(points: Sequence[ProgressPoint]) -> list[dict[str, object]]:
    """The plot's data: each report's step (its position when it gave none) and metrics."""
    return [
        {"step": point.step if point.step is not None else i, "metrics": dict(point.metrics)}
        for i, point in enumerate(points)
    ]


def _progress(detail: JobDetail) -> str:
    """The latest report in words, and its metrics over steps: the script draws one small
    SVG plot per metric from ``data-points`` (the words above hold the latest values)."""
    status = detail.view.status.trainer_status
    facts = ""
    if status is not None:
        done, left = progress_words(detail.view)
        facts = (
            '<dl class="facts">'
            f"<dt>Progress</dt><dd>{esc(done)}</dd><dt>Time left</dt><dd>{esc(left)}</dd>"
            f"<dt>Reported</dt><dd>{time_tag(iso(status.last_updated_time))}</dd>"
            + "".join(f"<dt>{esc(m.name)}</dt><dd>{esc(m.value)}</dd>" for m in status.metrics)
            + "</dl>"
        )
    if not detail.progress:
        return facts
    points = json.dumps(plot_points(detail.progress), separators=(",", ":"))
    return f'{facts}<div class="plots" data-points="{esc(points)}"></div>'


@dataclass(frozen=True)
class Section:
    """One panel of the job page: ``live`` ones are re-rendered on every push."""

    key: str
    title: str
    render: Callable[[JobDetail], str]
    live: bool = True
    shown: Callable[[JobDetail], bool] = lambda _detail: True


JOB_SECTIONS: tuple[Section, ...] = (
    Section("summary", "Summary", _summary),
    Section("conditions", "Conditions", _conditions),
    Section("progress", "Progress and metrics", _progress, shown=_has_progress),
    Section("replicas", "Replicas", _replicas),
    Section("runs", "Runs", _runs, shown=lambda d: runs_no_pods(d.view)),
    Section("resources", "Resources", _resources, shown=lambda d: not runs_no_pods(d.view)),
    Section(
        "children",
        "Children",
        lambda d: children_html(d.children) if d.children else "",
        shown=lambda d: d.children is not None,
    ),
    Section("events", "Events", _events),
    Section("manifest", "Manifest", _manifest, live=False),
)
"""The job page, top to bottom. A metrics plot or a resources panel is one more Section
(its body may carry the plot's data for the script in a ``data-`` attribute)."""


def live_sections(detail: JobDetail) -> dict[str, str]:
    """The bodies of the live sections, by key: what the job stream pushes."""
    live = {s.key: s.render(detail) for s in JOB_SECTIONS if s.live and s.shown(detail)}
    return {"actions": _actions(detail.view), **live}


ACTIONS = (
    ("suspend", "Suspend", ""),
    ("resume", "Resume", ""),
    ("interrupt", "Interrupt", "Interrupt {name}? It stops for good, recorded Failed."),
    ("delete", "Delete", "Delete {name}? Its replicas are stopped, its record and logs removed."),
)
"""Each action's verb, button label and the question asked before it (if any)."""


def _actions(view: JobView) -> str:
    """The action buttons; those that cannot apply now are disabled (pushed live)."""
    path = job_path(view.namespace, job_reference(view))
    allowed = actions_for(view)
    buttons = []
    for verb, label, question in ACTIONS:
        confirm = f' data-confirm="{esc(question.format(name=view.name))}"' if question else ""
        disabled = "" if verb in allowed else " disabled"
        buttons.append(
            f'<button type="button" data-action="{verb}"'
            f' data-url="{esc("/api" + path + "/" + verb)}"{confirm}{disabled}'
            f' class="action action-{verb}">{label}</button>'
        )
    return "".join(buttons) + f'<a class="button" href="{esc(path + "/logs")}">Logs</a>'


def job_page(detail: JobDetail, *, csrf: str) -> str:
    view = detail.view
    sections = []
    for section in JOB_SECTIONS:
        if not section.shown(detail):
            continue
        sections.append(
            f'<section class="panel panel-{section.key}" aria-labelledby="h-{section.key}">'
            f'<h2 id="h-{section.key}">{section.title}</h2>'
            f'<div data-section="{section.key}">{section.render(detail)}</div></section>'
        )
    stream = "/api" + job_path(view.namespace, job_reference(view), "/stream")
    body = (
        f'<h1><span class="kind">{esc(view.kind)}</span> {esc(view.name)}</h1>'
        f'<div class="actions" role="group" aria-label="Actions" data-section="actions">'
        f"{_actions(view)}</div>"
        '<p id="action-result" role="status" aria-live="polite"></p>'
        f'<div class="panels">{"".join(sections)}</div>'
    )
    return layout(
        f"{view.name}",
        body,
        csrf=csrf,
        page="job",
        data=f' data-stream="{esc(stream)}"',
    )


# --- logs -----------------------------------------------------------------------------------

LOG_TAIL = 2000
"""Lines of each replica's log the logs page starts with: never the whole file at once."""


def logs_page(view: JobView, *, replica: str, csrf: str) -> str:
    path = job_path(view.namespace, job_reference(view))
    names = [
        short_replica_name(view.name, r.name) for r in sorted(view.replicas, key=replica_sort_key)
    ]
    options = "".join(
        f'<option value="{esc(n)}"{" selected" if n == replica else ""}>{esc(n)}</option>'
        for n in names
    )
    query = urlencode({"replica": replica}) if replica else ""
    stream = "/api" + path + "/logs/stream" + (f"?{query}" if query else "")
    download = path + "/logs.txt" + (f"?{query}" if query else "")
    body = f"""<h1>Logs of <a href="{esc(path)}">{esc(view.name)}</a></h1>
<form class="filters" method="get" aria-label="Choose a replica">
<label>Replica <select name="replica" data-replica-select>
<option value="">all replicas</option>{options}</select></label>
<label><input type="checkbox" id="follow" checked> Follow</label>
<label>Search <input type="search" id="log-search" placeholder="text in a line"></label>
<a class="button" href="{esc(download)}" download>Download</a>
<noscript><button type="submit">Show</button></noscript>
</form>
<p class="note">The last {LOG_TAIL} lines of each replica, then new lines as they are written.</p>
<p class="log-status"><span id="log-state" role="status" aria-live="polite"></span>
<span id="log-count" class="note"></span></p>
<pre id="log" class="log" tabindex="0" aria-label="Log lines"></pre>"""
    return layout(
        f"Logs of {view.name}", body, csrf=csrf, page="logs", data=f' data-stream="{esc(stream)}"'
    )


# --- submit ---------------------------------------------------------------------------------


def submit_page(*, csrf: str) -> str:
    body = """<h1>Submit a job</h1>
<form id="submit-form" class="submit" aria-describedby="submit-help">
<p id="submit-help">Paste one job's manifest (YAML) or choose a file. It is checked first:
problems are listed with their field paths, and nothing is created until it is valid.</p>
<label for="manifest">Manifest</label>
<textarea id="manifest" name="manifest" rows="18" spellcheck="false" required></textarea>
<label for="manifest-file">Or a file</label>
<input type="file" id="manifest-file" accept=".yaml,.yml,.json">
<div class="actions">
<button type="button" data-submit="validate">Validate</button>
<button type="button" data-submit="submit" class="primary">Submit</button>
</div>
</form>
<div id="submit-result" role="status" aria-live="polite"></div>"""
    return layout("Submit", body, csrf=csrf, page="submit", active="submit")


def problems_html(errors: Sequence[FieldError]) -> str:
    """The loader's problems as a list, each led by its field path."""
    items = "".join(
        f'<li><code class="path">{esc(e.path or "<document>")}</code>: {esc(e.message)}'
        f"{' <em>(' + esc(e.hint) + ')</em>' if e.hint else ''}</li>"
        for e in errors
    )
    count = len(errors)
    return (
        f'<div class="problems" role="alert"><h2>{count} problem{"s" if count != 1 else ""};'
        f" nothing was created</h2><ul>{items}</ul></div>"
    )


__all__ = [
    "JOB_SECTIONS",
    "LOG_TAIL",
    "JobDetail",
    "Section",
    "esc",
    "filter_options",
    "job_page",
    "job_path",
    "jobs_page",
    "jobs_rows",
    "layout",
    "live_sections",
    "logs_page",
    "problems_html",
    "submit_page",
]
