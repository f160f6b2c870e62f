"""The operator process's settings, made once at start: no ``kubernetes`` package
(:func:`without_kubernetes_client`, before kopf is imported) and Python's garbage collector
(:func:`settle`, after the imports): what a long-lived process that handles bursts of watch
events should not pay for.

Everything the imports built (kopf, the engines, ~100k objects) lives
as long as the process, so it is frozen out of the collector's sight and a full collection
scans only what the operator's work allocates. And the youngest generation is collected
every 10,000 allocations rather than 700: a watch event is parsed into hundreds of dicts and
lists that reference counting frees (JSON has no cycles), and a collection every 700
allocations walked them while they were still in use (500 jobs x 4: ~700 collections, ~1 s
of CPU; with this 30, ~0.3 s, as ``bench/operator_profile.py cpu`` times them).
"""

from __future__ import annotations

import gc
import sys

GC_YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


def settle() -> None:
    """Freeze what exists now out of the collector's sight, and collect the youngest
    generation less often. Called once, after the imports."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def without_kubernetes_client() -> None:
    """Mark the ``kubernetes`` package absent from this process, unless it is imported
    already: kopf imports its models when it is installed, only to recognise them in
    ``kopf.adopt`` and the like (the operator gives kopf dicts), and they cost the process
    ~20 MiB. The operator sends its requests through kubemill's own HTTP client
    (:mod:`.kubeapi`). A ``None`` in ``sys.modules`` makes an import raise ``ImportError``,
    which kopf takes as "not installed"."""
    sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]
