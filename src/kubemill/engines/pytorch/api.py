"""The PyTorchJob kind (``kubemill.dev/v1``), field for field as Kubeflow's ``kubeflow.org/v1``."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel, refused
from kubemill.api.common import ReplicaSpec, RestartPolicy
from kubemill.api.crd import INT_OR_STRING
from kubemill.api.defaults import (
    normalise_replica_keys,
)
from kubemill.api.errors import FieldError
from kubemill.api.kinds import KindApi, ScaleSubresource
from kubemill.api.training import ReplicaMapJob, ReplicaMapSpec

PYTORCH_REPLICA_TYPES = ("Master", "Worker")


class RDZVConf(KubeModel):
    """One extra rendezvous setting (``key=value``) passed to torchrun."""

    key: str
    value: str


class ElasticPolicy(KubeModel):
    """Elastic (torchrun rendezvous) settings; workers may scale between min and max."""

    min_replicas: int | None = Field(default=None, ge=1)
    max_replicas: int | None = Field(default=None, ge=1)
    rdzv_backend: str | None = None
    rdzv_port: int | None = Field(default=None, ge=1, le=65535)
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RDZVConf] | None = None
    standalone: bool | None = None
    n_proc_per_node: int | None = Field(default=None, ge=1)
    max_restarts: int | None = Field(default=None, ge=0)
    metrics: list[Any] | None = None
    """Refused. Upstream creates a HorizontalPodAutoscaler (autoscaling/v2) from these
    metrics, scaling the Workers between minReplicas and maxReplicas; kubemill creates no
    autoscaler yet, and accepting the metrics without one would promise scaling that never
    happens."""

    @field_validator("metrics")
    @classmethod
    def _no_autoscaler(cls, value: list[Any] | None) -> list[Any] | None:
        if value is not None:
            raise refused(
                "not supported yet; kubemill creates no HorizontalPodAutoscaler, so the "
                "workers would never scale on these metrics",
                "remove metrics; the job then runs with the Worker replicas it asks for, "
                "and torchrun still accepts workers between minReplicas and maxReplicas",
            )
        return value


class PyTorchJobSpec(ReplicaMapSpec):
    """What a PyTorchJob asks for."""

    elastic_policy: ElasticPolicy | None = None
    pytorch_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    nproc_per_node: str | None = None
    """``auto``, ``cpu``, ``gpu`` or a number, as torchrun's ``--nproc-per-node``."""

    @field_validator("pytorch_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, PYTORCH_REPLICA_TYPES)

    @field_validator("nproc_per_node", mode="before")
    @classmethod
    def _nproc_as_text(cls, raw: Any) -> Any:
        # Users write `nprocPerNode: 2`; upstream's field is a string.
        return str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw


class PyTorchJob(ReplicaMapJob):
    """A distributed PyTorch job: one Master and N Workers, or elastic Workers only."""

    KIND: ClassVar[str] = "PyTorchJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = PYTORCH_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = "pytorch"
    DEFAULT_PORT_NAME: ClassVar[str] = "pytorchjob-port"
    DEFAULT_PORT: ClassVar[int] = 23456
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    REPLICA_SPECS_FIELD: ClassVar[str] = "pytorchReplicaSpecs"

    kind: str = "PyTorchJob"
    spec: PyTorchJobSpec = Field(default_factory=PyTorchJobSpec)

    @property
    def elastic_bounds(self) -> tuple[int, int]:
        """(min, max) workers of an elastic job, defaulted as upstream does.

        A missing bound takes the other's value; with neither, both are the number of
        Worker replicas. (For a job that is not elastic: the Worker count twice.)
        """
        workers = self.replica_count("Worker")
        policy = self.spec.elastic_policy
        low = policy.min_replicas if policy is not None else None
        high = policy.max_replicas if policy is not None else None
        low = low if low is not None else (high if high is not None else workers)
        high = high if high is not None else low
        return low, high

    def kind_errors(self) -> list[FieldError]:
        """One Master (or elastic workers without one), and elasticPolicy's bounds."""
        errors: list[FieldError] = []
        field = f"spec.{self.REPLICA_SPECS_FIELD}"
        if "Master" in self.replica_specs and self.replica_count("Master") != 1:
            errors.append(
                FieldError(f"{field}.Master.replicas", "must be 1", "a PyTorchJob has one Master")
            )
        elastic = self.spec.elastic_policy
        if "Master" not in self.replica_specs and elastic is None:
            errors.append(
                FieldError(
                    field,
                    "a Master replica is required",
                    "add Master (replicas: 1), or set spec.elasticPolicy for workers only",
                )
            )
        if elastic is not None:
            errors.extend(self._elastic_errors(field))
            if elastic.n_proc_per_node is not None and self.spec.nproc_per_node is not None:
                errors.append(
                    FieldError(
                        "spec.elasticPolicy.nProcPerNode",
                        "deprecated and conflicts with spec.nprocPerNode",
                        "keep spec.nprocPerNode only",
                    )
                )
        return errors

    def _elastic_errors(self, field: str) -> list[FieldError]:
        policy = self.spec.elastic_policy
        assert policy is not None
        if "Worker" not in self.replica_specs:
            return [
                FieldError(
                    f"{field}.Worker",
                    "elasticPolicy needs Worker replicas",
                    "add Worker replicas, or drop spec.elasticPolicy",
                )
            ]
        lo, hi = policy.min_replicas, policy.max_replicas
        if lo is not None and hi is not None and lo > hi:
            return [
                FieldError(
                    "spec.elasticPolicy.minReplicas",
                    f"{lo} is above maxReplicas {hi}",
                    "make minReplicas <= maxReplicas",
                )
            ]
        workers = self.replica_count("Worker")
        low, high = self.elastic_bounds
        if not low <= workers <= high:
            return [
                FieldError(
                    f"{field}.Worker.replicas",
                    f"{workers} is outside the elasticPolicy bounds {low}..{high}",
                    "start with a number of workers between minReplicas and maxReplicas",
                )
            ]
        return []

    @property
    def is_elastic(self) -> bool:
        """Whether torchrun rendezvous (elasticPolicy) is in use."""
        return self.spec.elastic_policy is not None


PYTORCHJOB = KindApi(
    model=PyTorchJob,
    plural="pytorchjobs",
    short_names=("ptj",),
    upstream=("kubeflow.org/v1",),
    # Elastic workers scale: `kubectl scale pytorchjob/NAME --replicas=N`.
    scale=ScaleSubresource(
        spec_replicas_path=".spec.pytorchReplicaSpecs.Worker.replicas",
        status_replicas_path=".status.replicaStatuses.Worker.active",
        label_selector_path=".status.replicaStatuses.Worker.selector",
    ),
    schema_overrides={
        "spec.pytorchReplicaSpecs": {"minProperties": 1},
        # Users write `nprocPerNode: 2`; the model turns it into the string "2".
        "spec.nprocPerNode": {"type": None, INT_OR_STRING: True},
    },
)
"""The PyTorchJob kind's API: versions and CRD."""
