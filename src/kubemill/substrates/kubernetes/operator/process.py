"""The operator process's settings of Python's garbage collector, made once at start
(:func:`settle`): what a long-lived process that handles bursts of watch events should not
pay for.

Everything the imports built (kopf, the kubernetes client, the engines, ~100k objects) lives
as long as the process, so it is frozen out of the collector's sight and a full collection
scans only what the operator's work allocates. And the youngest generation is collected
every 10,000 allocations rather than 700: a watch event is parsed into hundreds of dicts and
lists that reference counting frees (JSON has no cycles), and a collection every 700
allocations walked them while they were still in use (500 jobs x 4: ~700 collections, ~1 s
of CPU; with this 30, ~0.3 s, as ``bench/operator_profile.py cpu`` times them).
"""

from __future__ import annotations

import gc

GC_YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


def settle() -> None:
    """Freeze what exists now out of the collector's sight, and collect the youngest
    generation less often. Called once, after the imports."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
