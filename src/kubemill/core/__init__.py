"""The pure reconciler: (job, Plan, observed, now) -> (actions, status). No I/O here.

The curated public surface; the modules behind it are private.
"""

from kubemill.core.conditions import set_condition
from kubemill.core.model import (
    Action,
    ChildKind,
    CreateChild,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeleteChild,
    DeleteJob,
    DeletePod,
    DeletePodGroup,
    DeleteService,
    Halt,
    Observed,
    ObservedChild,
    ObservedPod,
    ObservedPodGroup,
    PodPhase,
    ReconcileResult,
    RecordEvent,
    RenderedFile,
    WriteFiles,
)
from kubemill.core.policy import is_retryable_exit_code, pod_restart_policy
from kubemill.core.reconcile import (
    GANG_SCHEDULERS,
    INTERRUPTED,
    OUTCOME_TIE,
    REPORT_GRACE,
    ReconcileOptions,
    describe_failure,
    reconcile,
    short_name,
)
from kubemill.core.service import reconcile_service

__all__ = [
    "GANG_SCHEDULERS",
    "INTERRUPTED",
    "OUTCOME_TIE",
    "REPORT_GRACE",
    "Action",
    "ChildKind",
    "CreateChild",
    "CreateObject",
    "CreatePod",
    "CreatePodGroup",
    "CreateService",
    "DeleteChild",
    "DeleteJob",
    "DeletePod",
    "DeletePodGroup",
    "DeleteService",
    "Halt",
    "Observed",
    "ObservedChild",
    "ObservedPod",
    "ObservedPodGroup",
    "PodPhase",
    "ReconcileOptions",
    "ReconcileResult",
    "RecordEvent",
    "RenderedFile",
    "WriteFiles",
    "describe_failure",
    "is_retryable_exit_code",
    "pod_restart_policy",
    "reconcile",
    "reconcile_service",
    "set_condition",
    "short_name",
]
