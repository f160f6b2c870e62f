"""The operator process's own settings of the interpreter and the C allocator, made once at
start (:func:`settle`): what a long-lived process that handles bursts of watch events on a
thread pool should not pay for.

- The collector: everything the imports built (kopf, the kubernetes client, the engines,
  ~100k objects) lives as long as the process, so it is frozen out of the collector's sight
  and a full collection scans only what the operator's work allocates. And the youngest
  generation is collected every 10,000 allocations rather than 700: a watch event is
  parsed into hundreds of dicts and lists that reference counting frees (JSON has no
  cycles), and a collection every 700 allocations walked them while they were still in use
  (500 jobs x 4: ~700 collections, ~1 s of CPU; with this 30, ~0.3 s, as
  ``bench/operator_profile.py cpu`` times them).
- glibc's malloc arenas: glibc gives each thread that allocates at the same time as another
  an arena of its own (up to 8 per core), and freed memory stays in the arena it came from.
  The API client's threads (``api_concurrency``) each touch only small, short-lived buffers;
  two arenas serve them, and the memory a burst freed is reused rather than spread over many
  arenas. ``MALLOC_ARENA_MAX`` in the environment, when set, is left as it is.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os

logger = logging.getLogger("kubemill.operator")

GC_YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""
MALLOC_ARENAS = 2
"""glibc malloc arenas of the operator process (glibc's own default: 8 per core)."""
_M_ARENA_MAX = -8
"""``mallopt`` parameter number of the arena limit (glibc's ``malloc.h``)."""


def settle() -> None:
    """Freeze what exists now out of the collector's sight, collect the youngest generation
    less often, and cap glibc's malloc arenas.

    Called once, after the imports and before the first thread starts (arenas are made as
    threads first allocate)."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    if "MALLOC_ARENA_MAX" not in os.environ:
        limit_malloc_arenas(MALLOC_ARENAS)


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas at ``arenas``; False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(None)  # the symbols the interpreter is linked with: its C library
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False  # not glibc (musl has no arenas to cap)
    mallopt = libc.mallopt
    done = bool(mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas)))
    if not done:
        logger.debug("mallopt(M_ARENA_MAX, %d) was refused", arenas)
    return done
