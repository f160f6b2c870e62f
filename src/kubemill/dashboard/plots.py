"""The job page's Resources panel: each replica's CPU and memory over time as inline SVG,
drawn on the server (the panel is pushed live like the others), and its latest values in
words."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from kubemill.dashboard.markup import esc, time_tag
from kubemill.dashboard.views import iso
from kubemill.sdk.summary import short_replica_name
from kubemill.substrates.base import ResourceReport, ResourceSample

PLOT_WIDTH, PLOT_HEIGHT = 320, 120
SERIES_COLOURS = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2")
"""One colour per replica in a resources plot, in turn (the legend names each)."""
MiB = 1 << 20


def resources_html(job_name: str, report: ResourceReport | None) -> str:
    """Each replica's CPU and memory over time: its latest values in words, and one inline
    SVG plot of each (a line per replica), drawn here so they need no script."""
    if report is None:
        return '<p class="note">Not known.</p>'
    note = f'<p class="note">{esc(report.note)}</p>' if report.note else ""
    series = {
        short_replica_name(job_name, name): samples
        for name, samples in sorted(report.replicas.items())
        if samples
    }
    if not series:
        return note or '<p class="note">No samples yet: replicas are sampled while they run.</p>'
    facts = "".join(
        f"<dt>{esc(name)}</dt><dd>{samples[-1].cpu_cores:.2f} cores,"
        f" {samples[-1].memory_bytes / MiB:.1f} MiB"
        f' <span class="note">at {time_tag(iso_seconds(samples[-1].time))}</span></dd>'
        for name, samples in series.items()
    )
    plots = _resource_plot(series, "CPU", "cores", lambda s: s.cpu_cores) + _resource_plot(
        series, "Memory", "MiB", lambda s: s.memory_bytes / MiB
    )
    return f'{note}<dl class="facts">{facts}</dl><div class="plots resources">{plots}</div>'


def iso_seconds(moment: float) -> str:
    """``moment`` (seconds since the epoch) as an RFC 3339 time in UTC."""
    return iso(datetime.fromtimestamp(moment, UTC))


def _resource_plot(
    series: dict[str, list[ResourceSample]],
    title: str,
    unit: str,
    value: Callable[[ResourceSample], float],
) -> str:
    """One SVG plot over time, a line per replica, scaled from 0 to the highest value."""
    first = min(samples[0].time for samples in series.values())
    last = max(samples[-1].time for samples in series.values())
    span = max(last - first, 1e-9)
    top = max(value(s) for samples in series.values() for s in samples) or 1.0
    pad = 6
    lines = []
    legend = []
    for index, (name, samples) in enumerate(series.items()):
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        points = " ".join(
            f"{pad + (s.time - first) / span * (PLOT_WIDTH - 2 * pad):.1f},"
            f"{PLOT_HEIGHT - pad - value(s) / top * (PLOT_HEIGHT - 2 * pad):.1f}"
            for s in samples
        )
        x, y = points.rsplit(" ", 1)[-1].split(",")
        lines.append(
            f'<polyline class="plot-line" style="stroke:{colour}" points="{points}"'
            f' data-replica="{esc(name)}"/>'
            # The latest sample as a dot: a line of one sample would not show.
            f'<circle class="plot-dot" style="fill:{colour}" cx="{x}" cy="{y}" r="3"/>'
        )
        legend.append(f'<span class="legend" style="color:{colour}">&#9632;</span> {esc(name)}')
    label = f"{title} of each replica over {span:.0f} s, in {unit}; highest {top:.2f} {unit}"
    return (
        f'<figure class="plot plot-{title.lower()}">'
        f'<svg viewBox="0 0 {PLOT_WIDTH} {PLOT_HEIGHT}" role="img" aria-label="{esc(label)}">'
        f"<title>{esc(label)}</title>"
        f'<rect class="plot-frame" x="0.5" y="0.5" width="{PLOT_WIDTH - 1}"'
        f' height="{PLOT_HEIGHT - 1}"/>{"".join(lines)}</svg>'
        f"<figcaption>{esc(title)} ({esc(unit)}, up to {top:.2f}): {' '.join(legend)}"
        "</figcaption></figure>"
    )
