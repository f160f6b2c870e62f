"""Small builders for core tests: jobs from YAML, Plans by hand, pods, a fake substrate.

The framework modules are not used on purpose: the core must be testable with Plans built
directly, and a framework bug must not hide (or cause) a core failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import yaml

from kubemill.api import Job, JobStatus
from kubemill.core import (
    Action,
    ChildKind,
    CreateChild,
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeleteChild,
    DeleteJob,
    DeletePod,
    DeletePodGroup,
    DeleteService,
    Observed,
    ObservedChild,
    ObservedPod,
    ObservedPodGroup,
    PodPhase,
    ReconcileOptions,
    ReconcileResult,
    RecordEvent,
    WriteFiles,
    reconcile,
)
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    OutcomeRule,
    Plan,
    ReplicaPlan,
    SuccessPolicy,
    replica_name,
)
from kubemill.kinds import lifecycle_for, load_one

T0 = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """``seconds`` after the tests' epoch T0."""
    return T0 + timedelta(seconds=seconds)


def tfjob(
    *,
    name: str = "x",
    chief: int = 0,
    workers: int = 2,
    ps: int = 0,
    restart: str = "Never",
    run_policy: Mapping[str, Any] | None = None,
) -> Job:
    """A TFJob manifest loaded through :func:`kubemill.api.load_one`."""
    specs: dict[str, Any] = {}
    for rtype, count in (("Chief", chief), ("PS", ps), ("Worker", workers)):
        if count:
            specs[rtype] = {
                "replicas": count,
                "restartPolicy": restart,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "tensorflow", "image": "python", "command": ["python"]}
                        ]
                    }
                },
            }
    doc: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"tfReplicaSpecs": specs},
    }
    if run_policy:
        doc["spec"]["runPolicy"] = dict(run_policy)
    return load_one(yaml.safe_dump(doc))


def pytorchjob(*, name: str = "p", workers: int = 1, restart: str = "OnFailure") -> Job:
    """A PyTorchJob with a Master and ``workers`` Workers, from a YAML string."""
    text = f"""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: {name}}}
spec:
  pytorchReplicaSpecs:
    Master:
      restartPolicy: {restart}
      template: {{spec: {{containers: [{{name: pytorch, image: python, command: [python]}}]}}}}
    Worker:
      replicas: {workers}
      restartPolicy: {restart}
      template: {{spec: {{containers: [{{name: pytorch, image: python, command: [python]}}]}}}}
"""
    return load_one(text)


def plan_for(
    job: Job,
    *,
    stages: Mapping[str, int] | None = None,
    outcome: OutcomeRule | None = None,
    services: bool = True,
    **extra: Any,
) -> Plan:
    """A Plan with one ReplicaPlan per replica of ``job`` (no env: the core ignores it).

    ``extra`` goes to :class:`Plan` as it is (files, access, exposed, foreign, ...).
    """
    replicas: list[ReplicaPlan] = []
    for rtype in job.REPLICA_TYPES:
        spec = job.replica_specs.get(rtype)
        if spec is None:
            continue
        for index in range(job.replica_count(rtype)):
            name = replica_name(job.name, rtype, index)
            replicas.append(
                ReplicaPlan(
                    replica_type=rtype,
                    index=index,
                    name=name,
                    template=spec.template,
                    container=job.DEFAULT_CONTAINER,
                    env=(),
                    ports={},
                    restart_policy=job.restart_policy(rtype),
                    labels={
                        LABEL_JOB_NAME: job.name,
                        LABEL_REPLICA_TYPE: rtype.lower(),
                        LABEL_REPLICA_INDEX: str(index),
                    },
                    stage=(stages or {}).get(rtype, 0),
                    host=f"{name}.{job.name}",
                )
            )
    if outcome is None:
        types = set(job.replica_specs)
        deciding = next((t for t in ("Chief", "Master") if t in types), "Worker")
        outcome = SuccessPolicy(deciding, "first")
    return Plan(
        kind=job.KIND,
        name=job.name,
        namespace=job.namespace,
        replicas=tuple(replicas),
        outcome=outcome,
        services=services,
        **extra,
    )


def pod(
    plan: Plan,
    name: str,
    phase: PodPhase = "Running",
    *,
    exit_code: int | None = None,
    restart_count: int = 0,
    deleting: bool = False,
    reason: str = "",
    finished: float | None = None,
) -> ObservedPod:
    """The observed pod of one Plan replica (``name`` is the short ``worker-1`` form)."""
    rtype_lower, _, index = name.rpartition("-")
    rep = next(
        (
            r
            for r in plan.replicas
            if r.replica_type.lower() == rtype_lower and r.index == int(index)
        ),
        None,
    )
    if rep is None:  # a pod the Plan no longer has (scaled down): still observable
        return ObservedPod(
            name=replica_name(plan.name, rtype_lower, int(index)),
            replica_type=rtype_lower.capitalize(),
            index=int(index),
            phase=phase,
            exit_code=exit_code,
            restart_count=restart_count,
            deleting=deleting,
            reason=reason,
            finished=None if finished is None else at(finished),
        )
    if exit_code is None and phase == "Succeeded":
        exit_code = 0
    return ObservedPod(
        name=rep.name,
        replica_type=rep.replica_type,
        index=rep.index,
        phase=phase,
        exit_code=exit_code,
        restart_count=restart_count,
        deleting=deleting,
        reason=reason,
        uid=f"uid-{rep.name}",
        finished=None if finished is None else at(finished),
    )


def all_pods(plan: Plan, phase: PodPhase = "Running") -> tuple[ObservedPod, ...]:
    """Every replica's pod in one phase."""
    return tuple(pod(plan, f"{r.replica_type.lower()}-{r.index}", phase) for r in plan.replicas)


def with_status(job: Job, status: JobStatus) -> Job:
    """The job as it would be read back after ``status`` was recorded."""
    return job.model_copy(update={"status": status})


def non_events(actions: Iterable[Action]) -> list[Action]:
    """The actions that change the world (everything but events)."""
    return [a for a in actions if not isinstance(a, RecordEvent)]


def events(actions: Iterable[Action]) -> list[RecordEvent]:
    return [a for a in actions if isinstance(a, RecordEvent)]


@dataclass
class FakeSubstrate:
    """Applies actions the way a substrate would, instantly and without surprises."""

    plan: Plan
    pods: dict[str, ObservedPod] = field(default_factory=dict)
    services: set[str] = field(default_factory=set)
    pod_group: ObservedPodGroup | None = None
    pod_group_phase: str = "Inqueue"
    deleted: bool = False
    start_phase: Literal["Pending", "Running"] = "Pending"
    children: dict[tuple[ChildKind, str], str] = field(default_factory=dict)
    """ConfigMaps, Secrets and access objects that exist, with their recorded digest."""
    writes: list[WriteFiles] = field(default_factory=list)
    """Every WriteFiles applied, in order."""
    creations: int = 0
    """Pods created so far: each new pod's uid is its own, as a real substrate's."""

    def observed(self) -> Observed:
        return Observed(
            pods=tuple(self.pods[n] for n in sorted(self.pods)),
            services=frozenset(self.services),
            pod_group=self.pod_group,
            children=tuple(ObservedChild(k, n, d) for (k, n), d in sorted(self.children.items())),
        )

    def apply(self, actions: Iterable[Action]) -> None:
        for action in actions:
            if isinstance(action, CreatePod):
                assert action.name not in self.pods, f"{action.name} created twice"
                rep = self.plan.replica(action.name)
                self.creations += 1
                self.pods[action.name] = ObservedPod(
                    name=rep.name,
                    replica_type=rep.replica_type,
                    index=rep.index,
                    phase=self.start_phase,
                    uid=f"uid-{rep.name}-new{self.creations}",
                )
            elif isinstance(action, DeletePod):
                self.pods.pop(action.name, None)
            elif isinstance(action, CreateService):
                self.services.add(action.name)
            elif isinstance(action, DeleteService):
                self.services.discard(action.name)
            elif isinstance(action, CreatePodGroup):
                self.pod_group = ObservedPodGroup(action.name, self.pod_group_phase)
            elif isinstance(action, DeletePodGroup):
                self.pod_group = None
            elif isinstance(action, DeleteJob):
                self.deleted = True
            elif isinstance(action, WriteFiles):
                kind: ChildKind = "Secret" if action.secret else "ConfigMap"
                assert action.update == ((kind, action.name) in self.children)
                self.children[(kind, action.name)] = action.digest
                self.writes.append(action)
            elif isinstance(action, CreateChild):
                assert (action.kind, action.name) not in self.children, "created twice"
                self.children[(action.kind, action.name)] = ""
            elif isinstance(action, DeleteChild):
                del self.children[(action.kind, action.name)]

    def set_phase(self, short: str, phase: PodPhase, **changes: Any) -> None:
        rtype_lower, _, index = short.rpartition("-")
        name = replica_name(self.plan.name, rtype_lower, int(index))
        self.pods[name] = replace(self.pods[name], phase=phase, **changes)


def step(
    job: Job,
    plan: Plan,
    substrate: FakeSubstrate,
    now: datetime,
    options: ReconcileOptions | None = None,
) -> tuple[Job, ReconcileResult]:
    """Reconcile once, apply the actions, and return the job with its new status."""
    result = reconcile(
        job,
        plan,
        substrate.observed(),
        now,
        options=options or ReconcileOptions(),
        lifecycle=lifecycle_for(job.KIND),
    )
    substrate.apply(result.actions)
    return with_status(job, result.status), result
