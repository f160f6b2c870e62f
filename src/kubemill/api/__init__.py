"""Job kinds as typed models: shared vocabulary, each kind, loading and validation.

The public surface of the API layer; everything else in this package is private.
"""

from kubemill.api.common import (
    API_VERSION,
    GROUP,
    STOP_ANNOTATION,
    VERSION,
    CleanPodPolicy,
    Condition,
    ConditionType,
    Job,
    JobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
)
from kubemill.api.errors import FieldError, ManifestError
from kubemill.api.kube import (
    Container,
    ContainerPort,
    EnvVar,
    EnvVarSource,
    ObjectFieldSelector,
    ObjectMeta,
    PodSpec,
    PodTemplateSpec,
)
from kubemill.api.loader import KINDS, load, load_document, load_one
from kubemill.api.pytorch import ElasticPolicy, PyTorchJob, PyTorchJobSpec
from kubemill.api.tensorflow import TFJob, TFJobSpec

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "STOP_ANNOTATION",
    "VERSION",
    "CleanPodPolicy",
    "Condition",
    "ConditionType",
    "Container",
    "ContainerPort",
    "ElasticPolicy",
    "EnvVar",
    "EnvVarSource",
    "FieldError",
    "Job",
    "JobStatus",
    "ManifestError",
    "ObjectFieldSelector",
    "ObjectMeta",
    "PodSpec",
    "PodTemplateSpec",
    "PyTorchJob",
    "PyTorchJobSpec",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
    "TFJob",
    "TFJobSpec",
    "load",
    "load_document",
    "load_one",
]
