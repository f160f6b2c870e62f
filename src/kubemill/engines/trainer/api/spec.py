"""A TrainJob's spec and status models (``trainer.kubeflow.org/v1alpha1``), field for field
as Kubeflow Trainer v2 defines them: which runtime (``runtimeRef``), the initializers' and
the trainer's settings, runtime patches (:mod:`.patches`), ``suspend``,
``activeDeadlineSeconds``, ``managedBy``; the status adds upstream's ``jobsStatus`` to the
shared one. What the spec stands for once its runtime is resolved is
:mod:`.trainjob`'s.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel, refused
from kubemill.api.common import ConditionType, ConditionVocabulary, WordedStatus
from kubemill.api.kube import EnvVar
from kubemill.engines.trainer.api.patches import RuntimePatch
from kubemill.engines.trainer.api.runtime import (
    CLUSTER_TRAINING_RUNTIME,
    GROUP,
    RUNTIME_KINDS,
    check_num_proc,
    num_proc_text,
)

MANAGED_BY_TRAINER = "trainer.kubeflow.org/trainjob-controller"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"

REASONS = {
    "Suspended": ("Suspended", "Resumed"),
    "Complete": ("AllJobsCompleted",),
    "Failed": ("TrainingRuntimeNotSupported", "DeadlineExceeded"),
}
"""Upstream's condition reasons, by condition type (``Complete``'s is the one upstream
carries over from the JobSet it runs)."""

VOCABULARY = ConditionVocabulary(
    words={ConditionType.SUCCEEDED: "Complete"},
    unused=frozenset(
        {
            ConditionType.CREATED,
            ConditionType.RUNNING,
            ConditionType.RESTARTING,
            ConditionType.READY,
        }
    ),
    reasons={
        "TrainJobSuspended": "Suspended",
        "TrainJobResumed": "Resumed",
        "TrainJobSucceeded": "AllJobsCompleted",
    },
)
"""A TrainJob's conditions as upstream words them: ``Suspended``, ``Complete`` (the core's
Succeeded) and ``Failed``, with upstream's reasons; upstream has no Created, Running,
Restarting (nor a service's Ready), so the core writes none (how far a TrainJob got is in
``jobsStatus``)."""

_STORAGE_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://.+|/.*)$")


class RuntimeRef(KubeModel):
    """Which runtime the TrainJob runs: a ClusterTrainingRuntime (default) or a
    TrainingRuntime of the TrainJob's namespace."""

    name: str = Field(min_length=1, max_length=253)
    api_group: str | None = Field(default=GROUP, max_length=253)
    kind: str | None = Field(default=CLUSTER_TRAINING_RUNTIME, max_length=253)

    @field_validator("api_group")
    @classmethod
    def _trainer_group(cls, value: str | None) -> str | None:
        if value not in (None, GROUP):
            raise refused(f"{value!r} serves no training runtimes", f"use {GROUP}")
        return value

    @field_validator("kind")
    @classmethod
    def _runtime_kind(cls, value: str | None) -> str | None:
        if value not in (None, *RUNTIME_KINDS):
            raise refused(
                f"{value!r} is no training runtime kind", "use " + " or ".join(RUNTIME_KINDS)
            )
        return value

    @property
    def runtime_kind(self) -> str:
        return self.kind or CLUSTER_TRAINING_RUNTIME


class SecretRef(KubeModel):
    """A Secret of the TrainJob's namespace, by name."""

    name: str | None = None


class DatasetInitializer(KubeModel):
    """Where the dataset comes from, for the runtime's ``dataset-initializer`` step."""

    storage_uri: str | None = Field(default=None, max_length=2048)
    env: list[EnvVar] | None = Field(default=None, max_length=128)
    secret_ref: SecretRef | None = None

    @field_validator("storage_uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is not None and not _STORAGE_URI.match(value):
            raise refused(
                f"{value!r} is not a URI or an absolute path",
                "e.g. hf://datasets/org/name, s3://bucket/path or /local/path",
            )
        return value


class ModelInitializer(KubeModel):
    """Where the pre-trained model comes from, for the ``model-initializer`` step."""

    storage_uri: str | None = Field(default=None, max_length=2048)
    env: list[EnvVar] | None = Field(default=None, max_length=128)
    secret_ref: SecretRef | None = None


class Initializer(KubeModel):
    """The dataset and model initializers' settings."""

    dataset: DatasetInitializer | None = None
    model: ModelInitializer | None = None


class Trainer(KubeModel):
    """What the trainer step runs, overriding the runtime's ``node`` container."""

    image: str | None = Field(default=None, max_length=500)
    command: list[str] | None = Field(default=None, max_length=128)
    args: list[str] | None = Field(default=None, max_length=128)
    env: list[EnvVar] | None = Field(default=None, max_length=128)
    num_nodes: int | None = Field(default=None, ge=1)
    resources_per_node: dict[str, Any] | None = None
    """A ResourceRequirements (``limits``, ``requests``) for each node's trainer container."""
    num_proc_per_node: str | None = None
    """Processes per node: a number, or for the torch policy ``auto``, ``cpu`` or ``gpu``."""

    @field_validator("num_proc_per_node", mode="before")
    @classmethod
    def _as_text(cls, raw: Any) -> Any:
        return num_proc_text(raw)

    @field_validator("num_proc_per_node")
    @classmethod
    def _valid_num_proc(cls, value: str | None) -> str | None:
        return check_num_proc(value)


class TrainJobSpec(KubeModel):
    """What a TrainJob asks for."""

    runtime_ref: RuntimeRef
    initializer: Initializer | None = None
    trainer: Trainer | None = None
    runtime_patches: list[RuntimePatch] | None = Field(default=None, max_length=16)
    """Upstream's patches of the runtime's template, one per manager (:mod:`.patches`)."""
    suspend: bool | None = False
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    managed_by: str | None = Field(default=None, max_length=253)

    @field_validator("managed_by")
    @classmethod
    def _this_controller(cls, value: str | None) -> str | None:
        if value not in (None, MANAGED_BY_TRAINER):
            raise refused(
                f"not supported: {value!r} names another controller, and kubemill "
                "reconciles every TrainJob it is given",
                f"remove managedBy, or set it to {MANAGED_BY_TRAINER!r}",
            )
        return value


class ChildJobStatus(KubeModel):
    """One replicated job's child Jobs, counted (upstream's ``jobsStatus`` entry)."""

    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class TrainJobStatus(WordedStatus):
    """The shared status, its conditions named as upstream names them (Complete, no
    Created/Running), plus upstream's ``jobsStatus``."""

    VOCABULARY: ClassVar[ConditionVocabulary] = VOCABULARY

    jobs_status: list[ChildJobStatus] = Field(default_factory=list, max_length=100)


__all__ = [
    "MANAGED_BY_TRAINER",
    "MULTIKUEUE",
    "REASONS",
    "VOCABULARY",
    "ChildJobStatus",
    "DatasetInitializer",
    "Initializer",
    "ModelInitializer",
    "RuntimeRef",
    "SecretRef",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
]
