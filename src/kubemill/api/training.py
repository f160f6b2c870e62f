"""The shape Kubeflow's v1 training kinds share: a spec of ``runPolicy`` and one map of
replica specs (``pytorchReplicaSpecs``, ``jaxReplicaSpecs``, ...), defaulted on load.

An engine's kind subclasses :class:`ReplicaMapJob` with its ClassVars and a spec that
subclasses :class:`ReplicaMapSpec` and declares the map under the name
``REPLICA_SPECS_FIELD`` gives (in snake case); the trio every such kind needs (defaults,
``replica_specs``, ``run_policy``) is written here once.
"""

from __future__ import annotations

from functools import cache
from typing import Self

from pydantic import Field, model_validator
from pydantic.alias_generators import to_snake

from kubemill.api.base import KubeModel
from kubemill.api.common import Job, ReplicaSpec, RunPolicy
from kubemill.api.defaults import apply_job_defaults


class ReplicaMapSpec(KubeModel):
    """The part of a training kind's spec every such kind has."""

    run_policy: RunPolicy = Field(default_factory=RunPolicy)


@cache
def _attribute_of(wire_name: str) -> str:
    # `pytorchReplicaSpecs` -> `pytorch_replica_specs`: the models' aliases are camel case
    # of their attribute names (KubeModel's alias generator), so the reverse is exact.
    return to_snake(wire_name)


class ReplicaMapJob(Job):
    """A training job whose replicas are its spec's one replica map."""

    spec: ReplicaMapSpec = Field(default_factory=ReplicaMapSpec)

    @model_validator(mode="after")
    def _defaults(self) -> Self:
        apply_job_defaults(self)
        return self

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        specs: dict[str, ReplicaSpec] = getattr(self.spec, _attribute_of(self.REPLICA_SPECS_FIELD))
        return specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy
