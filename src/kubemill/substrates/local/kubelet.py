"""One replica's "pod" on this machine: its process, in-place restarts and stopping.

This is the local stand-in for the kubelet. It starts the process of a
:class:`~.launch.LaunchSpec`, notices when it exits, and applies the *pod* restart
policy the way the kubelet does: ``Always`` restarts after any exit, ``OnFailure``
after a non-zero one, ``Never`` leaves the pod Succeeded or Failed. Restarts wait a
short, doubling back-off (0.1 s to 1 s; the kubelet's is 10 s to 5 min, which a job on
a laptop has no need for).

A restart is counted the moment the exit that calls for it is seen (the pod shows
``CrashLoopBackOff`` with its restart count already up), and it only happens once the
supervisor has let the core judge that exit and the core has not deleted the pod
(:meth:`ReplicaPod.allow_restart`). So ``backoffLimit: 2`` with ``OnFailure`` means three
runs, never a fourth that is started only to be stopped, and a pod deleted while it
waits keeps its last real exit code.

When the main process exits, anything it left behind is killed with SIGKILL, as
everything in a container dies with the container's main process: its process group
(before the exit is reaped, while the zombie still pins the group id, so the signal can
only reach our own processes) and the processes that left the group (``setsid``, a
double fork), which the supervisor finds for it (``strays``). Signals to the pod (SIGTERM
on delete, SIGKILL after the grace period) reach those too.

**Readiness.** A container with an exec ``readinessProbe`` is ready only while the probe
passes, as the kubelet judges it (:class:`~.prober.Prober`). A pod without one is ready
while its process runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from kubemill.core.model import ObservedPod, PodPhase
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.launch import LaunchSpec
from kubemill.substrates.local.log_reads import termination_tail
from kubemill.substrates.local.prober import Prober
from kubemill.substrates.local.records import ReplicaRecord
from kubemill.substrates.local.spawn import spawn

BACKOFF_INITIAL = 0.1
BACKOFF_MAX = 1.0
BACKOFF_RESET_AFTER = 10.0
"""A process that ran this long before exiting restarts without back-off again."""

STOPPED_WAITING = "stopped while waiting to restart"
"""Message prefix of a pod deleted between a run and its planned restart."""

EXIT_OOM_KILLED = 137
"""128 + SIGKILL: what a container ended by the OOM killer exits with."""
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
"""Exit codes a shell would report for a program it cannot run (permanent failures)."""


class CoreAllocator:
    """Which cores a replica limited to N CPUs is pinned to: the N least used by the
    replicas this process runs, so concurrent replicas spread over the machine.

    Ties go to the core after the last one handed out, so detached supervisors (each its
    own process, with its own allocator) do not all start on core 0: each begins at an
    offset taken from its job, see ``start``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._use: dict[int, int] = {}
        self._next = 0

    def take(self, count: int, *, start: int = 0) -> frozenset[int]:
        """Reserve ``count`` cores (at most the ones this process may use)."""
        allowed = sorted(os.sched_getaffinity(0))
        with self._lock:
            first = (self._next + start) % len(allowed)
            ring = allowed[first:] + allowed[:first]
            chosen = sorted(ring, key=lambda c: (self._use.get(c, 0), ring.index(c)))[:count]
            for core in chosen:
                self._use[core] = self._use.get(core, 0) + 1
            self._next += len(chosen)
            return frozenset(chosen)

    def give_back(self, cores: frozenset[int]) -> None:
        with self._lock:
            for core in cores:
                self._use[core] = max(0, self._use.get(core, 0) - 1)


CORES = CoreAllocator()
"""One per process: in-process jobs of one program share it."""


def exit_code_of(returncode: int) -> int:
    """Popen's return code as a container runtime reports it (signal N -> 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def _utc(moment: float | None) -> datetime | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC)


@dataclass
class PodState:
    """What the replica's pod looks like now (copied into SQLite when it changes)."""

    phase: PodPhase = "Pending"
    exit_code: int | None = None
    restart_count: int = 0
    created: float | None = None
    started: float | None = None
    finished: float | None = None
    reason: str = ""
    message: str = ""
    termination_message: str = ""
    """A failed run's log tail when the container asks for it (FallbackToLogsOnError): for
    the core's failure message, not shown with the replica."""
    process: procinfo.ProcessId | None = None


class ReplicaPod:
    """One incarnation of a replica's pod. A new one is made when the pod is recreated."""

    def __init__(
        self,
        spec: LaunchSpec,
        *,
        restart_policy: str,
        before_restart: Callable[[ReplicaPod], None] | None = None,
        strays: Callable[[ReplicaPod], set[int]] | None = None,
        core_offset: int = 0,
    ) -> None:
        if restart_policy not in ("Always", "OnFailure", "Never"):
            raise ValueError(f"unknown pod restartPolicy {restart_policy!r}")
        self.spec = spec
        self.restart_policy = restart_policy
        self.before_restart = before_restart
        self.strays = strays
        """The pod's processes outside its process group (its main process's pid aside)."""
        self.core_offset = core_offset
        self.cores: frozenset[int] | None = None
        """The cores the running process is pinned to (``spec.cpus`` of them)."""
        self.oom_killed = ""
        """Why the supervisor killed the running process for its memory, if it did."""
        self.state = PodState()
        self.popen: subprocess.Popen[bytes] | None = None
        self.pidfd: int | None = None
        self.deleting = False
        self.stopped_running = False
        """Deleted while it ran (or waited to restart): shown as Stopped afterwards."""
        self.stop_reason = ""
        self.kill_at: float | None = None
        self.restart_at: float | None = None
        self.interrupted_restart = False
        """Deleted while waiting to restart (its restart count already holds that restart)."""
        self.exit_reason = ""
        self.restart_allowed = False
        """Set by the supervisor once the core has seen the exit and kept the pod."""
        self._backoff = BACKOFF_INITIAL
        self.prober = Prober(spec.readiness, spec) if spec.readiness is not None else None

    # --- lifecycle ---------------------------------------------------------------------

    def start(self, now: float) -> None:
        """Create the pod: start its process now."""
        self.create(now)
        self._launch(now)

    def create(self, now: float) -> None:
        """Create the pod without starting its process yet: it is Pending until
        :meth:`launch` (the supervisor starts processes at a bounded rate)."""
        self.state.created = now

    @property
    def pending(self) -> bool:
        """Created, its process never started, not deleted."""
        return (
            self.state.phase == "Pending"
            and self.popen is None
            and self.state.started is None
            and not self.deleting
        )

    def launch(self, now: float) -> None:
        """Start the process of a :attr:`pending` pod."""
        if self.pending:
            self._launch(now)

    @property
    def waiting_to_restart(self) -> bool:
        """Exited, with a restart planned that has not happened yet."""
        return self.restart_at is not None and self.popen is None

    def allow_restart(self) -> None:
        """The core has judged the exit and kept the pod: the planned restart may go ahead."""
        if self.waiting_to_restart and not self.deleting:
            self.restart_allowed = True

    def _launch(self, now: float) -> None:
        self.restart_at = None
        self.restart_allowed = False
        if self.spec.cpus is not None:
            self.cores = CORES.take(self.spec.cpus, start=self.core_offset)
        try:
            popen = spawn(self.spec, cores=self.cores)
        except OSError as exc:
            self._release_cores()
            self._start_failed(now, exc)
            return
        self.popen = popen
        with contextlib.suppress(OSError):
            self.pidfd = os.pidfd_open(popen.pid)
        self.state.process = procinfo.identify(popen.pid) or procinfo.ProcessId(
            popen.pid, 0, procinfo.boot_id()
        )
        self.state.phase = "Running"
        self.state.started = now
        self.state.finished = None
        if self.prober is not None:
            self.prober.restart(now)
        self.state.reason = ""
        self.state.message = ""
        self.state.termination_message = ""

    def _start_failed(self, now: float, exc: OSError) -> None:
        # The kubelet reports a container that cannot start as terminated with a reason.
        code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
        missing = exc.filename if exc.filename is not None else self.spec.argv[0]
        self.state.exit_code = code
        self.state.finished = now
        self.state.reason = "StartError"
        self.exit_reason = "StartError"
        self.state.message = (
            f"replica {self.spec.replica} could not start {self.spec.argv[0]!r}:"
            f" {exc.strerror} ({missing})"
        )
        self._after_exit(now, code)

    def poll(self, now: float) -> bool:
        """Notice an exit, due restarts and due kills. Returns True if anything changed."""
        changed = False
        if self.popen is not None and self._has_exited():
            # Kill what the process left in its group while its zombie still pins the id,
            # and what left the group.
            self._signal(signal.SIGKILL)
            returncode = self.popen.wait()
            self._close_pidfd()
            self._release_cores()
            self.popen = None
            if self.prober is not None:
                self.prober.stop()
            code = exit_code_of(returncode)
            self.state.exit_code = code
            self.state.finished = now
            self.kill_at = None
            ran = now - (self.state.started or now)
            if ran >= BACKOFF_RESET_AFTER:
                self._backoff = BACKOFF_INITIAL
            self.state.reason = "Completed" if code == 0 else "Error"
            self.state.message = ""
            if self.oom_killed:
                # As the kubelet reports a container the kernel's OOM killer ended.
                self.state.exit_code = code = EXIT_OOM_KILLED
                self.state.reason, self.state.message = "OOMKilled", self.oom_killed
                self.oom_killed = ""
            elif code != 0 and self.spec.message_from_logs:
                self.state.termination_message = termination_tail(
                    self.spec.replica, self.spec.log_path
                )
            self.exit_reason = self.state.reason
            self._after_exit(now, code)
            changed = True
        if (
            self.restart_at is not None
            and self.restart_allowed
            and now >= self.restart_at
            and not self.deleting
        ):
            if self.before_restart is not None:
                self.before_restart(self)
            self._launch(now)
            changed = True
        if self.kill_at is not None and now >= self.kill_at and self.popen is not None:
            self.kill_at = None
            self._signal(signal.SIGKILL)
        if self.prober is not None and self.popen is not None and not self.deleting:
            changed = self.prober.poll(now) or changed
        return changed

    def _after_exit(self, now: float, code: int) -> None:
        restart = not self.deleting and (
            self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)
        )
        if restart:
            # The pod stays Running while its container waits to be restarted.
            self.state.phase = "Running"
            self.state.reason = "CrashLoopBackOff" if code != 0 else "Completed"
            # Counted now, so the core judges backoffLimit before the restart happens.
            self.state.restart_count += 1
            self.restart_allowed = False
            self.restart_at = now + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX)
        else:
            self.state.phase = "Succeeded" if code == 0 else "Failed"

    def _has_exited(self) -> bool:
        assert self.popen is not None
        try:
            info = os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def terminate(self, now: float, *, reason: str, grace: float | None = None) -> None:
        """Delete the pod: SIGTERM its group now, SIGKILL after the grace period."""
        if self.deleting:
            return
        # Only a process that the stop actually ends (or one it keeps from ever starting)
        # is shown as Stopped; a pod waiting to restart keeps its last real run's end.
        self.stopped_running = self.popen is not None or self.pending
        self.deleting = True
        self.stop_reason = reason
        if self.prober is not None:
            self.prober.stop()
        self._give_up_restart(reason)
        if self.popen is None:
            return
        self._signal(signal.SIGTERM)
        wait = self.spec.grace_seconds if grace is None else grace
        self.kill_at = now + wait

    def oom_kill(self, message: str) -> None:
        """Its processes use more memory than its limit: SIGKILL them (OOMKilled, 137)."""
        if self.popen is not None and not self.oom_killed:
            self.oom_killed = message
            self._signal(signal.SIGKILL)

    def _release_cores(self) -> None:
        if self.cores is not None:
            CORES.give_back(self.cores)
            self.cores = None

    def _give_up_restart(self, why: str) -> None:
        """A planned restart will not happen: the pod ends as its last run ended."""
        if self.waiting_to_restart:
            code = self.state.exit_code
            self.state.phase = "Succeeded" if code == 0 else "Failed"
            self.state.reason = self.exit_reason
            self.state.message = f"{STOPPED_WAITING}: {why}"
            self.interrupted_restart = True
        self.restart_at = None

    def kill(self) -> None:
        """SIGKILL the group at once (a second Ctrl-C, or the grace period is over)."""
        self._give_up_restart(self.stop_reason or "killed")
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        if self.popen is None:
            return
        strays = self.strays(self) - {self.popen.pid} if self.strays is not None else set()
        if sig == signal.SIGKILL:
            # A container's processes die at once (its cgroup is killed whole). One by one,
            # a process killed first could be seen dying by another not yet killed: an
            # exec'd shell's `wait` would return 0 and the shell exit 0, not 137. Stopped
            # first, none runs again before its SIGKILL.
            for pid in strays:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def close(self) -> None:
        """Release the pidfd (the process must already be gone)."""
        self._close_pidfd()

    # --- views -------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """Whether a process of this pod runs (or waits to be reaped)."""
        return self.popen is not None

    @property
    def gone(self) -> bool:
        """Deleted and its process has exited: the pod no longer exists."""
        return self.deleting and self.popen is None

    @property
    def next_deadline(self) -> float | None:
        """The next moment :meth:`poll` has something to do without an exit."""
        restart = self.restart_at if self.restart_allowed else None
        probe = self.prober.next_deadline if self.prober is not None else None
        times = [t for t in (restart, self.kill_at, probe) if t is not None]
        return min(times) if times else None

    def as_record(self, recorded: ReplicaRecord) -> ReplicaRecord:
        """The pod as the store records it, from what was recorded of its replica before."""
        s = self.state
        phase: str = s.phase
        reason, message = s.reason, s.message
        # A replica that exited 0 on its own while being stopped (it was finishing anyway)
        # succeeded; only one that the stop actually ended is shown as Stopped.
        if self.deleting and not self.alive and self.stopped_running and s.phase != "Succeeded":
            phase, reason, message = "Stopped", "Stopped", self.stop_reason
        return replace(
            recorded,
            phase=phase,
            process=s.process,
            exit_code=s.exit_code,
            restart_count=s.restart_count,
            created=s.created,
            started=s.started,
            finished=None if self.alive else s.finished,
            reason=reason,
            message=message,
        )

    def observed(self, replica_type: str, index: int) -> ObservedPod:
        """The pod as the reconciler sees it."""
        s = self.state
        return ObservedPod(
            name=self.spec.replica,
            replica_type=replica_type,
            index=index,
            phase=s.phase,
            exit_code=s.exit_code,
            restart_count=s.restart_count,
            ready=self.alive and not self.deleting and (self.prober is None or self.prober.ready),
            created=_utc(s.created),
            started=_utc(s.started),
            finished=_utc(s.finished) if self.popen is None else None,
            deleting=self.deleting,
            reason=s.reason,
            message=s.termination_message,
            uid=f"{self.spec.replica}@{s.created}",
        )


def wait_any(pods: list[ReplicaPod], *, timeout: float, wake_fd: int | None = None) -> None:
    """Sleep until a pod's process exits, ``wake_fd`` is readable, or ``timeout`` passes."""
    fds = [p.pidfd for p in pods if p.pidfd is not None]
    if wake_fd is not None:
        fds.append(wake_fd)
    if not fds:
        time.sleep(max(0.0, timeout))
        return
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    poller.poll(max(0, int(timeout * 1000)))
