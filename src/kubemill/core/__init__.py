"""The pure reconciler: (job, Plan, observed, now) -> (actions, status). No I/O here.

The curated public surface; the modules behind it are private.
"""

from kubemill.core.conditions import set_condition
from kubemill.core.model import (
    Action,
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeleteJob,
    DeletePod,
    DeletePodGroup,
    DeleteService,
    Halt,
    Observed,
    ObservedPod,
    ObservedPodGroup,
    PodPhase,
    ReconcileResult,
    RecordEvent,
)
from kubemill.core.policy import is_retryable_exit_code, pod_restart_policy
from kubemill.core.reconcile import (
    GANG_SCHEDULERS,
    INTERRUPTED,
    ReconcileOptions,
    describe_failure,
    reconcile,
    short_name,
)

__all__ = [
    "GANG_SCHEDULERS",
    "INTERRUPTED",
    "Action",
    "CreatePod",
    "CreatePodGroup",
    "CreateService",
    "DeleteJob",
    "DeletePod",
    "DeletePodGroup",
    "DeleteService",
    "Halt",
    "Observed",
    "ObservedPod",
    "ObservedPodGroup",
    "PodPhase",
    "ReconcileOptions",
    "ReconcileResult",
    "RecordEvent",
    "describe_failure",
    "is_retryable_exit_code",
    "pod_restart_policy",
    "reconcile",
    "set_condition",
    "short_name",
]
