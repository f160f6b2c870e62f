"""A runtime's replicated jobs as the steps kubemill realises (upstream's names), the order
they start in (``dependsOn``), and what a runtime uses that kubemill does not run, each at
the runtime's own field path."""

from __future__ import annotations

from typing import Literal

from kubemill.api.common import RestartPolicy
from kubemill.api.errors import FieldError
from kubemill.engines.trainer.api.jobset import ReplicatedJob
from kubemill.engines.trainer.api.policies import RUN_POLICIES, mpi_runtime_errors
from kubemill.engines.trainer.api.runtime import TrainingRuntime

DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"
TRAINER_NODE = "trainer-node"
"""The nodes' replicated job in upstream's ``mpi-distributed`` runtime (``node`` elsewhere)."""
LAUNCHER = "launcher"
STEPS = (DATASET_INITIALIZER, MODEL_INITIALIZER, NODE, TRAINER_NODE, LAUNCHER)
"""The replicated jobs kubemill realises, by upstream's names, in start order."""
MPI_NODES = (NODE, TRAINER_NODE)
JOB_RESTART_POLICIES = {"Never": RestartPolicy.NEVER, "OnFailure": RestartPolicy.ON_FAILURE}
"""The restart policies a batch Job's pod template may name (others are refused)."""


def runtime_errors(runtime: TrainingRuntime, ref: str) -> list[FieldError]:
    """What the runtime uses that kubemill does not run (yet), each at the runtime's own
    field path, reported at the TrainJob's ``spec.runtimeRef.name``."""
    where = f"{runtime.kind} {ref}"
    found: list[tuple[str, str, str]] = []
    policy = runtime.spec.ml_policy
    framework = policy.framework if policy is not None else None
    if framework not in (None, *RUN_POLICIES):
        found.append(
            (
                f"spec.mlPolicy.{framework}",
                f"kubemill does not run the {framework} policy yet",
                "name a torch, xgboost, jax or mpi runtime (torch-distributed, "
                "xgboost-distributed, jax-distributed, mpi-distributed)",
            )
        )
    found += mpi_runtime_errors(runtime, LAUNCHER, MPI_NODES)
    spec = runtime.spec.template.spec
    names = [job.name for job in spec.replicated_jobs]
    gates: dict[str, tuple[str, str]] = {}
    """The first dependsOn status seen, and where: every other must be the same."""
    for i, job in enumerate(spec.replicated_jobs):
        path = f"spec.template.spec.replicatedJobs[{i}]"
        if job.name not in STEPS:
            found.append(
                (
                    f"{path}.name",
                    f"kubemill realises the steps {', '.join(STEPS)}, not {job.name!r}",
                    "rename the replicated job to the step it runs",
                )
            )
        for d, dependency in enumerate(job.depends_on or []):
            where_dep = f"{path}.dependsOn[{d}]"
            if dependency.status == "Complete" and framework == "mpi":
                found.append(
                    (
                        f"{where_dep}.status",
                        "not supported yet with the mpi policy: its launcher starts once "
                        "the hosts run, and kubemill starts every dependent step by one rule",
                        "remove dependsOn, or depend on Ready",
                    )
                )
            first = gates.setdefault("status", (dependency.status, where_dep))
            if dependency.status != first[0]:
                found.append(
                    (
                        f"{where_dep}.status",
                        f"not supported: {dependency.status} here but {first[0]} at "
                        f"{first[1]}; kubemill starts every dependent step by one rule",
                        f"depend on {first[0]} everywhere",
                    )
                )
            if dependency.name == job.name or dependency.name not in names:
                found.append(
                    (
                        f"{where_dep}.name",
                        f"{dependency.name!r} is no other replicated job of the template",
                        "name one of " + ", ".join(n for n in names if n != job.name),
                    )
                )
        policy_written = job.template.spec.template.spec.restart_policy
        if policy_written is not None and policy_written not in JOB_RESTART_POLICIES:
            found.append(
                (
                    f"{path}.template.spec.template.spec.restartPolicy",
                    f"{policy_written!r} is not a Job's restart policy",
                    "Never or OnFailure",
                )
            )
        for c, container in enumerate(job.template.spec.template.spec.containers):
            if not container.image:
                found.append(
                    (
                        f"{path}.template.spec.template.spec.containers[{c}].image",
                        "required field is missing",
                        "name an image",
                    )
                )
        if not job.template.spec.template.spec.containers:
            found.append(
                (f"{path}.template.spec.template.spec.containers", "no container", "add one")
            )
    if start_stages(spec.replicated_jobs) is None:
        found.append(
            (
                "spec.template.spec.replicatedJobs",
                "the replicated jobs depend on each other in a circle (dependsOn)",
                "let one of them start first",
            )
        )
    success = spec.success_policy
    if success is not None:
        targets = success.target_replicated_jobs or []
        if len(targets) != 1 or targets[0] not in names:
            found.append(
                (
                    "spec.template.spec.successPolicy.targetReplicatedJobs",
                    "kubemill judges success by one replicated job of the template",
                    "name one replicated job",
                )
            )
    if not spec.replicated_jobs:
        found.append(
            ("spec.template.spec.replicatedJobs", "no replicated job", "add the trainer's")
        )
    return [
        FieldError("spec.runtimeRef.name", f"{where}: {path}: {message}", hint)
        for path, message, hint in found
    ]


def start_stages(jobs: list[ReplicatedJob]) -> dict[str, int] | None:
    """Each replicated job's start stage: 0 without ``dependsOn``, else one past the job it
    depends on (whose replicas must be Ready first); None if the dependencies go round."""
    by_name = {job.name: job for job in jobs}
    stages: dict[str, int] = {}
    for job in jobs:
        chain: list[str] = []
        current: ReplicatedJob | None = job
        while current is not None and current.name not in stages:
            if current.name in chain:
                return None
            chain.append(current.name)
            parents = current.depends_on or []
            current = by_name.get(parents[0].name) if parents else None
        base = stages[current.name] + 1 if current is not None else 0
        for offset, name in enumerate(reversed(chain)):
            stages[name] = base + offset
    return stages


__all__ = [
    "DATASET_INITIALIZER",
    "JOB_RESTART_POLICIES",
    "LAUNCHER",
    "MODEL_INITIALIZER",
    "MPI_NODES",
    "NODE",
    "STEPS",
    "TRAINER_NODE",
    "runtime_errors",
    "start_gate",
    "start_stages",
]


def start_gate(jobs: list[ReplicatedJob]) -> Literal["running", "ready", "succeeded"]:
    """When a dependent replicated job starts: once the one it depends on is Complete
    (every replica succeeded), or Ready (running and ready); without dependsOn, at once
    (stage 0 is all there is)."""
    statuses = {d.status for job in jobs for d in job.depends_on or []}
    if "Complete" in statuses:
        return "succeeded"
    return "ready" if statuses else "running"
