"""Helpers shared by the TensorFlow examples: logging with the replica's role, and waiting
for peers to finish.

A TensorFlow server (``tf.distribute.Server``) has no notion of "the job is over":
``server.join()`` blocks forever. Operators cope by deleting the servers once the deciding
replica has finished (``cleanPodPolicy``); the examples also end on their own, so a job
finishes cleanly even where nothing deletes them. A server replica watches the peers whose
end means the end of the job (the chief, or every worker) and returns once they have been
up and are then gone. Watching is a plain TCP connect to the peer's address: it works the
same with 127.0.0.1 ports locally and with pod DNS names on a cluster.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Sequence


def log(role: str, message: str) -> None:
    print(f"[{role}] {message}", flush=True)


def reachable(address: str, *, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):  # refused, unreachable, or the name no longer resolves
        return False


def wait_until_gone(
    role: str,
    peers: Sequence[str],
    *,
    wait_for_start: float = 600.0,
    interval: float = 0.5,
    misses_to_confirm: int = 3,
) -> None:
    """Block until every peer in ``peers`` has stopped listening.

    Peers that have not started yet do not count as gone: this returns only once at least
    one peer has been seen up and then all of them refuse connections ``misses_to_confirm``
    probes in a row. Exits with status 1 if no peer shows up within ``wait_for_start``
    seconds, so a replica never outlives a job that never started.
    """
    log(
        role,
        f"serving; will stop once {', '.join(peers)} {'is' if len(peers) == 1 else 'are'} done",
    )
    deadline = time.monotonic() + wait_for_start
    seen = False
    misses = 0
    while True:
        up = [p for p in peers if reachable(p)]
        if up:
            seen, misses = True, 0
        elif seen:
            misses += 1
            if misses >= misses_to_confirm:
                log(role, "peers are done; stopping the server")
                return
        elif time.monotonic() > deadline:
            log(role, f"error: no peer came up within {wait_for_start:.0f}s")
            sys.exit(1)
        time.sleep(interval)
