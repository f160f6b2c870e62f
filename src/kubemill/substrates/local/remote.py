"""The local supervisor's reader of a Plan's remote run (a Ray job on the job's Ray head):
the substrate-neutral :class:`~kubemill.substrates.remote.RemoteWatch`, asked at the address
every replica has here, the loopback one.

The supervisor asks once a turn (:meth:`LocalRemote.read`); the watch asks the service only
when due (every ``interval``) and while its ``after`` replica is Running and ready. Every
URL is built from :data:`~kubemill.substrates.local.network.LOCAL_HOST` and the Plan's port,
so nothing here sends traffic off the machine.
"""

from __future__ import annotations

import time

from kubemill.core import ObservedPod
from kubemill.frameworks import Plan, RemoteReport
from kubemill.substrates.local.network import LOCAL_HOST
from kubemill.substrates.remote import RemoteWatch


def remote_watch(plan: Plan, interval: float) -> LocalRemote | None:
    """The reader of ``plan``'s remote run (None: it has none)."""
    if plan.remote is None:
        return None
    return LocalRemote(RemoteWatch(plan.remote, interval=interval))


class LocalRemote:
    """One Plan's remote run, asked after on loopback."""

    def __init__(self, watch: RemoteWatch) -> None:
        self.watch = watch

    def read(self, pods: tuple[ObservedPod, ...]) -> RemoteReport | None:
        """The latest report, asked for now if due and the service is up (its ``after``
        replica Running and ready among ``pods``)."""
        after = self.watch.remote.after
        up = any(p.name == after and p.phase == "Running" and p.ready for p in pods)
        if up and self.watch.due(time.monotonic()):
            return self.watch.ask_status(LOCAL_HOST)
        return self.watch.report

    def submit(self) -> str | None:
        """POST the run to the service; why it failed (None: it was taken)."""
        return self.watch.submit(LOCAL_HOST)
