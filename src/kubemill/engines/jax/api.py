"""The JAXJob kind (``kubemill.dev/v1``), field for field as Kubeflow's ``kubeflow.org/v1``
as training-operator v1 served it: Worker replicas only, each a JAX process, worker 0 the
coordinator."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from kubemill.api.common import ReplicaSpec, RestartPolicy
from kubemill.api.defaults import normalise_replica_keys
from kubemill.api.kinds import KindApi, ScaleSubresource
from kubemill.api.training import ReplicaMapJob, ReplicaMapSpec

JAX_REPLICA_TYPES = ("Worker",)


class JAXJobSpec(ReplicaMapSpec):
    """What a JAXJob asks for."""

    jax_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)

    @field_validator("jax_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, JAX_REPLICA_TYPES)


class JAXJob(ReplicaMapJob):
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
