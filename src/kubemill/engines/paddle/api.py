"""The PaddleJob kind (``kubemill.dev/v1``), field for field as Kubeflow's ``kubeflow.org/v1``
as training-operator v1 served it: Workers only (collective mode, worker 0 the rendezvous
master) or a Master and Workers (parameter-server mode)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel, refused
from kubemill.api.common import ReplicaSpec, RestartPolicy
from kubemill.api.defaults import normalise_replica_keys
from kubemill.api.kinds import KindApi, ScaleSubresource
from kubemill.api.training import ReplicaMapJob, ReplicaMapSpec

PADDLE_REPLICA_TYPES = ("Master", "Worker")


class PaddleElasticPolicy(KubeModel):
    """Elastic training bounds, as upstream's schema has them. Refused as a whole (see
    :attr:`PaddleJobSpec.elastic_policy`)."""

    min_replicas: int | None = Field(default=None, ge=1)
    max_replicas: int | None = Field(default=None, ge=1)
    max_restarts: int | None = Field(default=None, ge=0)
    metrics: list[Any] | None = None


class PaddleJobSpec(ReplicaMapSpec):
    """What a PaddleJob asks for."""

    elastic_policy: PaddleElasticPolicy | None = None
    """Refused. Upstream's schema has it but its controller realises none of it (no env,
    no scaling, no autoscaler): accepting it would promise workers that come and go."""
    paddle_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)

    @field_validator("paddle_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, PADDLE_REPLICA_TYPES)

    @field_validator("elastic_policy")
    @classmethod
    def _not_elastic(cls, value: PaddleElasticPolicy | None) -> PaddleElasticPolicy | None:
        if value is not None:
            raise refused(
                "not supported: kubemill runs a PaddleJob with the replicas it asks for; "
                "nothing would scale it between minReplicas and maxReplicas",
                "remove elasticPolicy and set the Worker replicas you want",
            )
        return value


class PaddleJob(ReplicaMapJob):
    """A distributed PaddlePaddle job: collective Workers, or a Master and Workers."""

    KIND: ClassVar[str] = "PaddleJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = PADDLE_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = "paddle"
    DEFAULT_PORT_NAME: ClassVar[str] = "master"
    DEFAULT_PORT: ClassVar[int] = 36543
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    REPLICA_SPECS_FIELD: ClassVar[str] = "paddleReplicaSpecs"

    kind: str = "PaddleJob"
    spec: PaddleJobSpec = Field(default_factory=PaddleJobSpec)

    @property
    def collective(self) -> bool:
        """Collective mode: no Master, worker 0 is the rendezvous master."""
        return "Master" not in self.replica_specs


PADDLEJOB = KindApi(
    model=PaddleJob,
    plural="paddlejobs",
    short_names=("pdj",),
    upstream=("kubeflow.org/v1",),
    # `kubectl scale paddlejob/NAME --replicas=N` (kubemill's status paths, as for the
    # other kinds: upstream's point at fields its status does not have).
    scale=ScaleSubresource(
        spec_replicas_path=".spec.paddleReplicaSpecs.Worker.replicas",
        status_replicas_path=".status.replicaStatuses.Worker.active",
        label_selector_path=".status.replicaStatuses.Worker.selector",
    ),
    schema_overrides={"spec.paddleReplicaSpecs": {"minProperties": 1}},
)
"""The PaddleJob kind's API: versions and CRD."""
