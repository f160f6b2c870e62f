"""The dashboard's smallest pieces of HTML, shared by the pages and the plots: escaping
(every value that came from a job goes through :func:`esc`), a job's path, a state badge,
a time and a duration."""

from __future__ import annotations

import html
from urllib.parse import quote


def esc(value: object) -> str:
    """Text made safe for HTML content and attribute values."""
    return html.escape(str(value), quote=True)


def job_path(namespace: str, name: str, suffix: str = "") -> str:
    return f"/jobs/{quote(namespace, safe='')}/{quote(name, safe='')}{suffix}"


def state_badge(state: str) -> str:
    return f'<span class="state state-{esc(state.lower())}">{esc(state)}</span>'


def time_tag(moment_iso: str, *, age: bool = False) -> str:
    """A ``<time>``; with ``age`` the script keeps its text as "how long ago" (``42s``)."""
    if not moment_iso:
        return '<span class="none">-</span>'
    marker = " data-age" if age else ""
    when = esc(moment_iso)
    return f'<time datetime="{when}"{marker} title="{when}">{when}</time>'


def duration_tag(started: str, ended: str) -> str:
    """How long the job ran (until now while it runs); the script computes the words."""
    if not started:
        return '<span class="none">-</span>'
    return f'<span data-duration data-start="{esc(started)}" data-end="{esc(ended)}">-</span>'
