"""The TFJob kind: its model (``kubemill.dev/v1``, field for field as Kubeflow's
``kubeflow.org/v1``), the seed's ``kubeflow.org/v1alpha1`` form converted to it, and
:data:`TFJOB`, the kind's API description.

``kubeflow.org/v1alpha1`` (the seed's form): a ``replicaSpecs`` *list* whose items name
their ``tfReplicaType`` (MASTER, WORKER, PS) and put ``restartPolicy`` in the pod template.
MASTER becomes Chief, as the v1 API recommends; the pod-level restart policy becomes the
replica's restart policy; a non-default ``tfPort`` becomes the tfjob-port.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from kubemill.api.base import KubeModel, refused
from kubemill.api.common import Job, ReplicaSpec, RestartPolicy, RunPolicy
from kubemill.api.defaults import (
    apply_job_defaults,
    normalise_replica_keys,
)
from kubemill.api.errors import FieldError, child_path
from kubemill.api.kinds import ApiVersion, KindApi
from kubemill.api.kube import ContainerPort, ObjectMeta, PodTemplateSpec

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

    def kind_errors(self) -> list[FieldError]:
        """A TFJob has at most one chief (Chief or Master, not both, one replica)."""
        errors: list[FieldError] = []
        field = f"spec.{self.REPLICA_SPECS_FIELD}"
        chiefs = [t for t in ("Chief", "Master") if t in self.replica_specs]
        if len(chiefs) > 1:
            errors.append(
                FieldError(
                    field, "Chief and Master both given", "a TFJob has one chief; keep Chief"
                )
            )
        for t in chiefs:
            if self.replica_count(t) > 1:
                errors.append(
                    FieldError(
                        f"{child_path(field, t)}.replicas",
                        "must be 0 or 1",
                        "a TFJob has one chief",
                    )
                )
        return errors

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


# --- kubeflow.org/v1alpha1, the seed's form ---------------------------------------------------

V1ALPHA1_TYPES = {"MASTER": "Chief", "WORKER": "Worker", "PS": "PS"}
_POLICIES = {p.value for p in RestartPolicy}


class V1Alpha1TFReplicaSpec(KubeModel):
    """One item of a v1alpha1 ``replicaSpecs`` list."""

    replicas: int | None = Field(default=1, ge=0)
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    tf_port: int | None = Field(default=None, ge=1, le=65535)
    tf_replica_type: str = "MASTER"
    is_default_ps: bool | None = Field(default=None, alias="IsDefaultPS")


class V1Alpha1ChiefSpec(KubeModel):
    """v1alpha1 ``terminationPolicy.chief``: which replica's exit ends the job."""

    replica_name: str = "MASTER"
    replica_index: int = 0


class V1Alpha1TerminationPolicy(KubeModel):
    """v1alpha1 ``terminationPolicy``."""

    chief: V1Alpha1ChiefSpec | None = None


class V1Alpha1TFJobSpec(KubeModel):
    """v1alpha1 TFJob spec."""

    replica_specs: list[V1Alpha1TFReplicaSpec] = Field(default_factory=list)
    termination_policy: V1Alpha1TerminationPolicy | None = None
    runtime_id: str | None = Field(default=None, alias="RuntimeId")
    tensor_board: dict[str, Any] | None = None


class V1Alpha1TFJob(KubeModel):
    """The seed's ``kubeflow.org/v1alpha1`` TFJob."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: V1Alpha1TFJobSpec = Field(default_factory=V1Alpha1TFJobSpec)


def convert_v1alpha1_tfjob(old: V1Alpha1TFJob) -> tuple[TFJob | None, list[FieldError]]:
    """Convert a validated v1alpha1 TFJob to a v1 TFJob and report what cannot be mapped.

    Items that cannot be mapped are left out of the job and reported, so the remaining
    checks still run on the rest; a job comes back whenever one could be built.
    """
    errors: list[FieldError] = []
    specs: dict[str, ReplicaSpec] = {}
    for i, item in enumerate(old.spec.replica_specs):
        path = f"spec.replicaSpecs[{i}].tfReplicaType"
        new_type = V1ALPHA1_TYPES.get(item.tf_replica_type.upper())
        if new_type is None:
            errors.append(
                FieldError(
                    path,
                    f"unknown replica type {item.tf_replica_type!r}",
                    "use one of MASTER, WORKER, PS",
                )
            )
            continue
        if new_type in specs:
            errors.append(FieldError(path, f"{item.tf_replica_type} is listed twice"))
            continue
        template = item.template.model_copy(deep=True)
        pod_policy = template.spec.restart_policy
        template.spec.restart_policy = None
        if pod_policy is not None and pod_policy not in _POLICIES:
            errors.append(
                FieldError(
                    f"spec.replicaSpecs[{i}].template.spec.restartPolicy",
                    f"got {pod_policy!r}",
                    f"use one of {', '.join(p.value for p in RestartPolicy)}",
                )
            )
            pod_policy = None
        restart = RestartPolicy(pod_policy) if pod_policy is not None else None
        if item.tf_port is not None:
            for c in template.spec.containers:
                if c.name == TFJob.DEFAULT_CONTAINER:
                    c.ports = [p for p in c.ports or [] if p.name != TFJob.DEFAULT_PORT_NAME]
                    c.ports.append(
                        ContainerPort(name=TFJob.DEFAULT_PORT_NAME, container_port=item.tf_port)
                    )
        specs[new_type] = ReplicaSpec(
            replicas=item.replicas, template=template, restart_policy=restart
        )
    job = TFJob(
        metadata=old.metadata.model_copy(deep=True),
        spec=TFJobSpec(tf_replica_specs=specs),
    )
    return job, errors


_V1_REPLICAS = "spec.tfReplicaSpecs"


def v1alpha1_path(old: V1Alpha1TFJob, path: str) -> str:
    """Map a field path of the converted v1 TFJob back onto the v1alpha1 manifest.

    ``spec.tfReplicaSpecs.Chief.template...`` becomes ``spec.replicaSpecs[i].template...``
    where item ``i`` is the MASTER; a replica's ``restartPolicy`` lives in the v1alpha1
    pod template. Paths outside the replica specs are the same in both versions.
    """
    if path == _V1_REPLICAS:
        return "spec.replicaSpecs"
    if not path.startswith(_V1_REPLICAS + "."):
        return path
    replica_type, _, rest = path[len(_V1_REPLICAS) + 1 :].partition(".")
    for i, item in enumerate(old.spec.replica_specs):
        if V1ALPHA1_TYPES.get(item.tf_replica_type.upper()) == replica_type:
            if rest == "restartPolicy":
                rest = "template.spec.restartPolicy"
            return f"spec.replicaSpecs[{i}]" + (f".{rest}" if rest else "")
    return path


TFJOB = KindApi(
    model=TFJob,
    plural="tfjobs",
    short_names=("tfj",),
    upstream=("kubeflow.org/v1",),
    legacy={
        "kubeflow.org/v1alpha1": ApiVersion(V1Alpha1TFJob, convert_v1alpha1_tfjob, v1alpha1_path)
    },
    schema_overrides={"spec.tfReplicaSpecs": {"minProperties": 1}},
)
"""The TFJob kind's API: versions, conversions and CRD."""
