"""KubeRay's fields kubemill accepts in its schema but does not honour (yet), in one table.

Each row names a model and a field of it, when a value is refused (given at all, set to
something true, above one, naming another controller), and the refusal's message and hint,
as the loader reports them at the field's path. :func:`refusal_validator` is the one
validator that reads the table, one per model (``_refused = refusal_validator("...")``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationInfo, field_validator

from kubemill.api.base import refused

KUBERAY_OPERATOR = "ray.io/kuberay-operator"
"""KubeRay's own ``managedBy``: kubemill stands in for it."""


def given(value: Any) -> bool:
    """Refused whenever the field is there."""
    return value is not None


def truthy(value: Any) -> bool:
    """Refused when set to something (true, a non-empty value): false or empty is fine."""
    return bool(value)


def above_one(value: Any) -> bool:
    return value is not None and value > 1


def another_controller(value: Any) -> bool:
    return value not in (None, "", KUBERAY_OPERATOR)


@dataclass(frozen=True)
class Refusal:
    """One refused field: ``model.field`` (the Python names), refused ``when`` its value
    says so, with ``message`` (``{value!r}`` in it is the value given) and ``hint``."""

    model: str
    field: str
    message: str
    hint: str
    when: Callable[[Any], bool] = given


_CONTROLLER = "remove managedBy, or set it to 'ray.io/kuberay-operator'"

REFUSALS: tuple[Refusal, ...] = (
    # RayCluster
    Refusal(
        "HeadGroupSpec",
        "head_service",
        "a customised head Service is not supported yet",
        "remove headService; serviceType picks the Service's type",
    ),
    Refusal(
        "HeadGroupSpec",
        "enable_ingress",
        "an ingress for the dashboard is not supported yet",
        "remove it",
        truthy,
    ),
    Refusal(
        "ScaleStrategy",
        "workers_to_delete",
        "workersToDelete is the in-tree autoscaler's, which kubemill does not run",
        "remove it; lower the group's replicas instead",
        truthy,
    ),
    Refusal(
        "WorkerGroupSpec",
        "idle_timeout_seconds",
        "idleTimeoutSeconds is the in-tree autoscaler's, which kubemill does not run",
        "remove it",
    ),
    Refusal(
        "WorkerGroupSpec",
        "num_of_hosts",
        "multi-host worker groups (numOfHosts above 1) are not supported yet",
        "remove numOfHosts or set it to 1",
        above_one,
    ),
    Refusal(
        "WorkerGroupSpec",
        "suspend",
        "suspending one worker group is not supported yet",
        "set the group's replicas to 0, or suspend the whole cluster (spec.suspend)",
        truthy,
    ),
    Refusal(
        "RayClusterSpec",
        "enable_in_tree_autoscaling",
        "the in-tree autoscaler is not supported yet: each worker group runs its replicas",
        "remove enableInTreeAutoscaling (or set it to false) and set each group's replicas",
        truthy,
    ),
    Refusal(
        "RayClusterSpec",
        "autoscaler_options",
        "the in-tree autoscaler is not supported yet",
        "remove it",
    ),
    Refusal(
        "RayClusterSpec",
        "head_service_annotations",
        "annotations on the head Service are not supported yet",
        "remove it",
        truthy,
    ),
    Refusal(
        "RayClusterSpec",
        "gcs_fault_tolerance_options",
        "GCS fault tolerance (an external Redis) is not supported yet",
        "remove it",
    ),
    Refusal(
        "RayClusterSpec",
        "managed_by",
        "{value!r} names another controller, and kubemill reconciles every RayCluster it is given",
        _CONTROLLER,
        another_controller,
    ),
    # RayJob
    Refusal(
        "RayJobSpec",
        "schedule",
        "a cron schedule for a RayJob is not supported yet",
        "remove it",
        truthy,
    ),
    Refusal(
        "RayJobSpec",
        "deletion_strategy",
        "deletionStrategy is not supported yet",
        "remove it; shutdownAfterJobFinishes and ttlSecondsAfterFinished decide",
    ),
    Refusal(
        "RayJobSpec",
        "managed_by",
        "{value!r} names another controller, and kubemill reconciles every RayJob it is given",
        _CONTROLLER,
        another_controller,
    ),
)
"""Every refused field of the Ray models."""


def refusal_validator(model: str) -> Any:
    """The validator of ``model``'s refused fields (:data:`REFUSALS`): assigned in the
    model's class body, it refuses each at its own field path."""
    rows = {row.field: row for row in REFUSALS if row.model == model}
    assert rows, f"no refused field of {model}"

    def check(cls: type, value: Any, info: ValidationInfo) -> Any:
        del cls
        row = rows[str(info.field_name)]
        if row.when(value):
            raise refused(row.message.format(value=value), row.hint)
        return value

    return field_validator(*rows)(check)


__all__ = [
    "KUBERAY_OPERATOR",
    "REFUSALS",
    "Refusal",
    "above_one",
    "another_controller",
    "given",
    "refusal_validator",
    "truthy",
]
