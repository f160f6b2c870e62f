"""The pure reconciler: (job, Plan, observed, now) -> (actions, status). No I/O here.

The curated public surface; the modules behind it are private.

The names below load on first use, each from the module that holds it, not when the
package is imported: a command that needs one lifecycle (``kubemill run --detach`` of a
PyTorch job: the replica set's) loads neither the controllers' rules nor the other
lifecycles (rerun, service cluster).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.core.conditions import set_condition
    from kubemill.core.controlled import controlled_pod, with_controllers
    from kubemill.core.controller import (
        ControllerAction,
        ControllerContext,
        ControllerResult,
        ControllerRules,
        CreateRun,
        DeleteRun,
        ObservedRun,
        SampleRun,
    )
    from kubemill.core.lifecycle import Lifecycle
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
        ObservedCondition,
        ObservedController,
        ObservedPod,
        ObservedPodGroup,
        ObservedProgress,
        PodPhase,
        ReconcileResult,
        RecordEvent,
        Refusal,
        RenderedFile,
        SubmitRemote,
        UpdateObject,
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
    from kubemill.core.replicaset import REPLICA_SET
    from kubemill.core.rerun import RERUN
    from kubemill.core.service import SERVICE_CLUSTER, reconcile_service, stopped_body

_WHERE = {
    "Action": "model",
    "ChildKind": "model",
    "ControllerAction": "controller",
    "ControllerContext": "controller",
    "ControllerResult": "controller",
    "ControllerRules": "controller",
    "CreateChild": "model",
    "CreateObject": "model",
    "CreatePod": "model",
    "CreatePodGroup": "model",
    "CreateRun": "controller",
    "CreateService": "model",
    "DeleteChild": "model",
    "DeleteJob": "model",
    "DeletePod": "model",
    "DeletePodGroup": "model",
    "DeleteRun": "controller",
    "DeleteService": "model",
    "GANG_SCHEDULERS": "lifecycle",
    "Halt": "model",
    "INTERRUPTED": "lifecycle",
    "Lifecycle": "lifecycle",
    "OUTCOME_TIE": "replicaset",
    "Observed": "model",
    "ObservedChild": "model",
    "ObservedCondition": "model",
    "ObservedController": "model",
    "ObservedPod": "model",
    "ObservedPodGroup": "model",
    "ObservedProgress": "model",
    "ObservedRun": "controller",
    "PodPhase": "model",
    "REPLICA_SET": "replicaset",
    "REPORT_GRACE": "replicaset",
    "RERUN": "rerun",
    "ReconcileOptions": "lifecycle",
    "ReconcileResult": "model",
    "RecordEvent": "model",
    "Refusal": "model",
    "RenderedFile": "model",
    "SERVICE_CLUSTER": "service",
    "SampleRun": "controller",
    "SubmitRemote": "model",
    "UpdateObject": "model",
    "WriteFiles": "model",
    "controlled_pod": "controlled",
    "describe_failure": "jobpass",
    "is_retryable_exit_code": "policy",
    "pod_restart_policy": "policy",
    "reconcile_service": "service",
    "set_condition": "conditions",
    "short_name": "jobpass",
    "stopped_body": "service",
    "with_controllers": "controlled",
}
"""Each public name's module, in this package: where it is defined (the names
:mod:`kubemill.core.reconcile` passes on are taken from their own modules, since
``kubemill.core.reconcile`` is the function)."""

__all__ = [
    "GANG_SCHEDULERS",
    "INTERRUPTED",
    "OUTCOME_TIE",
    "REPLICA_SET",
    "REPORT_GRACE",
    "RERUN",
    "SERVICE_CLUSTER",
    "Action",
    "ChildKind",
    "ControllerAction",
    "ControllerContext",
    "ControllerResult",
    "ControllerRules",
    "CreateChild",
    "CreateObject",
    "CreatePod",
    "CreatePodGroup",
    "CreateRun",
    "CreateService",
    "DeleteChild",
    "DeleteJob",
    "DeletePod",
    "DeletePodGroup",
    "DeleteRun",
    "DeleteService",
    "Halt",
    "Lifecycle",
    "Observed",
    "ObservedChild",
    "ObservedCondition",
    "ObservedController",
    "ObservedPod",
    "ObservedPodGroup",
    "ObservedProgress",
    "ObservedRun",
    "PodPhase",
    "ReconcileOptions",
    "ReconcileResult",
    "RecordEvent",
    "Refusal",
    "RenderedFile",
    "SampleRun",
    "SubmitRemote",
    "UpdateObject",
    "WriteFiles",
    "controlled_pod",
    "describe_failure",
    "is_retryable_exit_code",
    "pod_restart_policy",
    "reconcile",
    "reconcile_service",
    "set_condition",
    "short_name",
    "stopped_body",
    "with_controllers",
]


if not TYPE_CHECKING:
    # Loaded now, not on first use: importing the submodule of the same name (as anything
    # of the reconciler does) would make ``kubemill.core.reconcile`` that module.
    from kubemill.core.reconcile import reconcile

    def __getattr__(name: str) -> Any:
        """A public name, from the submodule that holds it (loaded now, once). The imports
        are spelled out: the core loads nothing by name (importlib is not for it)."""
        match _WHERE.get(name):
            case "conditions":
                from kubemill.core import conditions as home
            case "controlled":
                from kubemill.core import controlled as home
            case "controller":
                from kubemill.core import controller as home
            case "jobpass":
                from kubemill.core import jobpass as home
            case "lifecycle":
                from kubemill.core import lifecycle as home
            case "model":
                from kubemill.core import model as home
            case "policy":
                from kubemill.core import policy as home
            case "replicaset":
                from kubemill.core import replicaset as home
            case "rerun":
                from kubemill.core import rerun as home
            case "service":
                from kubemill.core import service as home
            case _:
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(home, name)
        globals()[name] = value
        return value
