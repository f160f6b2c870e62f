"""The local loop of any controller kind (a Spark schedule, a plugin's): its
rules' ``decide`` (:class:`kubemill.core.ControllerRules`) on this machine.

A controller's object is recorded as a job with no replicas; a detached process (``python -m
kubemill.substrates.local.schedules --state-dir D --job-uid U``) runs its loop, as the
operator's controller loop does on a cluster: it reads the object and the runs it owns (the
jobs carrying its rules' run label with its name, whose controlling owner is its uid), asks
the registry's rules, and carries the actions out through the local backend: a run is a
normal local job, submitted detached (its own supervisor), and deleted as any job. The
status is the rules', written as returned; the loop writes none of its own.

It wakes at the result's ``wake_at`` (a schedule's ``nextRun``) and, in between, every
:data:`CHECK_INTERVAL`: locally there is no watch, so a run that ended (Forbid waits for it),
a suspend or resume (the recorded manifest's ``spec.suspend``) and a delete request (the
``request`` column) are noticed by looking, as a job's supervisor looks for its requests.

``kubemill delete`` of the controller stops the loop first (no run starts after it), then
deletes the runs it owns: on Kubernetes runs carry an owner reference and the garbage
collector deletes them with it; locally the deleting process does it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from kubemill.api import JobStatus
from kubemill.core import ControllerContext, ControllerResult, CreateRun, DeleteRun
from kubemill.kinds import controller_for
from kubemill.substrates.base import JobExists, JobNotFound, SubmitOptions, SubstrateError
from kubemill.substrates.local import detached
from kubemill.substrates.local.backend import LocalBackend
from kubemill.substrates.local.controller_runs import owned_runs
from kubemill.substrates.local.store import JobRecord
from kubemill.substrates.zones import resolve_zone

log = logging.getLogger("kubemill.local.schedules")

CHECK_INTERVAL = 0.5
"""Seconds between two looks at the runs and requests while no pass is due."""
RETRY_AFTER = 5.0
"""Seconds before a pass whose run could not be created or deleted is tried again."""
WAKE_MARGIN = 0.005
"""Seconds past a run's due time to wake at, so the pass sees it due (as the operator)."""


def _now() -> datetime:
    return datetime.now(UTC)


class ControllerLoop:
    """Runs one recorded controller object until it is deleted (or :meth:`stop`)."""

    def __init__(
        self,
        backend: LocalBackend,
        uid: str,
        *,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.backend = backend
        self.store = backend.store
        self.uid = uid
        self.clock = clock
        self._stopping = threading.Event()

    def stop(self) -> None:
        """End the loop at its next look (the signal handler's way)."""
        self._stopping.set()

    def run(self) -> None:
        self.store.set_supervisor_state(self.uid, "running")
        try:
            while not self._stopping.is_set():
                rec = self.store.job_by_uid(self.uid)
                if rec is None or rec.request == "delete":
                    break
                wait = self.pass_once(rec)
                self._stopping.wait(min(wait, CHECK_INTERVAL))
        except Exception as exc:
            # Reported as a lost loop is; `kubemill resume` starts a new one.
            log.exception("the loop of controller %s failed", self.uid)
            self.store.add_event(
                self.uid,
                type="Warning",
                reason="SupervisorError",
                message=f"the controller's loop failed ({type(exc).__name__}: {exc}): no run"
                " starts until `kubemill resume` starts a new loop",
            )
            raise
        finally:
            self.store.set_supervisor_state(self.uid, "done")

    def pass_once(self, rec: JobRecord) -> float:
        """One pass: decide, carry out, record; seconds until the next look is needed."""
        job = rec.load_job()
        controller = controller_for(rec.kind)
        if controller.kind != job.KIND:
            raise SubstrateError(f"{rec.kind} {rec.name} is not a {controller.kind}")
        now = self.clock()
        # Whole seconds decide, as the operator's passes (the status records seconds).
        decided_at = now.replace(microsecond=0)
        result = controller.rules.decide(
            job,
            owned_runs(self.backend, rec),
            now=decided_at,
            context=ControllerContext(zone_of=resolve_zone),
        )
        if not self._carry_out(rec, result):
            return RETRY_AFTER
        if result.status.to_wire() != job.status.to_wire():
            self.store.set_status(self.uid, result.status.to_wire(), finished=False)
        if result.wake_at is None:
            return CHECK_INTERVAL
        return max((result.wake_at - self.clock()).total_seconds(), 0.0) + WAKE_MARGIN

    def _carry_out(self, rec: JobRecord, result: ControllerResult[JobStatus]) -> bool:
        """The actions in the core's order; an action's events only once it was done.
        False if one failed (the status is then not written: the next pass asks again)."""
        ok = True
        last_done = True
        for action in result.actions:
            if isinstance(action, CreateRun | DeleteRun):
                try:
                    self._execute(rec, action)
                    last_done = True
                except SubstrateError as exc:
                    last_done = ok = False
                    verb = "create" if isinstance(action, CreateRun) else "delete"
                    self.store.add_event(
                        self.uid,
                        type="Warning",
                        reason="RunFailed",
                        message=f"could not {verb} run {action.name}: {exc}",
                    )
                continue
            if last_done:
                self.store.add_event(
                    self.uid, type=action.type, reason=action.reason, message=action.message
                )
        return ok

    def _execute(self, rec: JobRecord, action: CreateRun | DeleteRun) -> None:
        if isinstance(action, CreateRun):
            options = SubmitOptions(detach=True, namespace=rec.namespace, base_dir=rec.base_dir)
            # JobExists: started by a pass whose status write was lost; the same run.
            with contextlib.suppress(JobExists):
                self.backend.submit(action.run, options)
            return
        try:
            view = self.backend.get(action.name, rec.namespace)
        except JobNotFound:
            return
        if action.uid and view.job.metadata.uid != action.uid:
            return  # a new job of that name, not the run judged
        with contextlib.suppress(JobNotFound):
            self.backend.delete(action.name, rec.namespace)


def main(argv: list[str] | None = None) -> int:
    """Entry point of a detached controller process."""
    args = detached.start(
        argv,
        prog="python -m kubemill.substrates.local.schedules",
        description="Run one recorded kubemill controller (started by `kubemill run`).",
    )
    # The config (images, start limits) comes from the environment the submitter set.
    backend = LocalBackend(args.state_dir)
    if not detached.claim(backend.store, args.job_uid):
        log.error("controller %s is gone or has another loop; exiting", args.job_uid)
        return 1
    loop = ControllerLoop(backend, args.job_uid)
    detached.on_stop_signals(lambda signum: loop.stop())
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
