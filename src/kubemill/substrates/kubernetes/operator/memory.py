"""What the reconciler remembers of a job between passes (:class:`JobMemory`): its
expectations, refusals, and counts a failed write carried. Lost on restart, by design: all
of it can be recovered from the cluster.

The caches lag behind the operator's own writes (the watch event of a pod it just created
arrives later), so the reconciler keeps *expectations*, as Kubernetes' own controllers do:
after creating or deleting children it waits until the caches show that, or until
:data:`~.reconciler.EXPECTATION_TIMEOUT` passes, before it judges the job again; and it
reads its own status writes back from the patch answer until the job's watch event catches
up. Without them a fast second pass would create a pod twice (409) and post its event
twice, or decide on a status it has already replaced.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubemill.core import ChildKind
from kubemill.substrates.kubernetes.controlled import ControllerSnapshot
from kubemill.substrates.kubernetes.observe import ChildSnapshot, PodSnapshot


@dataclass
class JobMemory:
    """What the reconciler remembers of one job between passes (lost on restart, by design:
    everything here can be recovered from the cluster)."""

    stale_rvs: frozenset[str] = frozenset()
    """The job's resourceVersions before our last status write (two when the restart
    annotation was written first); the cache still showing one means it has not seen that
    write yet."""
    written: dict[str, Any] | None = None
    """The job as our last status patch returned it."""
    creating: dict[tuple[str, str], float] = field(default_factory=dict)
    """(kind, name) -> monotonic deadline: created, not yet in the cache."""
    updating: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    """(kind, name) -> (digest, deadline): files rewritten, the cache not showing them yet."""
    deleting: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    """(kind, name) -> (uid, deadline): deleted, still in the cache."""
    invalid_rv: str | None = None
    """The resourceVersion whose validation errors were already reported."""
    deleted_uid: str | None = None
    """The uid of the job once we deleted it (TTL): until the watch says it is gone the
    cache still shows it, and judging it again would delete it twice."""
    unwritten_counts: dict[str, dict[str, int]] | None = None
    """Restart counts a failed status write carried (a pod deleted in that pass is never
    counted again): read back into the job until a write records them."""
    refused: dict[tuple[str, str], str] = field(default_factory=dict)
    """(kind, name) -> the API's message: creations it refused for good (4xx), reported to
    the core (``Observed.refused``) until the core asks for that child again."""

    def pending(
        self,
        *,
        pods: list[PodSnapshot],
        services: list[ChildSnapshot],
        groups: list[ChildSnapshot],
        owned: Mapping[ChildKind, list[ChildSnapshot]],
        controllers: list[ControllerSnapshot] | None = None,
    ) -> float | None:
        """Seconds to wait for the caches to show our own writes, or None if they do (the
        expectations they meet, or that time out, are dropped)."""
        now = time.monotonic()
        present = (
            {("pod", p.name): p.uid for p in pods}
            | {("service", s.name): s.uid for s in services}
            | {("podgroup", g.name): g.uid for g in groups}
            | {(kind, c.name): c.uid for kind, cs in owned.items() for c in cs}
            | {("controller", c.name): c.uid for c in controllers or ()}
        )
        digests: dict[tuple[str, str], str] = {
            (kind, c.name): c.digest for kind, cs in owned.items() for c in cs
        }
        for child, deadline in list(self.creating.items()):
            if child in present or deadline <= now:
                del self.creating[child]
        for child, (uid, deadline) in list(self.deleting.items()):
            if present.get(child) != uid or deadline <= now:
                del self.deleting[child]
        for child, (digest, deadline) in list(self.updating.items()):
            if digests.get(child) == digest or deadline <= now:
                del self.updating[child]
        deadlines = [
            *self.creating.values(),
            *(d for _, d in self.deleting.values()),
            *(d for _, d in self.updating.values()),
        ]
        return (min(deadlines) - now) if deadlines else None
