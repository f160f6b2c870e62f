"""TrainingRuntime and ClusterTrainingRuntime (``trainer.kubeflow.org/v1alpha1``), field for
field as Kubeflow Trainer v2 defines them: the ML policy (how many nodes, and one framework's
settings), the PodGroup policy (gang scheduling) and the JobSet template.

A runtime runs nothing by itself: a TrainJob names one (``spec.runtimeRef``) and the planner
makes replicas of its template. Which policies the planner runs is the TrainJob's question
(:meth:`~kubemill.engines.trainer.api.trainjob.TrainJob.kind_errors`); here a runtime is
valid or not as upstream's schema and webhook say, plus the JobSet features kubemill
refuses (:mod:`.jobset`). :func:`load_runtime` reads one manifest with every problem at
its field path, as the job loader does for jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from kubemill.api.base import KubeModel, refused
from kubemill.api.errors import FieldError
from kubemill.api.field_errors import parse_errors
from kubemill.api.kube import ObjectMeta
from kubemill.engines.trainer.api.jobset import JobSetTemplateSpec

GROUP = "trainer.kubeflow.org"
API_VERSION = f"{GROUP}/v1alpha1"
TRAINING_RUNTIME = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
RUNTIME_KINDS = (CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME)

NUM_PROC_WORDS = ("auto", "cpu", "gpu")
"""What torchrun's ``--nproc-per-node`` takes besides a number."""


def num_proc_text(raw: Any) -> Any:
    """``numProcPerNode`` as text (``2`` -> ``"2"``), as upstream's IntOrString prints it."""
    return str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw


def check_num_proc(value: str | None) -> str | None:
    """A positive number, or one of :data:`NUM_PROC_WORDS`."""
    if value is None or value in NUM_PROC_WORDS or (value.isdigit() and int(value) > 0):
        return value
    raise PydanticCustomError(
        "kubemill_invalid",
        f"{value!r} is not a number of processes",
        {"hint": "a positive number, or one of " + ", ".join(NUM_PROC_WORDS)},
    )


class TorchElasticPolicy(KubeModel):
    """Elastic torchrun (``--nnodes=min:max``): refused, as upstream does not run it yet."""

    max_restarts: int | None = Field(default=None, ge=0)
    min_nodes: int | None = Field(default=None, ge=1)
    max_nodes: int | None = Field(default=None, ge=1)
    metrics: list[Any] | None = None


class TorchPolicy(KubeModel):
    """PyTorch's settings: processes per node (torchrun's ``--nproc-per-node``)."""

    num_proc_per_node: str | None = None
    elastic_policy: TorchElasticPolicy | None = None

    @field_validator("num_proc_per_node", mode="before")
    @classmethod
    def _as_text(cls, raw: Any) -> Any:
        return num_proc_text(raw)

    @field_validator("num_proc_per_node")
    @classmethod
    def _valid_num_proc(cls, value: str | None) -> str | None:
        return check_num_proc(value)

    @field_validator("elastic_policy")
    @classmethod
    def _not_elastic(cls, value: TorchElasticPolicy | None) -> TorchElasticPolicy | None:
        if value is not None:
            raise refused(
                "not supported: elastic training needs a JobSet that scales, which neither "
                "upstream's Trainer nor kubemill realises yet",
                "remove elasticPolicy and set mlPolicy.numNodes",
            )
        return value


class MPIPolicy(KubeModel):
    """MPI's settings: slots per node, the implementation, where the SSH keys go."""

    num_proc_per_node: int | None = Field(default=None, ge=1)
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH", ""] | None = None
    ssh_auth_mount_path: str | None = None
    run_launcher_as_node: bool | None = None


class JAXPolicy(KubeModel):
    """JAX's settings: none; its presence selects the JAX plugin."""


class XGBoostPolicy(KubeModel):
    """XGBoost's settings: none; its presence selects the XGBoost plugin."""


class FluxPolicy(KubeModel):
    """Flux's settings (an HPC framework): processes per node."""

    num_proc_per_node: str | None = None

    @field_validator("num_proc_per_node", mode="before")
    @classmethod
    def _as_text(cls, raw: Any) -> Any:
        return num_proc_text(raw)


POLICY_FIELDS = ("torch", "mpi", "jax", "xgboost", "flux")


class MLPolicy(KubeModel):
    """How many nodes train, and one framework's settings (at most one)."""

    num_nodes: int | None = Field(default=None, ge=1)
    torch: TorchPolicy | None = None
    mpi: MPIPolicy | None = None
    jax: JAXPolicy | None = None
    xgboost: XGBoostPolicy | None = None
    flux: FluxPolicy | None = None

    @model_validator(mode="after")
    def _one_framework(self) -> MLPolicy:
        chosen = self.frameworks
        if len(chosen) > 1:
            raise PydanticCustomError(
                "kubemill_invalid",
                f"only one framework's policy can be set, found {', '.join(chosen)}",
                {"hint": "keep one of them"},
            )
        return self

    @property
    def frameworks(self) -> list[str]:
        """The policies set (one at most, once validated)."""
        return [name for name in POLICY_FIELDS if getattr(self, name) is not None]

    @property
    def framework(self) -> str | None:
        """The one framework this policy selects, if any."""
        chosen = self.frameworks
        return chosen[0] if chosen else None


class CoschedulingPolicy(KubeModel):
    """Gang scheduling with scheduler-plugins' coscheduling: every node at once."""

    schedule_timeout_seconds: int | None = Field(default=None, ge=0)


class VolcanoPolicy(KubeModel):
    """Gang scheduling with Volcano."""

    network_topology: Any | None = None

    @field_validator("network_topology")
    @classmethod
    def _no_topology(cls, value: Any) -> Any:
        if value is not None:
            raise refused(
                "not supported: kubemill's PodGroups carry no network topology",
                "remove it; the pods are still gang-scheduled",
            )
        return value


class PodGroupPolicy(KubeModel):
    """Which gang scheduler makes every node start together (one of them)."""

    coscheduling: CoschedulingPolicy | None = None
    volcano: VolcanoPolicy | None = None

    @model_validator(mode="after")
    def _one_scheduler(self) -> PodGroupPolicy:
        if self.coscheduling is not None and self.volcano is not None:
            raise PydanticCustomError(
                "kubemill_invalid",
                "only one of coscheduling and volcano can be set",
                {"hint": "keep one of them"},
            )
        return self


class TrainingRuntimeSpec(KubeModel):
    """What a runtime holds: the ML policy, the PodGroup policy and the JobSet template."""

    ml_policy: MLPolicy | None = None
    pod_group_policy: PodGroupPolicy | None = None
    template: JobSetTemplateSpec = Field(default_factory=JobSetTemplateSpec)


class TrainingRuntime(KubeModel):
    """A namespaced runtime: TrainJobs of its namespace may name it."""

    KIND: ClassVar[str] = TRAINING_RUNTIME

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: str = TRAINING_RUNTIME
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec = Field(default_factory=TrainingRuntimeSpec)

    @field_validator("kind")
    @classmethod
    def _own_kind(cls, value: str) -> str:
        if value != cls.KIND:
            raise PydanticCustomError(
                "kubemill_invalid", f"{value!r} is not {cls.KIND}", {"hint": f"kind: {cls.KIND}"}
            )
        return value

    @property
    def name(self) -> str:
        return self.metadata.name or ""


class ClusterTrainingRuntime(TrainingRuntime):
    """A cluster-wide runtime: TrainJobs of every namespace may name it."""

    KIND: ClassVar[str] = CLUSTER_TRAINING_RUNTIME

    kind: str = CLUSTER_TRAINING_RUNTIME


def load_runtime(doc: Mapping[str, Any]) -> tuple[TrainingRuntime | None, list[FieldError]]:
    """One runtime manifest: the runtime, or every problem at its field path."""
    kind = doc.get("kind")
    if kind not in RUNTIME_KINDS:
        return None, [
            FieldError("kind", f"{kind!r} is no training runtime", " or ".join(RUNTIME_KINDS))
        ]
    model = ClusterTrainingRuntime if kind == CLUSTER_TRAINING_RUNTIME else TrainingRuntime
    try:
        runtime = model.model_validate(dict(doc))
    except PydanticValidationError as exc:
        return None, parse_errors(model, exc)
    if not runtime.name:
        return None, [FieldError("metadata.name", "required field is missing", "name it")]
    return runtime, []


__all__ = [
    "API_VERSION",
    "CLUSTER_TRAINING_RUNTIME",
    "GROUP",
    "NUM_PROC_WORDS",
    "RUNTIME_KINDS",
    "TRAINING_RUNTIME",
    "ClusterTrainingRuntime",
    "CoschedulingPolicy",
    "FluxPolicy",
    "JAXPolicy",
    "MLPolicy",
    "MPIPolicy",
    "PodGroupPolicy",
    "TorchElasticPolicy",
    "TorchPolicy",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "VolcanoPolicy",
    "XGBoostPolicy",
    "check_num_proc",
    "load_runtime",
    "num_proc_text",
]
