"""The processes of a job beyond its replicas' main ones, as its supervisor finds them
(:class:`JobProcesses`): a replica's process tree and its orphans (re-parented to the
supervisor, a child subreaper, and carrying the replica's mark), the memory watch over each
replica's processes together, and the sweep of whatever is left once the replicas are gone.
:mod:`.procinfo` gives the facts from ``/proc`` they are found by.

No process outlives its job, even a daemonised one. The supervisor makes the process it
runs in a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a replica's orphans (a
``setsid`` child, a double fork) re-parent to it instead of to init. Every replica also
carries ``KUBEMILL_REPLICA_ID=<job uid>/<replica>`` in its environment. A process is the
job's if it descends from a replica, or descends from the supervisor's process and
carries the job's mark; a detached supervisor (``exclusive``: its process runs nothing
else) takes every process below it as the job's. Those processes get the pod's signals
(SIGTERM on delete, SIGKILL after the grace period), are SIGKILLed when their replica's
main process exits (as a container's processes die with it), and whatever is left when
the job ends (success, failure, interrupt, delete, or a failure of the supervisor) gets
SIGTERM, then SIGKILL after :data:`SWEEP_GRACE`. No cgroup is created or moved.

The subreaper setting is per process and lasts as long as the process. For a detached
supervisor and for ``kubemill run`` in the foreground, that process is kubemill's own.
An SDK program that runs a job in-process (``detach=False``) becomes a subreaper too:
orphans of its *own* other children then re-parent to it (and stay zombies until it
waits for them); kubemill only reaps the processes it identified as its jobs', and an
orphan whose environment was cleared of the mark is not recognised there, so such a
program should prefer ``detach=True`` for jobs that daemonise.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping

from kubemill.substrates.local import procinfo
from kubemill.substrates.local.kubelet import ReplicaPod
from kubemill.substrates.local.store import Store

# The supervisor's log: these are its findings.
log = logging.getLogger("kubemill.local.supervisor")

SWEEP_GRACE = 1.0
"""SIGTERM-to-SIGKILL grace of the processes still found once every replica is gone
(they already had SIGTERM with their replica when it was deleted)."""
TREE_REUSE = 0.02
"""Seconds a scan of ``/proc`` is reused for finding a replica's processes."""

REAP_INTERVAL = 5.0
"""Seconds between looks for dead orphans to reap (:meth:`JobProcesses.reap_orphans`)."""


class JobProcesses:
    """The processes of one job outside its replicas' main processes."""

    def __init__(
        self,
        uid: str,
        *,
        exclusive: bool,
        pods: Callable[[], Mapping[str, ReplicaPod]],
        store: Store,
        memory_interval: float,
    ) -> None:
        self.uid = uid
        self.exclusive = exclusive
        """The supervisor's process runs nothing but this job: every process below it is
        the job's."""
        self._pods = pods
        self.store = store
        self.memory_interval = memory_interval
        self._strays: dict[int, tuple[int, str]] = {}
        """Processes found to be the job's outside any replica's tree: pid -> start ticks
        and the mark seen ("" if none), to know them once they die (a zombie's environment
        can no longer be read) and to reap them."""
        self._tree: procinfo.ProcessTree | None = None
        self._tree_at = 0.0
        self._next_memory_check = 0.0
        self._next_reap = 0.0

    def of_pod(self, pod: ReplicaPod) -> set[int]:
        """The pod's processes beyond its main one: its tree and its marked orphans."""
        return self._find(f"{self.uid}/{pod.spec.replica}", pod)

    def of_job(self) -> set[int]:
        """Every process of the job that is not a replica's main process."""
        return self._find(f"{self.uid}/", None)

    def _find(self, mark: str, only: ReplicaPod | None) -> set[int]:
        tree = self._process_tree()
        mains = {p.popen.pid for p in self._pods().values() if p.popen is not None}
        found: set[int] = set()
        for pod in [only] if only is not None else list(self._pods().values()):
            if pod.popen is not None:
                found |= tree.below(pod.popen.pid, zombies=True)
        # Orphans re-parent to the nearest subreaper, this process: only its direct
        # children need a look at their mark, and what is below a stray is the job's too.
        for pid in tree.children.get(os.getpid(), []):
            if pid in mains or pid in found:
                continue
            seen = self._stray_mark(pid, tree.table[pid], whole_job=only is None)
            if seen is not None and (seen.startswith(mark) if only is None else seen == mark):
                orphans = {pid} | tree.below(pid, zombies=True)
                found |= orphans
                for orphan in orphans:
                    self._strays[orphan] = (tree.table[orphan].start_ticks, seen)
        return found

    def _process_tree(self) -> procinfo.ProcessTree:
        """A scan of ``/proc``, shared by the calls of one moment (stopping 500 replicas
        would otherwise scan it 500 times); the final sweep scans again anyway."""
        if self._tree is None or time.monotonic() - self._tree_at > TREE_REUSE:
            # Timed from the scan's end: on a loaded machine one scan may take longer than
            # TREE_REUSE, and the calls of one moment would each scan again.
            self._tree = procinfo.ProcessTree()
            self._tree_at = time.monotonic()
        return self._tree

    def _stray_mark(self, pid: int, info: procinfo.ProcStat, *, whole_job: bool) -> str | None:
        """The mark a child of this process carries, as far as the job is concerned:
        remembered if seen before, ``f"{uid}/"`` for anything below an exclusive
        supervisor when the whole job is asked for, ``None`` if it is not the job's."""
        known = self._strays.get(pid)
        if known is not None and known[0] == info.start_ticks:
            return known[1] or f"{self.uid}/"
        seen = procinfo.mark_of(pid)
        if seen is None and whole_job and self.exclusive:
            return f"{self.uid}/"
        return seen

    def sweep(self) -> None:
        """End whatever of the job is still there once its replicas are gone."""
        if not self._pods() and not procinfo.has_children():
            # What is searched for is below a replica or a child of this subreaper (see
            # _find): with neither, nothing of the job is left, and /proc needs no scan
            # (one per process on the machine, on the way to every job's end).
            self._strays.clear()
            return
        self._tree = None
        left = procinfo.stop_processes(self.of_job, grace=SWEEP_GRACE)
        if left:
            log.warning("job %s: processes %s survive SIGKILL", self.uid, sorted(left))
        self._strays = {p: k for p, k in self._strays.items() if procinfo.stat(p) is not None}

    def reap_orphans(self, now: float) -> None:
        """Collect the exits of the job's orphans that died here, every ``REAP_INTERVAL``.

        A replica's children outlive it (a Ray node's raylet and workers after its
        ``ray start`` is killed and restarted), re-parent to this subreaper and stay zombies
        until it waits for them. Only zombies that do not lead their own process group are
        waited for: everything this process starts itself (replicas, probes, exec sessions)
        leads one (``start_new_session``) and is waited for by its ``Popen``, whose exit code
        a reap here would take.
        """
        if now < self._next_reap:
            return
        self._next_reap = now + REAP_INTERVAL
        self._tree = None
        tree = self._process_tree()
        own_group = os.getpgrp()
        procinfo.reap(
            {
                pid
                for pid in tree.children.get(os.getpid(), [])
                if (info := tree.table[pid]).state == "Z" and info.pgid not in (pid, own_group)
            }
        )

    def watch_memory(self, now: float) -> None:
        """OOMKill a replica whose processes together use more memory than its limit.

        Its processes: the main one, everything below it, and its orphans (below the
        supervisor, with the replica's mark), read from ``/proc``.

        The kubelet's limit is the kernel's, in a cgroup; locally it is a watch every
        ``memory_interval``, so a replica may briefly go past its limit before it is
        killed. The kill is reported as the kubelet would report it (reason ``OOMKilled``,
        exit code 137) and the core judges it like any other exit.
        """
        watched = [
            p
            for p in self._pods().values()
            if p.spec.memory_limit is not None and p.alive and not p.oom_killed
        ]
        if not watched or now < self._next_memory_check:
            return
        self._next_memory_check = now + self.memory_interval
        self._tree = None
        for pod in watched:
            assert pod.popen is not None and pod.spec.memory_limit is not None
            tree = {pod.popen.pid} | self.of_pod(pod)
            used = procinfo.memory_bytes(tree)
            if used > pod.spec.memory_limit:
                message = (
                    f"{pod.spec.replica} used {used // 2**20}Mi of memory (its processes"
                    f" together, shared pages once), over its limit of"
                    f" {pod.spec.memory_limit // 2**20}Mi"
                    " (resources.limits.memory)"
                )
                pod.oom_kill(message)
                self.store.add_event(
                    self.uid, type="Warning", reason="OOMKilling", message=message, when=now
                )
