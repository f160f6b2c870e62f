"""The job page's Children panel: the pods a job's program created itself (a Spark
application's executors), as its engine's record names them, or, where the substrate has
no pods of them, what they are there."""

from __future__ import annotations

from kubemill.dashboard.markup import esc, state_badge, time_tag
from kubemill.dashboard.views import iso
from kubemill.substrates.base import Children

COLUMNS = ("Pod", "Phase", "Restarts", "Exit code", "Reason", "Started", "Finished", "Address")


def children_html(children: Children) -> str:
    """A table of the child pods (or a note, or that there are none yet)."""
    title = esc(children.title)
    note = f'<p class="note">{esc(children.note)}</p>' if children.note else ""
    if not children.pods:
        return note or f'<p class="none">No {title.lower()} (yet).</p>'
    head = "".join(f'<th scope="col">{name}</th>' for name in COLUMNS)
    rows = "".join(
        f'<tr data-child="{esc(pod.name)}"><th scope="row">{esc(pod.name)}</th>'
        f'<td>{state_badge(pod.phase)}</td><td class="num">{pod.restarts}</td>'
        f'<td class="num exit">{"-" if pod.exit_code is None else pod.exit_code}</td>'
        f"<td>{esc(pod.reason or '-')}</td>"
        f"<td>{time_tag(iso(pod.started))}</td><td>{time_tag(iso(pod.finished))}</td>"
        f"<td>{esc(pod.address or '-')}</td></tr>"
        for pod in children.pods
    )
    return (
        f'{note}<div class="table-wrap"><table class="children"><caption>{title}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )
