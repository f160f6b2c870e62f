"""The JAXJob kind (``kubemill.dev/v1``), field for field as Kubeflow's ``kubeflow.org/v1``
as training-operator v1 served it: Worker replicas only, each a JAX process, worker 0 the
coordinator."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from kubemill.api.base import KubeModel
from kubemill.api.common import Job, ReplicaSpec, RestartPolicy, RunPolicy
from kubemill.api.defaults import apply_job_defaults, normalise_replica_keys
from kubemill.api.kinds import KindApi, ScaleSubresource

JAX_REPLICA_TYPES = ("Worker",)


class JAXJobSpec(KubeModel):
    """What a JAXJob asks for."""

    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    jax_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)

    @field_validator("jax_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, JAX_REPLICA_TYPES)


class JAXJob(Job):
    """A multi-process JAX job: N Workers, one JAX process each, worker 0 coordinating."""

    KIND: ClassVar[str] = "JAXJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = JAX_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = "jax"
    DEFAULT_PORT_NAME: ClassVar[str] = "jaxjob-port"
    DEFAULT_PORT: ClassVar[int] = 6666
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    REPLICA_SPECS_FIELD: ClassVar[str] = "jaxReplicaSpecs"

    kind: str = "JAXJob"
    spec: JAXJobSpec = Field(default_factory=JAXJobSpec)

    @model_validator(mode="after")
    def _defaults(self) -> JAXJob:
        apply_job_defaults(self)
        return self

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.jax_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


JAXJOB = KindApi(
    model=JAXJob,
    plural="jaxjobs",
    short_names=("jaxj",),
    upstream=("kubeflow.org/v1",),
    # Upstream's scale subresource: `kubectl scale jaxjob/NAME --replicas=N`.
    scale=ScaleSubresource(
        spec_replicas_path=".spec.jaxReplicaSpecs.Worker.replicas",
        status_replicas_path=".status.replicaStatuses.Worker.active",
        label_selector_path=".status.replicaStatuses.Worker.selector",
    ),
    schema_overrides={"spec.jaxReplicaSpecs": {"minProperties": 1}},
)
"""The JAXJob kind's API: versions and CRD."""
