"""The replica-set lifecycle: pods the core creates one by one and judges by a success policy.

The lifecycle of TensorFlow's, PyTorch's and MPI's jobs and every kind whose Plan is a set of
replicas (a service replanned into replicas too, with a ``ServicePolicy``: Ready, never Succeeded).
It is level-triggered: it looks only at the job (with its last status), the
Plan and what the substrate observed, and says what to do now. Running it again on the same
inputs after its actions took effect yields no actions at all (not even events), so a
substrate may call it as often as it likes. Semantics follow Kubeflow training-operator v1;
where kubemill deviates, the comment at the rule says why.

Decisions, in the order they are taken:

1. ``Created`` on the first reconcile.
2. A finished job (Succeeded or Failed) only cleans up (``cleanPodPolicy``, once the Plan's
   ``clean_after`` has passed since the end; PodGroup) and waits for
   ``ttlSecondsAfterFinished``; it never gets a new pod or a new verdict.
3. The substrate reports it can no longer run the job (``Observed.halt``: locally a lost
   supervisor, a job that cannot start on this machine, a failed supervisor) -> Failed with
   the substrate's reason. A stop request (the ``kubemill.dev/stop`` annotation: ``kubemill
   interrupt``, Ctrl-C during ``kubemill run``) -> Failed with reason ``Interrupted``. Both
   stop the active pods; they mean the same on every substrate.
4. ``suspend``: every pod, service and the PodGroup go, ``Suspended`` True, ``Running`` False.
   On resume ``Suspended`` turns False and ``startTime`` restarts now, as upstream.
5. Success policy met, or a replica failed for good (``Never``, or ``ExitCode`` with 1-127):
   judged by when the replicas *finished*, not by the order a substrate observed them in.
   A permanent failure that finished before the success, or within ``OUTCOME_TIE`` (1 s,
   the resolution of Kubernetes' ``finishedAt``) after it, or at an unknown time, makes the
   job Failed: a failure wins a tie. A later failure does not undo the success (a PS
   killed after the chief finished). While another replica is still active within the
   window, the success waits (a requeue, at most 2 s: ``REPORT_GRACE`` more for the exit
   to be reported), so a failure about to be observed still counts. Upstream judges
   whatever it happens to list first, so a worker that crashes as the master exits 0
   gives either verdict; kubemill's is deterministic.
   A Plan with a remote run (``Plan.remote``: a program handed to a service the job brings
   up, a Ray job on its Ray head) is judged by what the service's API reported instead
   (``Observed.remote``, read through the Plan's own ``verdict``): its success policy decides
   nothing; once the run has ended, its verdict is the job's, whatever the replicas did
   since; before that, a replica failing for good still fails the job (the service or the
   submitter is gone). When the Plan asks for it, the core asks the substrate to submit the
   run (``SubmitRemote``) while the service is up (its ``after`` replica Running and ready)
   and its API does not know the run.
   A replica run through a child controller (``ReplicaPlan.controller``: a Ray job's
   submitter) that has failed for good, its controller having given up or its failures
   over the controller's ``backoff_limit`` (:mod:`kubemill.core.controlled`), fails the job
   with the controller's ``failure_reason``, after the remote run's verdict and before any
   other replica's.
   A Plan that retries its whole run (``Plan.retry``: KubeRay's ``backoffLimit``) tries
   again after those two failures (unless the verdict is not ``retryable``) while retries
   are left: every pod goes (``anew``: a child controller's failures with it), ``startTime``
   and so the deadline start again, ``Restarting`` is set, and the job is created afresh.
   Every verdict counts an attempt (``StatusView.attempts``). Not retried, as KubeRay: a
   deadline, an interrupt, a halted substrate; nor a replica failing for good.
6. Restarts over ``backoffLimit`` -> Failed (``BackoffLimitExceeded``); past
   ``activeDeadlineSeconds`` -> Failed (``DeadlineExceeded``). Both stop the active pods
   first, whatever ``cleanPodPolicy`` says (upstream deletes every pod here; kubemill keeps
   the finished ones to the clean-pod policy, so their logs stay readable).
7. Otherwise: retryable failures are deleted for recreation (``Restarting``), strays go,
   the PodGroup, services and missing pods are created (by stage), and ``Running`` is set
   once every replica's pod is Running or Succeeded (at least one Running). Upstream sets
   Running as soon as one pod of the deciding type (chief/master, else workers) runs;
   kubemill waits for the whole job so that Running means every replica is up, which is
   what gang and staged start promise and what ``kubemill run`` shows.

Unknown pods (the substrate lost the replica, e.g. its supervisor died and the process is
gone without an exit status) count as failed with no exit code: the restart policy decides
(Never -> the job fails naming the reason the substrate gave; OnFailure/Always/ExitCode ->
recreated). Waiting for a replica nobody can see would hang the job forever.

The books every lifecycle keeps alike (files, services, counts, restarts, the status
extension) are :class:`~kubemill.core.jobpass.JobPass`'s; its docstring says how restarts
are counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from kubemill.api import CleanPodPolicy, ConditionType, Job, RestartPolicy
from kubemill.core.conditions import set_condition, terminal_time
from kubemill.core.controlled import controlled_failure
from kubemill.core.jobpass import JobPass, describe_failure
from kubemill.core.lifecycle import ReconcileOptions, refuse_unread
from kubemill.core.model import DeleteJob, Observed, ObservedPod, ReconcileResult, SubmitRemote
from kubemill.core.policy import is_retryable_exit_code
from kubemill.frameworks.plan import Plan, ReplicaPlan, ServicePolicy
from kubemill.frameworks.remote import RemoteVerdict

OUTCOME_TIE = timedelta(seconds=1)
"""Replicas that finished within this of each other finished at the same time. Kubernetes
stamps ``finishedAt`` to the second, so closer finishes cannot be ordered there; locally the
same window applies, so both substrates judge a race alike (a failure wins a tie)."""

REPORT_GRACE = timedelta(seconds=1)
"""How long after an exit a substrate may take to report it (a watch event, a pidfd wake-up).
A success waits this long beyond ``OUTCOME_TIE`` while other replicas are still active, so a
failure in the tie window that is reported within this grace is still judged."""

_ACTIVE_PHASES = frozenset({"Running", "Pending", "Unknown"})
"""Pods that may still be (or become) running: what deadline/backoff stop and what
``cleanPodPolicy: Running`` removes (a Pending pod turns Running once scheduled)."""


def _count_by_type(failures: Iterable[tuple[ReplicaPlan, ObservedPod]]) -> str:
    """``1 Worker`` or ``1 Worker and 2 PS`` for messages in upstream's shape."""
    counts: dict[str, int] = {}
    for rep, _ in failures:
        counts[rep.replica_type] = counts.get(rep.replica_type, 0) + 1
    return " and ".join(f"{n} {t}" for t, n in counts.items())


@dataclass(frozen=True)
class ReplicaSet:
    """The replica-set :class:`~kubemill.core.lifecycle.Lifecycle`."""

    name: str = "replica-set"
    pods_by_label: bool = False
    judges_refusals: bool = False

    def reconcile(
        self, job: Job, plan: Plan, observed: Observed, now: datetime, options: ReconcileOptions
    ) -> ReconcileResult:
        refuse_unread(plan, self.name, "reruns", "service_cluster")
        return _ReplicaSetPass(job, plan, observed, now, options).run()


REPLICA_SET = ReplicaSet()
"""The replica-set lifecycle (the registry's default)."""


class _ReplicaSetPass(JobPass):
    """One pass of the replica-set rules."""

    def decide(self) -> None:
        stop = self._stop_message()
        if self.status.finished:
            self._finish(kill=frozenset())
        elif stop is not None:
            self._record_counts(exclude=frozenset())
            reason, message = stop
            self._fail(reason=reason, message=message, kill_active=True)
        elif self.run_policy.suspend:
            self._suspend()
        else:
            self._resume_if_suspended()
            if self.status.start_time is None:
                self.status.start_time = self.now
            self._active()

    def _active(self) -> None:
        permanent: list[tuple[ReplicaPlan, ObservedPod]] = []
        retry: list[tuple[ReplicaPlan, ObservedPod]] = []
        for rep in self.plan.replicas:
            pod = self.live.get(rep.name)
            if pod is None or pod.phase not in ("Failed", "Unknown"):
                continue
            if self._retryable(rep.restart_policy, pod):
                retry.append((rep, pod))
            else:
                permanent.append((rep, pod))

        remote = self._remote_verdict()
        if remote is not None and remote.state == "succeeded":
            self._record_counts(exclude=frozenset())
            self._succeed()
            return
        if remote is not None and remote.state == "failed":
            reason = remote.reason or f"{self.kind}Failed"
            message = f"{self.kind} {self.ref} failed: {remote.message or 'no message'}"
            if remote.retryable and self._retry_run(reason, message):
                return
            self._record_counts(exclude=frozenset())
            self._fail(reason=reason, message=message, kill_active=False)
            return

        given_up = controlled_failure(self.plan, self.observed, self.live, self._restarts())
        if given_up is not None:
            reason, details = given_up
            message = f"{self.kind} {self.ref} failed: {details}."
            if self._retry_run(reason, message):
                return
            self._record_counts(exclude=frozenset())
            self._fail(reason=reason, message=message, kill_active=False)
            return

        met, success_at = self._success_met()
        if met and not self._failure_ties(permanent, success_at):
            self._record_counts(exclude=frozenset())
            settled = self._settled_at(success_at)
            if settled is None:
                self._succeed()
            else:
                # Another replica could still fail within the tie window of this success;
                # its failure would win, so the verdict waits (at most OUTCOME_TIE).
                self.requeue.append(settled - self.now)
            return
        if permanent:
            self._record_counts(exclude=frozenset())
            details = "; ".join(describe_failure(pod) for _, pod in permanent)
            self._fail(
                reason=f"{self.kind}Failed",
                message=(
                    f"{self.kind} {self.ref} is failed because "
                    f"{_count_by_type(permanent)} replica(s) failed: {details}."
                ),
                kill_active=False,
            )
            return

        self._note_in_place_restarts()
        limit = self.run_policy.backoff_limit
        if limit is not None and sum(self._restarts().values()) + len(retry) > limit:
            self._record_counts(exclude=frozenset())
            culprits = [pod for _, pod in retry] or [
                pod for pod in self._existing_pods() if pod.restart_count > 0
            ]
            details = "; ".join(describe_failure(pod) for pod in culprits)
            self._fail(
                reason="BackoffLimitExceeded",
                message=(
                    f"{self.kind} {self.ref} has failed because it has reached the specified "
                    f"backoff limit ({limit} restarts): {details}."
                ),
                kill_active=True,
            )
            return
        deadline = self._deadline()
        if deadline is not None and self.now >= deadline:
            self._record_counts(exclude=frozenset())
            self._fail(
                reason="DeadlineExceeded",
                message=(
                    f"{self.kind} {self.ref} has failed because it was active longer than the "
                    f"specified deadline ({self.run_policy.active_deadline_seconds}s)."
                ),
                kill_active=True,
            )
            return
        if deadline is not None:
            self.requeue.append(deadline - self.now)

        self._restart(retry)
        self._remove_strays()
        self._record_counts(exclude=frozenset(pod.name for _, pod in retry))
        self._sync_children()
        if self._sync_pod_group():
            self._create_missing()
        if not retry and self._all_up():
            self._condition(
                ConditionType.RUNNING, "True", "Running", f"{self.kind} {self.ref} is running."
            )
        self._judge_readiness()
        self._submit_remote()

    # --- rules -----------------------------------------------------------------------------

    @staticmethod
    def _retryable(policy: RestartPolicy, pod: ObservedPod) -> bool:
        if policy == RestartPolicy.NEVER:
            return False
        if policy == RestartPolicy.EXIT_CODE:
            return is_retryable_exit_code(pod.exit_code)
        # OnFailure/Always restart in place; a pod that still ended Failed (evicted, lost)
        # is recreated, as upstream does.
        return True

    def _remote_verdict(self) -> RemoteVerdict | None:
        """How the Plan's remote run stands by its service's last report (None: no remote
        run, or no report of the service up now yet)."""
        remote, report = self.plan.remote, self.report
        if remote is None:
            return None
        verdict = remote.verdict(report) if report is not None else None
        ended = verdict is not None and verdict.state in ("succeeded", "failed")
        # Another job's service gone under the run: its verdict, unless the run had ended.
        return remote.lost if remote.lost is not None and not ended else verdict

    def _retry_run(self, reason: str, message: str) -> bool:
        """Try the whole run again after this failure, if the Plan retries it and retries
        are left (``Plan.retry``); False: the failure is final."""
        retry, attempts = self.plan.retry, self.attempts
        if retry is None or attempts is None or attempts.failed >= retry.limit:
            return False
        failed = attempts.failed + 1
        self.attempts = replace(attempts, failed=failed, retrying=True)
        going = self._existing_pods()
        for pod in going:
            self._delete_pod(pod, f"retrying the job: {reason}", anew=True)
        self._record_counts(exclude=frozenset(pod.name for pod in going))
        # Each attempt has its own start, and so its own deadline (as KubeRay's).
        self.status.start_time = self.now
        words = f"{message.rstrip('.')}; it runs again from the start ({reason}: retry "
        words += f"{failed} of {retry.limit})."
        what = f"{self.kind}Restarting"
        # restate: a retry while the last Restarting stands must say its own count.
        status, kind = self.status, ConditionType.RESTARTING
        set_condition(status, kind, "True", reason=what, message=words, now=self.now, restate=True)
        self._event("Warning", what, words)
        return True

    def _submit_remote(self) -> None:
        """Ask the substrate to submit the remote run once its service is up and does not
        know it (only when the Plan has the substrate submit it)."""
        remote, report = self.plan.remote, self.report
        if remote is None or not remote.submit_path or report is None or report.found:
            return
        service = self.live.get(remote.after)
        if remote.serving_elsewhere or (
            service is not None and service.phase == "Running" and service.ready
        ):
            self.actions.append(SubmitRemote())

    def _success_met(self) -> tuple[bool, datetime | None]:
        """Whether the success policy is met, and when it was (None: a time is unknown).

        Never for a service: it has no success, only readiness (:meth:`_judge_readiness`);
        never for a Plan with a remote run: its service's verdict decides.
        """
        policy = self.plan.outcome
        if isinstance(policy, ServicePolicy) or self.plan.remote is not None:
            return False, None
        replicas = self.plan.of_type(policy.replica_type)
        done = [
            pod
            for rep in replicas
            if (pod := self.live.get(rep.name)) is not None and pod.phase == "Succeeded"
        ]
        if policy.require == "first":
            deciding = [pod for pod in done if pod.index == 0]
        elif policy.require == "all":
            deciding = done if replicas and len(done) == len(replicas) else []
        else:
            # "any": met as soon as the earliest one finished.
            deciding = sorted(done, key=lambda p: (p.finished is None, p.finished or self.now))[:1]
        if not deciding:
            return False, None
        times = [pod.finished for pod in deciding]
        if any(t is None for t in times):
            return True, None
        return True, max(t for t in times if t is not None)

    @staticmethod
    def _failure_ties(
        permanent: list[tuple[ReplicaPlan, ObservedPod]], success_at: datetime | None
    ) -> bool:
        """Whether a permanent failure finished before the success, or too close to tell.

        Judged by the times the replicas finished, not by the order they were observed
        in, so the verdict does not depend on which exit a substrate happened to see
        first. A time that is unknown cannot be ordered: a tie, and a failure wins a tie.
        """
        for _, pod in permanent:
            if pod.finished is None or success_at is None:
                return True
            if pod.finished <= success_at + OUTCOME_TIE:
                return True
        return False

    def _settled_at(self, success_at: datetime | None) -> datetime | None:
        """When a success can be declared, if that is later than now (None: now).

        Until ``OUTCOME_TIE`` after the success, a replica that is still active may yet
        fail in a tie with it, and its exit may take ``REPORT_GRACE`` to be reported; once
        every other replica has finished, or that time has passed, nothing observed later
        can change the verdict. Host-only replicas (MPI's workers) are not waited for: they
        run nothing of their own, so only their clients' exits (the launcher's) have a
        result to report, and a host still up when its client succeeded is the usual end.
        """
        if success_at is None:
            return None
        settled = success_at + OUTCOME_TIE + REPORT_GRACE
        if self.now >= settled:
            return None
        hosts = {rep.name for rep in self.plan.replicas if rep.host_only}
        if any(
            pod.phase in ("Running", "Pending") and name not in hosts
            for name, pod in self.live.items()
        ):
            return settled
        return None

    def _deadline(self) -> datetime | None:
        seconds = self.run_policy.active_deadline_seconds
        if seconds is None or self.status.start_time is None:
            return None
        return self.status.start_time + timedelta(seconds=seconds)

    def _all_up(self) -> bool:
        """Every replica has a pod that is Running or already Succeeded, one at least Running."""
        phases = [
            pod.phase if (pod := self.live.get(rep.name)) is not None else "Missing"
            for rep in self.plan.replicas
        ]
        return "Running" in phases and all(p in ("Running", "Succeeded") for p in phases)

    # --- transitions -----------------------------------------------------------------------

    def _succeed(self) -> None:
        if self.attempts is not None:
            self.attempts = replace(self.attempts, succeeded=self.attempts.succeeded + 1)
        if self.status.completion_time is None:
            self.status.completion_time = self.now
        self._condition(
            ConditionType.SUCCEEDED,
            "True",
            "Succeeded",
            f"{self.kind} {self.ref} successfully completed.",
        )
        self._finish(kill=frozenset())

    def _fail(self, *, reason: str, message: str, kill_active: bool) -> None:
        if self.attempts is not None:
            self.attempts = replace(self.attempts, failed=self.attempts.failed + 1)
        if self.status.completion_time is None:
            self.status.completion_time = self.now
        kill: frozenset[str] = frozenset()
        if kill_active:
            kill = frozenset(
                pod.name for pod in self._existing_pods() if pod.phase in _ACTIVE_PHASES
            )
            for rs in self.status.replica_statuses.values():
                rs.active = 0
        if set_condition(
            self.status, ConditionType.FAILED, "True", reason=reason, message=message, now=self.now
        ):
            self._event("Warning", reason, message)
        self._finish(kill=kill)

    def _finish(self, *, kill: frozenset[str]) -> None:
        """Clean up after the verdict: cleanPodPolicy, PodGroup, then the TTL."""
        policy = self._clean_pod_policy()
        kept: set[str] = set()
        deleted: set[str] = set()
        for pod in self._existing_pods():
            if pod.name in kill:
                self._delete_pod(pod, "stopped: the job failed")
                deleted.add(pod.name)
            elif policy == CleanPodPolicy.ALL or (
                policy == CleanPodPolicy.RUNNING and pod.phase in _ACTIVE_PHASES
            ):
                self._delete_pod(pod, f"cleanPodPolicy {policy.value}")
                deleted.add(pod.name)
            else:
                kept.add(pod.name)
        # A pod and its service share a name. Under None, only services of pods stopped
        # just now go (upstream deletes nothing); otherwise a service lives only as long
        # as the pod it fronts is kept.
        for service in sorted(self.observed.services):
            if (policy == CleanPodPolicy.NONE and service in deleted) or (
                policy != CleanPodPolicy.NONE and service not in kept
            ):
                self._delete_service(service)
        self._delete_pod_group()
        if self.status.is_true(ConditionType.SUCCEEDED):
            # As upstream: replicas still active when the job succeeded count as succeeded.
            for rs in self.status.replica_statuses.values():
                rs.succeeded += rs.active
                rs.active = 0
        self._expire()

    def _clean_pod_policy(self) -> CleanPodPolicy:
        """The cleanPodPolicy to apply now: once the Plan's ``clean_after`` has passed since
        the job finished (until then None, and a pass is asked for at that time)."""
        policy = self.run_policy.clean_pod_policy or CleanPodPolicy.NONE
        finished_at = terminal_time(self.status)
        if policy == CleanPodPolicy.NONE or not self.plan.clean_after or finished_at is None:
            return policy
        due = finished_at + self.plan.clean_after
        if self.now >= due:
            return policy
        self.requeue.append(due - self.now)
        return CleanPodPolicy.NONE

    def _expire(self) -> None:
        ttl = self.run_policy.ttl_seconds_after_finished
        finished_at = terminal_time(self.status)
        if ttl is None or finished_at is None:
            return
        expiry = finished_at + timedelta(seconds=ttl)
        if self.now >= expiry:
            self.actions.append(DeleteJob())
            self._event(
                "Normal",
                "TTLExpired",
                f"{self.kind} {self.ref} finished {ttl}s ago "
                "(ttlSecondsAfterFinished): deleting it.",
            )
        else:
            self.requeue.append(expiry - self.now)

    def _suspend(self) -> None:
        for pod in self._existing_pods():
            # A child controller resumes as a new one, with its full backoff limit.
            self._delete_pod(pod, "the job is suspended", anew=True)
        for service in sorted(self.observed.services):
            self._delete_service(service)
        self._delete_pod_group()
        for rs in self.status.replica_statuses.values():
            rs.active = 0
        message = f"{self.kind} {self.ref} is suspended."
        if self.status.is_true(ConditionType.RUNNING):
            self._condition(ConditionType.RUNNING, "False", "Suspended", message, event=False)
        if not self.status.is_true(ConditionType.SUSPENDED):
            self._condition(ConditionType.SUSPENDED, "True", "Suspended", message)

    def _resume_if_suspended(self) -> None:
        if self.status.is_true(ConditionType.SUSPENDED):
            self._condition(
                ConditionType.SUSPENDED, "False", "Resumed", f"{self.kind} {self.ref} is resumed."
            )
            self.status.start_time = self.now

    def _note_in_place_restarts(self) -> None:
        """One event per replica type whose pods restarted in place since the last status."""
        recorded = self.status.replica_statuses
        for rtype, count in self._live_restarts().items():
            old = recorded.get(rtype)
            # What the last status counted for the pods alive now: _settle_retired has
            # already moved the restarts of pods that vanished since into the retired part.
            seen = old.restarts - self.retired.get(rtype, 0) if old is not None else 0
            if count <= seen:
                continue
            pods = [
                pod
                for pod in self._existing_pods()
                if pod.replica_type == rtype and pod.restart_count > 0
            ]
            details = "; ".join(
                f"{describe_failure(pod)}, restarted in place ({pod.restart_count} restarts)"
                for pod in pods
            )
            self._event(
                "Warning",
                f"{self.kind}Restarting",
                f"{self.kind} {self.ref}: {rtype} replica(s) restarted: {details}.",
            )

    def _restart(self, retry: list[tuple[ReplicaPlan, ObservedPod]]) -> None:
        """Delete retryable failures; a later reconcile creates them again once gone."""
        if not retry:
            return
        for _, pod in retry:
            self._delete_pod(pod, f"restarting: {describe_failure(pod)}", recreate=True)
        details = "; ".join(describe_failure(pod) for _, pod in retry)
        message = (
            f"{self.kind} {self.ref} is restarting because "
            f"{_count_by_type(retry)} replica(s) failed: {details}."
        )
        reason = f"{self.kind}Restarting"
        set_condition(
            self.status,
            ConditionType.RESTARTING,
            "True",
            reason=reason,
            message=message,
            now=self.now,
        )
        # Each recreation is a new decision, so it gets its event even when the job was
        # already Restarting (the DeletePod next to it keeps the pass non-idempotent anyway).
        self._event("Warning", reason, message)

    def _judge_readiness(self) -> None:
        """A service is Ready while enough of its serving replicas are up and ready."""
        policy = self.plan.outcome
        if not isinstance(policy, ServicePolicy):
            return
        counts = []
        enough = True
        for replica_type, needed in policy.needed:
            ready = sum(
                1
                for rep in self.plan.of_type(replica_type)
                if (pod := self.live.get(rep.name)) is not None
                and pod.phase == "Running"
                and pod.ready
            )
            enough = enough and ready >= needed
            counts.append(f"{ready} of {needed} {replica_type} replica(s) needed are ready")
        counted = ", ".join(counts)
        if enough:
            self._condition(
                ConditionType.READY, "True", "Ready", f"{self.kind} {self.ref} is ready: {counted}."
            )
        elif self.status.condition(ConditionType.READY) is not None:
            self._condition(
                ConditionType.READY,
                "False",
                "NotReady",
                f"{self.kind} {self.ref} is not ready: {counted}.",
            )


__all__ = ["OUTCOME_TIE", "REPLICA_SET", "REPORT_GRACE", "ReplicaSet"]
