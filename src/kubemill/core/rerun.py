"""The re-run lifecycle: an application that runs again as a whole (a Spark application).

The Plan declares what the machine needs as data (``Plan.reruns``: a
:class:`~kubemill.frameworks.RerunPolicy` and a reader of the kind's status into a
:class:`~kubemill.frameworks.RunRecord`); the state machine itself is
:mod:`kubemill.core.application`. This lifecycle carries its steps out: it submits the
deciding replica (the driver), judges its pod, deletes and submits it again, and maps its
state onto the conditions (RUNNING: Running; PENDING_RERUN and INVALIDATING: Restarting;
COMPLETED: Succeeded; FAILED: Failed; SUSPENDING/SUSPENDED: Suspended). A spec change
withdraws a verdict (:meth:`_RerunPass._reopen`): the one exception to Succeeded and Failed
being final. Of the replica-set rules it shares ``Created``, interrupts and halts (FAILED),
files, access, services and replica counts (:class:`~kubemill.core.jobpass.JobPass`). A
passing state (SUCCEEDING, FAILING, INVALIDATING, RESUMING, ...) is written first and acted
on by a pass that follows at once (``requeue_after`` 0), as upstream; where the machine
waits, a pass on unchanged inputs has no actions. The decided record reaches the kind's own
status fields through the status extension (``StatusView.run``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kubemill.api import ConditionType, Job
from kubemill.api.runstates import ApplicationStateType
from kubemill.core import application
from kubemill.core.conditions import set_condition
from kubemill.core.jobpass import JobPass
from kubemill.core.lifecycle import ReconcileOptions, refuse_unread
from kubemill.core.model import CreatePod, DeleteJob, Observed, ReconcileResult
from kubemill.frameworks.plan import Plan, RunRecord


@dataclass(frozen=True)
class Rerun:
    """The re-run :class:`~kubemill.core.lifecycle.Lifecycle`: a refused submission is
    the core's to judge (SUBMISSION_FAILED and its retries)."""

    name: str = "rerun"
    pods_by_label: bool = False
    judges_refusals: bool = True

    def reconcile(
        self, job: Job, plan: Plan, observed: Observed, now: datetime, options: ReconcileOptions
    ) -> ReconcileResult:
        if plan.reruns is None:
            raise ValueError(
                f"{plan.kind} {plan.name}: the {self.name} lifecycle needs the Plan's reruns "
                "(a RerunPolicy), and the framework set none"
            )
        refuse_unread(plan, self.name, "retry", "remote", "service_cluster")
        return _RerunPass(job, plan, observed, now, options).run()


RERUN = Rerun()
"""The re-run lifecycle."""


class _RerunPass(JobPass):
    """One pass of the application's state machine."""

    def decide(self) -> None:
        """A job that runs again as a whole (``Plan.reruns``): the state machine of
        :mod:`kubemill.core.application` decides, this carries it out."""
        policy = self.plan.reruns
        assert policy is not None
        outcome = self.plan.outcome
        driver_rep = next(
            (r for r in self.plan.of_type(outcome.replica_type) if r.index == 0),
            self.plan.replicas[0],
        )
        record = policy.recorded(self.job.status)
        facts = application.Facts(
            driver_name=driver_rep.name,
            driver=self.live.get(driver_rep.name),
            driver_going=driver_rep.name in self.vanishing,
            refused="; ".join(f"{r.kind} {r.name}: {r.message}" for r in self.observed.refused),
            suspend=bool(self.run_policy.suspend),
            stop=self._stop_message(),
            uid=self.job.metadata.uid or f"{self.job.namespace}/{self.job.name}",
        )
        decided = application.step(record, policy, facts, self.now)
        new = decided.record
        if decided.submit and not (self._sync_pod_group() and self._earlier_stages_up(driver_rep)):
            # A gang scheduler has not admitted the group yet, or the replicas the driver
            # needs first (locally a standalone Master and Workers) are not up: no
            # submission this pass; their pods' changes wake the job again.
            decided = application.Step(record)
            new = record
        self.run_record = new
        state, before = new.state, record.state
        if facts.driver is not None and decided.stop_driver:
            self._delete_pod(facts.driver, decided.stop_driver)
        if before in application.TERMINAL and state not in application.TERMINAL:
            self._reopen()
        if state in (ApplicationStateType.SUSPENDING, ApplicationStateType.SUSPENDED):
            # Suspending stops every pod, as for every kind: the driver goes by the state
            # machine, the replicas it needs (a local standalone cluster) go here.
            for name, pod in sorted(self.live.items()):
                if name != driver_rep.name:
                    self._delete_pod(pod, "Suspended")
            for service in sorted(self.observed.services):
                self._delete_service(service)
            self._delete_pod_group()
        elif state not in application.TERMINAL:
            self._remove_strays()
            self._sync_children()
            # The replicas besides the driver (none on Kubernetes; locally a standalone
            # Master and Workers) serve every run: created once, kept across re-runs.
            self._create_missing(exclude=frozenset({driver_rep.name}))
        if decided.submit:
            if self.status.start_time is None:
                self.status.start_time = self.now
            self.actions.append(CreatePod(driver_rep.name))
            self._event("Normal", "SuccessfulCreatePod", f"Created pod: {driver_rep.name}")
        self._record_counts(exclude=frozenset())
        self._application_conditions(record, decided)
        if decided.delete_job:
            self.actions.append(DeleteJob())
            ttl = policy.time_to_live.total_seconds() if policy.time_to_live else 0
            self._event(
                "Normal",
                "TTLExpired",
                f"{self.kind} {self.ref} terminated {ttl:g}s ago (its time to live): deleting it.",
            )
        if decided.requeue is not None:
            self.requeue.append(decided.requeue)

    def _application_conditions(self, record: RunRecord, decided: application.Step) -> None:
        """The common conditions and an event for the application's new state."""
        new = decided.record
        state, before = new.state, record.state
        S = ApplicationStateType
        what = f"{self.kind} {self.ref}"
        if state != before:
            warn = state in (S.FAILING, S.FAILED, S.SUBMISSION_FAILED, S.UNKNOWN)
            words = state.value.lower().replace("_", " ")
            detail = f": {new.error}" if new.error and warn else ""
            self._event(
                "Warning" if warn else "Normal",
                f"{self.kind}{state.value.title().replace('_', '')}",
                f"{what} is {words}{detail}.",
            )
        suspended = (S.SUSPENDING, S.SUSPENDED)
        if before in suspended and state not in suspended:
            self._condition(
                ConditionType.SUSPENDED, "False", "Resumed", f"{what} is resumed.", event=False
            )
            self.status.start_time = self.now
        if state == S.RUNNING:
            self._condition(
                ConditionType.RUNNING, "True", "Running", f"{what} is running.", event=False
            )
        elif state in (S.PENDING_RERUN, S.INVALIDATING):
            why = "its spec changed" if state == S.INVALIDATING else "it runs again"
            set_condition(
                self.status,
                ConditionType.RESTARTING,
                "True",
                reason=f"{self.kind}Restarting",
                message=f"{what} is restarting: {why}.",
                now=self.now,
            )
        elif state in (S.SUCCEEDING, S.FAILING, S.SUBMISSION_FAILED):
            # The run has ended (or never started): it is not running while the machine
            # decides what follows (a retry interval may be long).
            if self.status.is_true(ConditionType.RUNNING):
                words = state.value.lower().replace("_", " ")
                self._condition(
                    ConditionType.RUNNING, "False", "Ended", f"{what} is {words}.", event=False
                )
        elif state in suspended:
            message = f"{what} is suspended."
            if self.status.is_true(ConditionType.RUNNING):
                self._condition(ConditionType.RUNNING, "False", "Suspended", message, event=False)
            self._condition(ConditionType.SUSPENDED, "True", "Suspended", message, event=False)
            for rs in self.status.replica_statuses.values():
                rs.active = 0
        elif state == S.COMPLETED and not self.status.finished:
            self.status.completion_time = new.terminated or self.now
            self._condition(
                ConditionType.SUCCEEDED,
                "True",
                "Succeeded",
                f"{what} successfully completed.",
                event=False,
            )
        elif state == S.FAILED and not self.status.finished:
            self.status.completion_time = new.terminated or self.now
            set_condition(
                self.status,
                ConditionType.FAILED,
                "True",
                reason=decided.reason or f"{self.kind}Failed",
                message=new.error or f"{what} failed.",
                now=self.now,
            )
        if state in application.TERMINAL:
            self._delete_pod_group()

    def _reopen(self) -> None:
        """A finished application runs again (its spec changed): the verdict is withdrawn.

        Succeeded and Failed are terminal for :func:`set_condition`, so they are turned
        False here, the one place a verdict is ever withdrawn.
        """
        reopened = []
        for cond in self.status.conditions:
            verdict = cond.type in (ConditionType.SUCCEEDED, ConditionType.FAILED)
            if verdict and cond.status == "True":
                cond = cond.model_copy(
                    update={
                        "status": "False",
                        "reason": f"{self.kind}Rerun",
                        "last_update_time": self.now,
                        "last_transition_time": self.now,
                    }
                )
            reopened.append(cond)
        self.status.conditions = reopened
        self.status.completion_time = None


__all__ = ["RERUN", "Rerun"]
