"""The dashboard's web server: aiohttp routes over one :class:`~kubemill.sdk.JobClient`.

Every read and every action goes through the client, the same one the CLI uses, so the
dashboard sees exactly what ``kubemill get``/``describe``/``logs`` see on either substrate.
The client is blocking (SQLite and files locally, HTTP on a cluster): its calls run in a
small thread pool of the server's own, and a followed log in a thread of its own (a
follow blocks until its next line; :mod:`.log_follow`), so a slow call never stalls the
event loop.

Live pages are fed by Server-Sent Events: one loop per server lists the jobs and pushes
to every open jobs page the rows that changed (the whole table first); a job page's stream
pushes that job's sections when they changed; a logs stream pushes lines as the client's
``follow`` yields them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from kubemill.api import ManifestError
from kubemill.dashboard import history, pages
from kubemill.dashboard.feed import JobsFeed
from kubemill.dashboard.log_follow import LogFollower, push_lines
from kubemill.dashboard.markup import esc, job_path
from kubemill.dashboard.pages import JobDetail
from kubemill.dashboard.security import Guard
from kubemill.dashboard.views import (
    iso,
    job_object,
    job_reference,
    job_row,
    manifest_problems,
    operator_objects,
    runs_of_schedule,
)
from kubemill.kinds import load_one
from kubemill.sdk import JobClient, JobExists, JobNotFound, SubstrateError
from kubemill.sdk.summary import (
    runs_no_pods,
    short_replica_name,
    state_of,
)
from kubemill.substrates.base import JobView, ResourceReport

STATIC_DIR = Path(__file__).parent / "static"
POLL_SECONDS = 0.5
"""How often the server asks the client for an open job to push its changes, and at the
longest for the jobs (the jobs feed lists again sooner when its listing costs little:
:data:`~kubemill.dashboard.feed.LISTING_SHARE`)."""
HEARTBEAT_SECONDS = 15.0
"""An SSE comment this often keeps proxies from closing an idle stream."""
SDK_THREADS = 8

T = TypeVar("T")
logger = logging.getLogger(__name__)


class Dashboard:
    """The state of one server: the client, its thread pool, the shared jobs feed."""

    def __init__(
        self, client: JobClient, guard: Guard, *, poll_seconds: float = POLL_SECONDS
    ) -> None:
        self.client = client
        self.guard = guard
        self.poll_seconds = poll_seconds
        self.executor = ThreadPoolExecutor(SDK_THREADS, thread_name_prefix="dashboard-sdk")
        self.feed = JobsFeed(lambda: self.call(client.list), poll_seconds=poll_seconds)
        self.streams: set[asyncio.Task[Any]] = set()

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        """Mark the current handler as an open stream: it never ends by itself, so the
        server cancels it when it shuts down instead of waiting for it."""
        task = asyncio.current_task()
        assert task is not None
        self.streams.add(task)
        try:
            yield
        finally:
            self.streams.discard(task)

    async def shutdown(self, _app: web.Application | None = None) -> None:
        for task in list(self.streams):
            task.cancel()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking client call in the pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    def detail(self, name: str, namespace: str, *, manifest: bool) -> JobDetail:
        """Everything the job page shows (blocking: run it through :meth:`call`)."""
        from kubemill.substrates.kubernetes.render import dump_yaml

        view = self.client.get(name, namespace)
        events = self.client.events(name, namespace)
        runs = runs_of_schedule(view, self.client.list(namespace)) if runs_no_pods(view) else []
        points = self.client.progress(name, namespace)
        try:
            resources = self.client.resources(name, namespace)
        except JobNotFound:
            raise
        except SubstrateError as exc:  # e.g. no right to read the metrics API: say so
            resources = ResourceReport({}, note=f"cannot read the resources: {exc}")
        children = self.client.children(name, namespace)
        if not manifest:
            return JobDetail(
                view, events, runs, progress=points, resources=resources, children=children
            )
        objects, note = operator_objects(view.job)
        return JobDetail(
            view,
            events,
            runs,
            manifest_yaml=dump_yaml([job_object(view)]).removeprefix("---\n"),
            objects_yaml=dump_yaml(objects) if objects else "",
            objects_note=note,
            progress=points,
            resources=resources,
            children=children,
        )

    async def close(self, _app: web.Application | None = None) -> None:
        await self.feed.stop()
        self.executor.shutdown(wait=False, cancel_futures=True)


DASHBOARD_KEY: web.AppKey[Dashboard] = web.AppKey("dashboard")


# --- helpers ---------------------------------------------------------------------------------


def _dashboard(request: web.Request) -> Dashboard:
    return request.app[DASHBOARD_KEY]


def _name(request: web.Request) -> tuple[str, str]:
    """The job a path names (its reference, as ``get`` takes it) and its namespace."""
    return request.match_info["name"], request.match_info["namespace"]


def _bare(reference: str) -> str:
    """The job's own name in a reference (``tfjob/seed`` -> ``seed``), what its replicas'
    names begin with."""
    return reference.rpartition("/")[2]


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8", status=status)


def _not_found(request: web.Request, message: str) -> web.Response:
    csrf = _dashboard(request).guard.csrf_token
    body = f'<h1>Not found</h1><p>{esc(message)}</p><p><a href="/">All jobs</a></p>'
    return _html(pages.layout("Not found", body, csrf=csrf, page="missing"), status=404)


async def _event_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    return response


async def _send(response: web.StreamResponse, event: str, data: str) -> None:
    # json.dumps never writes a raw newline, so one `data:` line carries the whole event.
    await response.write(f"event: {event}\ndata: {data}\n\n".encode())


# --- pages ----------------------------------------------------------------------------------


async def jobs_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    views = await dashboard.call(dashboard.client.list)
    chosen = {key: request.query.get(key, "") for key in ("kind", "state", "namespace")}
    shown = [
        v
        for v in views
        if (not chosen["kind"] or v.kind == chosen["kind"])
        and (not chosen["state"] or state_of(v) == chosen["state"])
        and (not chosen["namespace"] or v.namespace == chosen["namespace"])
    ]
    # Without a script the filters still work (the form reloads with them); with one, every
    # row is sent and hidden or shown as the filters change, as live updates arrive.
    csrf = dashboard.guard.csrf_token
    deleted = await history.history_html(dashboard, chosen)
    return _html(pages.jobs_page(views, shown=shown, csrf=csrf, chosen=chosen, history=deleted))


async def job_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    name, namespace = _name(request)
    try:
        detail = await dashboard.call(dashboard.detail, name, namespace, manifest=True)
    except JobNotFound:
        if record := await history.latest_record(dashboard, namespace, name):  # deleted
            return _html(history.record_html(dashboard, record))
        return _not_found(request, f"no job {name} in namespace {namespace}")
    return _html(pages.job_page(detail, csrf=dashboard.guard.csrf_token))


async def logs_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    name, namespace = _name(request)
    try:
        view = await dashboard.call(dashboard.client.get, name, namespace)
    except JobNotFound:
        return _not_found(request, f"no job {name} in namespace {namespace}")
    replica = request.query.get("replica", "")
    return _html(pages.logs_page(view, replica=replica, csrf=dashboard.guard.csrf_token))


async def submit_page(request: web.Request) -> web.Response:
    return _html(pages.submit_page(csrf=_dashboard(request).guard.csrf_token))


# --- data and streams -------------------------------------------------------------------------


def _row_json(view: JobView) -> dict[str, Any]:
    row = job_row(view)
    return {
        "namespace": row.namespace,
        "name": row.name,
        "kind": row.kind,
        "state": row.state,
        "created": iso(row.created),
        "started": iso(row.started),
        "ended": iso(row.ended),
        "replicas": row.replicas,
        "restarts": row.restarts,
        "link": None if row.link is None else {"label": row.link.label, "url": row.link.url},
    }


async def jobs_json(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    views = await dashboard.call(dashboard.client.list)
    return web.json_response({"jobs": [_row_json(v) for v in views]})


async def jobs_stream(request: web.Request) -> web.StreamResponse:
    response = await _event_stream(request)
    dashboard = _dashboard(request)
    with dashboard.streaming(), contextlib.suppress(ConnectionError):
        async with dashboard.feed.subscribe() as subscriber:
            while True:
                try:
                    await asyncio.wait_for(subscriber.ready.wait(), HEARTBEAT_SECONDS)
                except TimeoutError:
                    await response.write(b": ping\n\n")
                    continue
                await _send(response, "jobs", subscriber.take())
    return response


async def job_stream(request: web.Request) -> web.StreamResponse:
    dashboard = _dashboard(request)
    name, namespace = _name(request)
    response = await _event_stream(request)
    last = ""
    quiet = 0.0
    with dashboard.streaming(), contextlib.suppress(ConnectionError):
        while True:
            try:
                detail = await dashboard.call(dashboard.detail, name, namespace, manifest=False)
            except JobNotFound:
                await _send(response, "gone", json.dumps({"name": name}))
                break
            payload = json.dumps(
                {
                    "state": state_of(detail.view),
                    "finished": detail.view.finished,
                    "sections": pages.live_sections(detail),
                }
            )
            if payload != last:
                last = payload
                quiet = 0.0
                await _send(response, "job", payload)
            elif quiet >= HEARTBEAT_SECONDS:
                quiet = 0.0
                await response.write(b": ping\n\n")
            await asyncio.sleep(dashboard.poll_seconds)
            quiet += dashboard.poll_seconds
    return response


async def logs_stream(request: web.Request) -> web.StreamResponse:
    dashboard = _dashboard(request)
    name, namespace = _name(request)
    replica = request.query.get("replica") or None
    try:
        lines = await dashboard.call(
            dashboard.client.logs,
            name,
            namespace,
            replica=replica,
            follow=True,
            tail=pages.LOG_TAIL,
        )
    except JobNotFound:
        raise web.HTTPNotFound(text=f"no job {name} in namespace {namespace}\n") from None
    except SubstrateError as exc:
        raise web.HTTPBadRequest(text=f"{exc}\n") from None
    follower = LogFollower(lines, asyncio.get_running_loop())
    response = await _event_stream(request)
    follower.thread.start()

    async def ping() -> None:
        await response.write(b": ping\n\n")

    try:
        with dashboard.streaming(), contextlib.suppress(ConnectionError):
            send = functools.partial(_send, response)
            await push_lines(send, ping, follower, _bare(name), heartbeat=HEARTBEAT_SECONDS)
    finally:
        follower.stopped.set()
    return response


async def logs_download(request: web.Request) -> web.StreamResponse:
    dashboard = _dashboard(request)
    name, namespace = _name(request)
    replica = request.query.get("replica") or None
    try:
        lines = await dashboard.call(dashboard.client.logs, name, namespace, replica=replica)
    except JobNotFound:
        raise web.HTTPNotFound(text=f"no job {name} in namespace {namespace}\n") from None
    except SubstrateError as exc:
        raise web.HTTPBadRequest(text=f"{exc}\n") from None
    job_name = _bare(name)
    filename = f"{job_name}-{replica}.log" if replica else f"{job_name}.log"
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/plain; charset=utf-8",
            "Content-Disposition": f'attachment; filename="{filename}"',
        }
    )
    await response.prepare(request)
    # Read in batches: a large log is streamed, never held whole in memory.
    while batch := await dashboard.call(lambda: list(itertools.islice(lines, 2000))):
        text = "".join(
            f"{line.text}\n"
            if replica
            else f"{short_replica_name(job_name, line.replica)} | {line.text}\n"
            for line in batch
        )
        await response.write(text.encode())
    await response.write_eof()
    return response


# --- actions --------------------------------------------------------------------------------

WHY = "kubemill dashboard"


async def job_action(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    client = dashboard.client
    name, namespace = _name(request)
    verb = request.match_info["verb"]
    calls: dict[str, Callable[[], object]] = {
        "suspend": lambda: client.suspend(name, namespace),
        "resume": lambda: client.resume(name, namespace),
        "interrupt": lambda: client.interrupt(name, namespace, why=WHY),
        "delete": lambda: client.delete(name, namespace),
    }
    call = calls.get(verb)
    if call is None:
        raise web.HTTPNotFound(text=f"no action {verb!r}; one of {', '.join(calls)}\n")
    try:
        await dashboard.call(call)
    except JobNotFound:
        return web.json_response(
            {"ok": False, "message": f"no job {name} in namespace {namespace}"}, status=404
        )
    except SubstrateError as exc:
        return web.json_response({"ok": False, "message": str(exc)}, status=409)
    done = {"suspend": "suspended", "resume": "resumed", "interrupt": "interrupted"}
    message = f"{name} {done.get(verb, 'deleted')}"
    return web.json_response({"ok": True, "message": message, "deleted": verb == "delete"})


async def submit(request: web.Request) -> web.Response:
    """Validate a pasted manifest and, unless only validating, submit it.

    The text is only ever parsed as YAML (never taken for a file's path), with the loader
    the CLI uses; its field-path errors come back and nothing is created.
    """
    dashboard = _dashboard(request)
    try:
        body = await request.json()
    except json.JSONDecodeError:
        raise web.HTTPBadRequest(text='send JSON: {"manifest": "..."}\n') from None
    text = body.get("manifest") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        return web.json_response(
            {"ok": False, "html": '<p class="problems" role="alert">Paste a manifest first.</p>'},
            status=422,
        )
    try:
        job = load_one(text, name="manifest")
    except ManifestError as exc:
        return web.json_response(
            {
                "ok": False,
                "errors": manifest_problems(exc),
                "html": pages.problems_html(exc.errors),
            },
            status=422,
        )
    if body.get("validateOnly"):
        message = f"Valid: {job.KIND} {job.name}. Nothing was created."
        return web.json_response({"ok": True, "created": False, "html": f"<p>{esc(message)}</p>"})
    try:
        view = await dashboard.call(dashboard.client.submit, job)
    except ManifestError as exc:
        return web.json_response(
            {
                "ok": False,
                "errors": manifest_problems(exc),
                "html": pages.problems_html(exc.errors),
            },
            status=422,
        )
    except JobExists as exc:
        return web.json_response({"ok": False, "html": _alert(exc)}, status=409)
    except SubstrateError as exc:
        return web.json_response({"ok": False, "html": _alert(exc)}, status=422)
    url = job_path(view.namespace, job_reference(view))
    return web.json_response(
        {
            "ok": True,
            "created": True,
            "url": url,
            "html": f'<p>Submitted <a href="{esc(url)}">{esc(view.kind)} {esc(view.name)}</a>.</p>',
        }
    )


def _alert(exc: Exception) -> str:
    return f'<p class="problems" role="alert">{esc(exc)}</p>'


# --- the application -----------------------------------------------------------------------


def build_app(
    client: JobClient, *, guard: Guard | None = None, poll_seconds: float = POLL_SECONDS
) -> web.Application:
    """The dashboard as an aiohttp application (served by :func:`kubemill.dashboard.serve`,
    or by aiohttp's test server)."""
    guard = guard or Guard()
    dashboard = Dashboard(client, guard, poll_seconds=poll_seconds)
    app = web.Application(middlewares=[guard.middleware], client_max_size=2 * 1024 * 1024)
    app[DASHBOARD_KEY] = dashboard
    job = "/jobs/{namespace}/{name}"
    app.router.add_get("/", jobs_page)
    app.router.add_get("/submit", submit_page)
    app.router.add_get(job, job_page)
    history.add_routes(app, dashboard)
    app.router.add_get(job + "/logs", logs_page)
    app.router.add_get(job + "/logs.txt", logs_download)
    app.router.add_get("/api/jobs", jobs_json)
    app.router.add_get("/api/stream/jobs", jobs_stream)
    app.router.add_get("/api" + job + "/stream", job_stream)
    app.router.add_get("/api" + job + "/logs/stream", logs_stream)
    app.router.add_post("/api" + job + "/{verb}", job_action)
    app.router.add_post("/api/submit", submit)
    app.router.add_static("/static", STATIC_DIR, follow_symlinks=False)
    app.on_shutdown.append(dashboard.shutdown)
    app.on_cleanup.append(dashboard.close)
    return app


__all__ = ["DASHBOARD_KEY", "POLL_SECONDS", "Dashboard", "build_app"]
