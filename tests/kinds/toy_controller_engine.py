"""A toy controller, written as a plugin would be: its API, its rules, one Controller.

A ``ToyFanout`` runs no pods: it keeps ``spec.runs`` runs of the toy replica-set kind
(``ToyCluster``, from ``toy_engine.py``) named ``<name>-0`` .. ``<name>-<runs-1>``, each
made of ``spec.template`` (a ToyCluster's spec), labelled with its name and owned by it;
runs beyond the count (after a scale-down) are deleted. Its status counts the runs by
outcome and is ``Running`` once every run exists. Its rules are a pure decision, run by
the same generic loop as a ScheduledSparkApplication's on both substrates. Nothing in
kubemill names the kind: tests register it (after the toy engine, whose jobs it creates)
with ``KUBEMILL_ENGINES=toy_engine:ENGINE,toy_controller_engine:CONTROLLER``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field
from toy_engine import ToyCluster

from kubemill.api import ConditionType, Job, JobStatus, KindApi, ReplicaSpec, RunPolicy
from kubemill.api.base import KubeModel
from kubemill.core import (
    ControllerAction,
    ControllerContext,
    ControllerResult,
    CreateRun,
    DeleteRun,
    ObservedRun,
    RecordEvent,
    SampleRun,
    set_condition,
)
from kubemill.kinds import Controller, LocalSupport

KIND = "ToyFanout"
RUN_LABEL = "toy.kubemill.dev/fanout"


class ToyFanoutSpec(KubeModel):
    runs: int = Field(default=1, ge=0, le=10)
    template: dict[str, Any] = Field(default_factory=dict)
    """A ToyCluster's spec."""
    suspend: bool = False


class ToyFanoutStatus(JobStatus):
    active_runs: int = 0
    succeeded_runs: int = 0
    failed_runs: int = 0


class ToyFanout(Job):
    KIND: ClassVar[str] = KIND
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True
    SUSPEND_FIELD: ClassVar[tuple[str, ...]] = ("suspend",)

    kind: str = KIND
    spec: ToyFanoutSpec = Field(default_factory=ToyFanoutSpec)
    status: ToyFanoutStatus = Field(default_factory=ToyFanoutStatus)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return {}  # it runs no pods: its runs do

    @property
    def run_policy(self) -> RunPolicy:
        """Only ``suspend`` applies (no new runs while it is set)."""
        return RunPolicy(suspend=self.spec.suspend)

    def run_name(self, index: int) -> str:
        return f"{self.name}-{index}"

    def run(self, index: int) -> ToyCluster:
        """Run ``index``: the template, in this namespace, labelled and owned."""
        meta: dict[str, Any] = {
            "name": self.run_name(index),
            "namespace": self.namespace,
            "labels": {RUN_LABEL: self.name},
        }
        if self.metadata.uid:
            meta["ownerReferences"] = [
                {
                    "apiVersion": self.api_version,
                    "kind": KIND,
                    "name": self.name,
                    "uid": self.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        return ToyCluster.model_validate({"metadata": meta, "spec": self.spec.template})


def _index(fanout: ToyFanout, run: ObservedRun) -> int | None:
    prefix = f"{fanout.name}-"
    digits = run.name[len(prefix) :] if run.name.startswith(prefix) else ""
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True)
class FanoutRules:
    """Keep ``spec.runs`` runs; count them by outcome."""

    run_label: str = RUN_LABEL

    def decide(
        self,
        job: Job,
        runs: Sequence[ObservedRun],
        *,
        now: datetime,
        context: ControllerContext,
    ) -> ControllerResult[JobStatus]:
        del context  # nothing of the substrate is needed
        if not isinstance(job, ToyFanout):
            raise TypeError(f"{job.KIND} {job.name} is not a {KIND}")
        status = job.status.model_copy(deep=True)
        live = {i: r for r in runs if not r.deleting and (i := _index(job, r)) is not None}
        actions: list[ControllerAction] = []
        for index in range(job.spec.runs):
            if index not in live and not job.spec.suspend:
                name = job.run_name(index)
                actions.append(CreateRun(name, None, job.run(index)))
                actions.append(RecordEvent("Normal", "RunCreated", f"created run {name}"))
        for index, run in sorted(live.items()):
            if index >= job.spec.runs:
                actions.append(DeleteRun(run.name, run.uid, "scale"))
                actions.append(RecordEvent("Normal", "RunDeleted", f"deleted run {run.name}"))
        kept = [r for i, r in live.items() if i < job.spec.runs]
        status.active_runs = sum(r.outcome == "active" for r in kept)
        status.succeeded_runs = sum(r.outcome == "succeeded" for r in kept)
        status.failed_runs = sum(r.outcome == "failed" for r in kept)
        if len(kept) == job.spec.runs:
            set_condition(
                status,
                ConditionType.RUNNING,
                "True",
                reason=f"{KIND}Running",
                message=f"{KIND} {job.name} has its {job.spec.runs} run(s).",
                now=now,
            )
        return ControllerResult(tuple(actions), status, None)

    def refuse(self, status: Mapping[str, Any], reason: str) -> ControllerResult[JobStatus]:
        found = ToyFanoutStatus.model_validate(status) if status else ToyFanoutStatus()
        event = RecordEvent("Warning", "FailedValidation", reason)
        return ControllerResult((event,), found, None, refusal=reason)

    def sample_run(self, job: Job) -> SampleRun | None:
        return SampleRun(job.run(0), "spec.template") if isinstance(job, ToyFanout) else None


CONTROLLER = Controller(
    KindApi(model=ToyFanout, plural="toyfanouts", short_names=("tfan",)),
    "ToyCluster",
    "a toy controller registered by a plugin (tests): N runs of the toy replica-set kind",
    FanoutRules(),
    local=LocalSupport(),
)


def manifest(name: str, *, runs: int, template: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"runs": runs, "template": dict(template)},
    }
