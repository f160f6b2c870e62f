"""Job kinds as typed models: shared vocabulary, each kind's API, loading and validation.

Loading takes a kind table (:class:`KindTable`); :mod:`kubemill.kinds` binds it to the
registered kinds, so load manifests with ``kubemill.kinds.load``/``load_one``.

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
from kubemill.api.kinds import ApiVersion, KindApi, KindTable
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
from kubemill.api.mpi import (
    MPI_REPLICA_TYPES,
    MPIJOB,
    REMOTE_SHELL_ANNOTATION,
    LauncherCreationPolicy,
    MPIImplementation,
    MPIJob,
    MPIJobSpec,
    RemoteShell,
)
from kubemill.api.pytorch import PYTORCHJOB, ElasticPolicy, PyTorchJob, PyTorchJobSpec
from kubemill.api.tensorflow import TFJOB, TFJob, TFJobSpec

__all__ = [
    "API_VERSION",
    "GROUP",
    "MPIJOB",
    "MPI_REPLICA_TYPES",
    "PYTORCHJOB",
    "REMOTE_SHELL_ANNOTATION",
    "STOP_ANNOTATION",
    "TFJOB",
    "VERSION",
    "ApiVersion",
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
    "KindApi",
    "KindTable",
    "LauncherCreationPolicy",
    "MPIImplementation",
    "MPIJob",
    "MPIJobSpec",
    "ManifestError",
    "ObjectFieldSelector",
    "ObjectMeta",
    "PodSpec",
    "PodTemplateSpec",
    "PyTorchJob",
    "PyTorchJobSpec",
    "RemoteShell",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
    "TFJob",
    "TFJobSpec",
]
