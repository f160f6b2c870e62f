"""A container's exec ``readinessProbe``, run as the kubelet runs it (:class:`Prober`).

The command runs in the container's environment and working directory, never blocking the
supervisor's loop (it is polled), every ``periodSeconds`` from ``initialDelaySeconds`` after
each start; a run past ``timeoutSeconds`` is killed and fails; ``successThreshold`` passes
in a row make the pod ready, ``failureThreshold`` failures in a row unready.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from kubemill.substrates.local.launch import LaunchSpec
from kubemill.substrates.local.probes import ExecProbe
from kubemill.substrates.local.spawn import start_tied


class Prober:
    """The exec readiness probe of one pod's running container (see the module's docs)."""

    def __init__(self, probe: ExecProbe, spec: LaunchSpec) -> None:
        self.probe = probe
        self.spec = spec
        self.ready = False
        self.next_run: float | None = None
        self.deadline: float | None = None
        self._run: subprocess.Popen[bytes] | None = None
        self._passes = 0
        self._failures = 0

    def restart(self, now: float) -> None:
        """The container (re)started: not ready until the probe passes again."""
        self.stop()
        self.ready = False
        self._passes = self._failures = 0
        self.next_run = now + self.probe.initial_delay

    def stop(self) -> None:
        """The container is gone: no more runs (a running one is killed)."""
        if self._run is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._run.pid, signal.SIGKILL)
            self._run.wait()
            self._run = None
        self.next_run = self.deadline = None
        self.ready = False

    def poll(self, now: float) -> bool:
        """Start a due run, judge a finished or timed-out one. True if readiness changed."""
        before = self.ready
        if self._run is not None:
            code = self._run.poll()
            if code is None and self.deadline is not None and now >= self.deadline:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._run.pid, signal.SIGKILL)
                self._run.wait()
                code = -1
            if code is not None:
                self._run = None
                self.deadline = None
                self._judge(code == 0)
        if self._run is None and self.next_run is not None and now >= self.next_run:
            self.next_run = now + self.probe.period
            try:
                self._run = start_tied(
                    self.probe.argv,
                    env=self.spec.env,
                    cwd=self.spec.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                self.deadline = now + self.probe.timeout
            except OSError:
                self._judge(False)  # the kubelet fails a probe whose command cannot run
        return self.ready != before

    def _judge(self, passed: bool) -> None:
        if passed:
            self._passes += 1
            self._failures = 0
            if self._passes >= self.probe.success_threshold:
                self.ready = True
        else:
            self._failures += 1
            self._passes = 0
            if self._failures >= self.probe.failure_threshold:
                self.ready = False

    @property
    def next_deadline(self) -> float | None:
        """When :meth:`poll` has something to do next (a due run, a run's timeout; a
        running probe is also polled with the loop's poll interval)."""
        times = [t for t in (self.next_run, self.deadline) if t is not None]
        return min(times) if times else None
