"""The XGBoostJob kind (``kubemill.dev/v1``), field for field as Kubeflow's
``kubeflow.org/v1`` as training-operator v1 served it: one Master, which runs XGBoost's
collective tracker and trains as rank 0, and Workers."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from kubemill.api.common import ReplicaSpec, RestartPolicy
from kubemill.api.defaults import normalise_replica_keys
from kubemill.api.errors import FieldError
from kubemill.api.kinds import KindApi
from kubemill.api.training import ReplicaMapJob, ReplicaMapSpec

XGBOOST_REPLICA_TYPES = ("Master", "Worker")


class XGBoostJobSpec(ReplicaMapSpec):
    """What an XGBoostJob asks for."""

    xgb_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)

    @field_validator("xgb_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, XGBOOST_REPLICA_TYPES)


class XGBoostJob(ReplicaMapJob):
    """A distributed XGBoost job: one Master (the tracker, rank 0) and N Workers."""

    KIND: ClassVar[str] = "XGBoostJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = XGBOOST_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = "xgboost"
    DEFAULT_PORT_NAME: ClassVar[str] = "xgboostjob-port"
    DEFAULT_PORT: ClassVar[int] = 9999
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    REPLICA_SPECS_FIELD: ClassVar[str] = "xgbReplicaSpecs"

    kind: str = "XGBoostJob"
    spec: XGBoostJobSpec = Field(default_factory=XGBoostJobSpec)

    def kind_errors(self) -> list[FieldError]:
        """A Master is required, and there is one (upstream's validation)."""
        field = f"spec.{self.REPLICA_SPECS_FIELD}"
        if "Master" not in self.replica_specs:
            return [
                FieldError(
                    f"{field}.Master",
                    "a Master replica is required",
                    "add Master (replicas: 1): it runs the tracker the workers connect to",
                )
            ]
        if self.replica_count("Master") != 1:
            return [
                FieldError(f"{field}.Master.replicas", "must be 1", "an XGBoostJob has one Master")
            ]
        return []


XGBOOSTJOB = KindApi(
    model=XGBoostJob,
    plural="xgboostjobs",
    short_names=("xgbj",),
    upstream=("kubeflow.org/v1",),
    schema_overrides={"spec.xgbReplicaSpecs": {"minProperties": 1}},
)
"""The XGBoostJob kind's API: versions and CRD."""
