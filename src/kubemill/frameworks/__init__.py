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
    Endpoint,
    FilePlan,
    Framework,
    Network,
    Plan,
    ReplicaPlan,
    SuccessPolicy,
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
    "Endpoint",
    "FilePlan",
    "Framework",
    "Network",
    "NoFrameworkError",
    "Plan",
    "PlanError",
    "PyTorch",
    "ReplicaPlan",
    "SuccessPolicy",
    "TensorFlow",
    "framework_for",
    "plan_for",
    "replica_name",
]
