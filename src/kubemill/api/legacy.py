"""Older manifest versions, converted to the current models.

``kubeflow.org/v1alpha1`` TFJob (the seed's form): a ``replicaSpecs`` *list* whose items
name their ``tfReplicaType`` (MASTER, WORKER, PS) and put ``restartPolicy`` in the pod
template. MASTER becomes Chief, as the v1 API recommends; the pod-level restart policy
becomes the replica's restart policy; a non-default ``tfPort`` becomes the tfjob-port.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kubemill.api.base import KubeModel
from kubemill.api.common import ReplicaSpec, RestartPolicy
from kubemill.api.errors import FieldError
from kubemill.api.kube import ContainerPort, ObjectMeta, PodTemplateSpec
from kubemill.api.tensorflow import TFJob, TFJobSpec

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
