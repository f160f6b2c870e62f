"""Frameworks: one module per engine, each turning a job into a :class:`Plan`.

``plan_for(job, network)`` picks the framework by the job's kind (see
:data:`FRAMEWORKS`); the Plan types live in :mod:`kubemill.frameworks.plan`.
"""

from kubemill.frameworks._common import PlanError
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR,
    LABEL_PREFIX,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    OPERATOR_NAME,
    AccessPlan,
    AccessRule,
    Endpoint,
    ExposedService,
    FilePlan,
    FileSet,
    ForeignPods,
    Framework,
    HostListing,
    Network,
    ObservedPodView,
    OutcomeRule,
    Plan,
    ReplicaPlan,
    ServicePolicy,
    ServicePort,
    StatusExtension,
    StatusView,
    SuccessPolicy,
    decided_by,
    replica_name,
)
from kubemill.frameworks.pytorch import PyTorch
from kubemill.frameworks.registry import FRAMEWORKS, NoFrameworkError, framework_for, plan_for
from kubemill.frameworks.tensorflow import TensorFlow

__all__ = [
    "FRAMEWORKS",
    "LABEL_JOB_NAME",
    "LABEL_JOB_ROLE",
    "LABEL_OPERATOR",
    "LABEL_PREFIX",
    "LABEL_REPLICA_INDEX",
    "LABEL_REPLICA_TYPE",
    "OPERATOR_NAME",
    "AccessPlan",
    "AccessRule",
    "Endpoint",
    "ExposedService",
    "FilePlan",
    "FileSet",
    "ForeignPods",
    "Framework",
    "HostListing",
    "Network",
    "NoFrameworkError",
    "ObservedPodView",
    "OutcomeRule",
    "Plan",
    "PlanError",
    "PyTorch",
    "ReplicaPlan",
    "ServicePolicy",
    "ServicePort",
    "StatusExtension",
    "StatusView",
    "SuccessPolicy",
    "TensorFlow",
    "decided_by",
    "framework_for",
    "plan_for",
    "replica_name",
]
