"""The TFJob kind (``kubemill.dev/v1``), field for field as Kubeflow's ``kubeflow.org/v1``."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from kubemill.api.base import KubeModel, refused
from kubemill.api.common import Job, ReplicaSpec, RestartPolicy, RunPolicy
from kubemill.api.defaults import (
    apply_job_defaults,
    normalise_replica_keys,
)

TF_REPLICA_TYPES = ("Chief", "Master", "PS", "Worker", "Evaluator")


class TFJobSpec(KubeModel):
    """What a TFJob asks for."""

    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    success_policy: Literal["", "AllWorkers"] | None = None
    tf_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    enable_dynamic_worker: bool | None = None
    """Refused when true. Upstream then gives each replica a sparse TF_CONFIG *and* keeps
    the job running when workers fail for good, so workers can come and go; the core
    cannot keep a job running through permanent failures yet, and half of the feature
    (a sparse TF_CONFIG whose failing workers still fail the job) would mislead."""

    @field_validator("tf_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, TF_REPLICA_TYPES)

    @field_validator("enable_dynamic_worker")
    @classmethod
    def _no_dynamic_workers(cls, value: bool | None) -> bool | None:
        if value:
            raise refused(
                "not supported yet: kubemill cannot keep a TFJob running when its workers "
                "fail, which dynamic workers need",
                "remove enableDynamicWorker: every replica then gets the full TF_CONFIG "
                "cluster, and a failed worker fails the job",
            )
        return value


class TFJob(Job):
    """A distributed TensorFlow job: Chief/Master, PS, Worker and Evaluator replicas."""

    KIND: ClassVar[str] = "TFJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = TF_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = "tensorflow"
    DEFAULT_PORT_NAME: ClassVar[str] = "tfjob-port"
    DEFAULT_PORT: ClassVar[int] = 2222
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    REPLICA_SPECS_FIELD: ClassVar[str] = "tfReplicaSpecs"

    kind: str = "TFJob"
    spec: TFJobSpec = Field(default_factory=TFJobSpec)

    @model_validator(mode="after")
    def _defaults(self) -> TFJob:
        apply_job_defaults(self)
        if self.spec.success_policy is None:
            self.spec.success_policy = ""
        return self

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.tf_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy
