"""Frameworks: what every engine's planner shares (the Plan types, in
:mod:`kubemill.frameworks.plan`, and the replica builders); each engine's planner, which
turns a job into a :class:`Plan`, lives in its folder
(``kubemill.engines.<engine>.framework``). Which framework plans which kind is the registry's
business (:func:`kubemill.kinds.plan_for`).

The names below load on first use, not when a submodule is imported: importing
``kubemill.frameworks.plan`` does not load the job models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.frameworks._common import (
        PlanError,
        ReplicaSlot,
        build_replicas,
        env,
        replica_plan,
    )
    from kubemill.frameworks.controlled import ChildController
    from kubemill.frameworks.plan import (
        LABEL_JOB_NAME,
        LABEL_JOB_ROLE,
        LABEL_OPERATOR,
        LABEL_PREFIX,
        LABEL_REPLICA_INDEX,
        LABEL_REPLICA_TYPE,
        OPERATOR_NAME,
        Endpoint,
        Framework,
        Network,
        OutcomeRule,
        Plan,
        ReplicaPlan,
        ServicePolicy,
        StatusExtension,
        StatusView,
        SuccessPolicy,
        decided_by,
        replica_name,
        service_fields,
    )
    from kubemill.frameworks.plan_parts import (
        AccessPlan,
        AccessRule,
        ExposedService,
        FilePlan,
        FileSet,
        FileSource,
        ForeignPods,
        HostListing,
        NetworkPolicyPlan,
        ObservedPodView,
        PackagedProgram,
        RandomToken,
        RerunPolicy,
        RunRecord,
        RunRecordReader,
        ServiceCluster,
        ServicePort,
        ServiceView,
        SshKeyPart,
        submission_id,
        submitted_spec,
    )
    from kubemill.frameworks.remote import (
        Attempts,
        AttemptsReader,
        RemoteReport,
        RemoteRun,
        RemoteVerdict,
        RemoteVerdictRule,
        RunRetry,
        SecretFile,
    )

__all__ = [
    "LABEL_JOB_NAME",
    "LABEL_JOB_ROLE",
    "LABEL_OPERATOR",
    "LABEL_PREFIX",
    "LABEL_REPLICA_INDEX",
    "LABEL_REPLICA_TYPE",
    "OPERATOR_NAME",
    "AccessPlan",
    "AccessRule",
    "Attempts",
    "AttemptsReader",
    "ChildController",
    "Endpoint",
    "ExposedService",
    "FilePlan",
    "FileSet",
    "FileSource",
    "ForeignPods",
    "Framework",
    "HostListing",
    "Network",
    "NetworkPolicyPlan",
    "ObservedPodView",
    "OutcomeRule",
    "PackagedProgram",
    "Plan",
    "PlanError",
    "RandomToken",
    "RemoteReport",
    "RemoteRun",
    "RemoteVerdict",
    "RemoteVerdictRule",
    "ReplicaPlan",
    "ReplicaSlot",
    "RerunPolicy",
    "RunRecord",
    "RunRecordReader",
    "RunRetry",
    "SecretFile",
    "ServiceCluster",
    "ServicePolicy",
    "ServicePort",
    "ServiceView",
    "SshKeyPart",
    "StatusExtension",
    "StatusView",
    "SuccessPolicy",
    "build_replicas",
    "decided_by",
    "env",
    "replica_name",
    "replica_plan",
    "service_fields",
    "submission_id",
    "submitted_spec",
]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A public name, from the submodule that holds it (loaded now, once)."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.frameworks import _common, plan

        # plan offers the names of plan_parts too (importing it only then).
        for module in (_common, plan):
            if hasattr(module, name):
                return _found(name, getattr(module, name))
        # Imported only for a name of theirs: a job that runs no remote run and no replica
        # through a child controller plans without making their dataclasses.
        from kubemill.frameworks import controlled, remote

        for module in (remote, controlled):
            if hasattr(module, name):
                return _found(name, getattr(module, name))
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def _found(name: str, value: Any) -> Any:
        globals()[name] = value
        return value
