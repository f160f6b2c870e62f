"""How often a supervisor looks at things (:class:`SupervisorOptions`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubemill.substrates.local.start_rate import StartLimits

if TYPE_CHECKING:
    from kubemill.core import ReconcileOptions


@dataclass(frozen=True)
class SupervisorOptions:
    """How often the supervisor looks at things."""

    poll_interval: float = 0.1
    """Longest sleep between checks; a replica's exit wakes the loop at once anyway."""
    request_interval: float = 0.2
    """How often SQLite is asked whether the job's manifest changed (a stop request,
    suspend, resume) or someone wants it deleted."""
    resync_interval: float = 1.0
    """Reconcile at least this often even when nothing was observed to change."""
    memory_interval: float = 0.2
    """How often the memory of replicas with a memory limit is measured."""
    progress_interval: float = 0.2
    """How often the replicas' progress files are looked at (and whenever a replica's
    state changes, so that a program's last report is read before its exit is judged)."""
    remote_interval: float = 0.5
    """How often a Plan's remote run is asked after through its service's API
    (:mod:`kubemill.substrates.local.remote`), while that service is up."""
    start_limits: StartLimits | None = None
    """How fast replica processes start; ``None``: the config file's ``replicaStarts``."""
    reconcile: ReconcileOptions | None = None
    """How the core is called; ``None``: its defaults (:attr:`reconcile_options`). Not
    the defaults' object itself: any module of the core loads the whole reconciler, which
    a backend that only submits (``kubemill run --detach``) never runs."""

    @property
    def reconcile_options(self) -> ReconcileOptions:
        """The options the core is called with: :attr:`reconcile`, or its defaults."""
        from kubemill.core import ReconcileOptions

        return self.reconcile or ReconcileOptions()
