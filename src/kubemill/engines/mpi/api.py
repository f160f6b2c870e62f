"""The MPIJob kind: its model (``kubemill.dev/v1``, field for field as mpi-operator's
``kubeflow.org/v2beta1`` plus kubemill's ``remoteShell`` and v1's ``mainContainer``), the
older ``kubeflow.org/v1`` and ``kubeflow.org/v1alpha2`` forms converted to it, and
:data:`MPIJOB`, the kind's API description.

An MPIJob is one Launcher, which runs ``mpirun``, and N Workers, which host the ranks.
Upstream takes the *first* container of each pod template as the MPI container (v1 lets
``mainContainer`` name another one), and MPI has no framework port: the Launcher reaches
the Workers through a remote shell, not a port kubemill assigns.

**Remote shell.** How ``mpirun`` starts ``orted`` in the Workers:

- ``exec``: an agent execs it into the Worker pod (the seed's design, kubectl-exec style);
- ``ssh``: sshd in the Workers, keys in a per-job Secret (mpi-operator v2beta1's design).

``spec.remoteShell`` chooses in ``kubemill.dev/v1``. For every apiVersion the annotation
``kubemill.dev/remote-shell: exec|ssh`` overrides it (an annotation survives the upstream
CRDs, which drop spec fields they do not know). When neither is given, a
``kubeflow.org/v2beta1`` manifest gets ``ssh`` (what its image expects), every other
version ``exec``.

**Older versions.** ``kubeflow.org/v1`` and the seed's ``kubeflow.org/v1alpha2`` keep
``cleanPodPolicy``, ``backoffLimit`` and ``activeDeadlineSeconds`` at the top of the spec
(moved into ``runPolicy``; a top-level value that disagrees with ``runPolicy``'s is an
error rather than a silent choice), and v1alpha2 names the implementation
``mpiDistribution`` (``IntelMPI`` becomes ``Intel``). Errors found after the conversion
name the field the user wrote.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from kubemill.api.base import KubeModel, refused
from kubemill.api.common import (
    API_VERSION,
    GROUP,
    CleanPodPolicy,
    Job,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
)
from kubemill.api.defaults import apply_job_defaults, normalise_replica_keys
from kubemill.api.errors import FieldError, child_path
from kubemill.api.kinds import ApiVersion, KindApi
from kubemill.api.kube import Container, ObjectMeta

MPI_REPLICA_TYPES = ("Launcher", "Worker")
"""Launcher first: it is listed first; the framework starts the Workers before it."""

UPSTREAM_API_VERSION = "kubeflow.org/v2beta1"
"""mpi-operator's current version: loads unchanged into :class:`MPIJob`."""

REMOTE_SHELL_ANNOTATION = f"{GROUP}/remote-shell"
"""``exec`` or ``ssh``: overrides ``spec.remoteShell`` (and the apiVersion's default)."""

DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"

LAUNCHER_BACKOFF_LIMIT = 6
"""``runPolicy.backoffLimit`` when none is given. Upstream runs the Launcher as a batch Job
and passes the limit on; a batch Job without one retries 6 times (v1alpha2 wrote the 6
into the spec itself). Without it a failing Launcher under OnFailure would restart forever."""

ALLOWED_RESTART_POLICIES = (RestartPolicy.NEVER, RestartPolicy.ON_FAILURE)
"""Upstream validation: the Launcher is a batch Job, which allows only these two, and
mpi-operator holds the Workers to the same."""

_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class MPIImplementation(StrEnum):
    """Which MPI the images carry: decides the hostfile format and the launcher's env."""

    OPENMPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class LauncherCreationPolicy(StrEnum):
    """When the Launcher is created."""

    AT_STARTUP = "AtStartup"
    """Right after the Workers are created (mpirun retries until they answer)."""
    WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"
    """Only once every Worker is Ready."""


class RemoteShell(StrEnum):
    """How mpirun reaches the Workers: exec (an agent execs orted into the Worker pods) or
    ssh (sshd in the Workers, with per-job keys)."""

    EXEC = "exec"
    SSH = "ssh"


def _invalid(message: str, hint: str) -> PydanticCustomError:
    """A field error with our own final message and hint (see :func:`.base.refused`)."""
    return PydanticCustomError(
        "kubemill_invalid", message.replace("{", "{{").replace("}", "}}"), {"hint": hint}
    )


def _check_mount_path(value: str) -> str:
    if not value.startswith("/"):
        raise _invalid(
            f"{value!r} is not an absolute path" if value else "must not be empty",
            f"the directory the SSH keys are mounted at, e.g. {DEFAULT_SSH_AUTH_MOUNT_PATH}",
        )
    return value


class MPIJobSpec(KubeModel):
    """What an MPIJob asks for (``kubeflow.org/v2beta1``'s fields, and kubemill's)."""

    slots_per_worker: int = Field(default=1, ge=1)
    """Processes per Worker: the ``slots`` of each hostfile line."""
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    mpi_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    mpi_implementation: MPIImplementation = MPIImplementation.OPENMPI
    launcher_creation_policy: LauncherCreationPolicy = LauncherCreationPolicy.AT_STARTUP
    run_launcher_as_worker: bool = False
    """The Launcher also hosts ranks: it comes first in the hostfile."""
    ssh_auth_mount_path: str = DEFAULT_SSH_AUTH_MOUNT_PATH
    """Where the per-job SSH keys are mounted (``ssh`` remote shell)."""
    remote_shell: RemoteShell = RemoteShell.EXEC
    """kubemill's own (``kubemill.dev/v1`` only); the annotation
    ``kubemill.dev/remote-shell`` overrides it in every version."""
    main_container: str | None = None
    """The container that runs the MPI code in every template (``kubeflow.org/v1``'s
    field); unset, the first container, as v2beta1 does."""

    @field_validator("mpi_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, MPI_REPLICA_TYPES)

    @field_validator("ssh_auth_mount_path")
    @classmethod
    def _absolute_mount_path(cls, value: str) -> str:
        return _check_mount_path(value)


NOT_IN_V2BETA1 = {
    "remote_shell": (
        "remoteShell",
        f"set the annotation {REMOTE_SHELL_ANNOTATION} instead, which survives the upstream "
        f"CRD, or use apiVersion {API_VERSION}",
    ),
    "main_container": (
        "mainContainer",
        f"v2beta1 runs the first container of each template: put it first, or use "
        f"apiVersion {API_VERSION}",
    ),
}
"""kubemill.dev/v1 fields that mpi-operator's v2beta1 does not have: refused in a v2beta1
manifest, where the upstream CRD would drop them and the job would run differently on a
cluster with mpi-operator's CRD than here. Field -> (wire name, hint)."""


class MPIJob(Job):
    """A distributed MPI job (Horovod, mpi4py, ...): one Launcher running ``mpirun`` over
    N Workers."""

    KIND: ClassVar[str] = "MPIJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = MPI_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = ""
    """None by name: the first container of each template (or ``spec.mainContainer``)."""
    DEFAULT_PORT_NAME: ClassVar[str] = ""
    DEFAULT_PORT: ClassVar[int] = 0
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    """The Workers'; the Launcher's is :attr:`LAUNCHER_RESTART_POLICY`."""
    LAUNCHER_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    REPLICA_SPECS_FIELD: ClassVar[str] = "mpiReplicaSpecs"

    kind: str = "MPIJob"
    spec: MPIJobSpec = Field(default_factory=MPIJobSpec)

    _not_in_source: tuple[str, ...] = PrivateAttr(default=())
    """Spec fields written in a version that does not have them (reported as errors)."""

    @model_validator(mode="after")
    def _defaults(self) -> MPIJob:
        spec = self.spec
        if self.api_version == UPSTREAM_API_VERSION:
            written = spec.model_fields_set
            self._not_in_source = tuple(f for f in NOT_IN_V2BETA1 if f in written)
            if "remote_shell" not in written:
                spec.remote_shell = RemoteShell.SSH
        worker = spec.mpi_replica_specs.get("Worker")
        if worker is not None and "replicas" not in worker.model_fields_set:
            # Upstream defaults Workers to 0, which validation then refuses: an MPIJob
            # says how many Workers it wants.
            worker.replicas = 0
        for rtype, replica in spec.mpi_replica_specs.items():
            if replica.restart_policy is None and rtype in MPI_REPLICA_TYPES:
                replica.restart_policy = self.default_restart_policy(rtype)
            for container in replica.template.spec.containers:
                if container.command is not None and not container.has_command:
                    # The seed's workers say `command: [""]`: no command of their own,
                    # the image's entrypoint (upstream replaced it anyway).
                    container.command = None
        apply_job_defaults(self)
        if spec.run_policy.backoff_limit is None:
            spec.run_policy.backoff_limit = LAUNCHER_BACKOFF_LIMIT
        return self

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.mpi_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy

    def default_restart_policy(self, replica_type: str) -> RestartPolicy:
        """Launcher OnFailure, Workers Never, as mpi-operator defaults them."""
        if replica_type == "Launcher":
            return self.LAUNCHER_RESTART_POLICY
        return self.DEFAULT_RESTART_POLICY

    def main_container_name(self, replica_type: str) -> str:
        """``spec.mainContainer`` if set, else the first container of the template."""
        if self.spec.main_container:
            return self.spec.main_container
        return super().main_container_name(replica_type)

    @property
    def remote_shell(self) -> RemoteShell:
        """How mpirun reaches the Workers: the annotation, else ``spec.remoteShell``.

        An annotation with another value is reported by the loader; a job that got here
        regardless (built in code) falls back to the spec.
        """
        value = self.metadata.annotations.get(REMOTE_SHELL_ANNOTATION)
        if value in {r.value for r in RemoteShell}:
            return RemoteShell(value)
        return self.spec.remote_shell

    @property
    def worker_count(self) -> int:
        """How many Worker replicas (0 without a Worker spec)."""
        return self.replica_count("Worker")

    @property
    def launcher_waits_for_workers(self) -> bool:
        """Whether the Launcher is created only once every Worker is Ready."""
        return self.spec.launcher_creation_policy is LauncherCreationPolicy.WAIT_FOR_WORKERS_READY

    def kind_errors(self) -> list[FieldError]:
        """mpi-operator's validation: one Launcher, Workers >= 1 when given, Never or
        OnFailure, names that make valid Worker hostnames; plus kubemill's own checks."""
        field = f"spec.{self.REPLICA_SPECS_FIELD}"
        errors = self._replica_errors(field)
        errors += self._name_errors()
        errors += self._main_container_errors(field)
        errors += self._remote_shell_errors()
        for name in self._not_in_source:
            wire, hint = NOT_IN_V2BETA1[name]
            errors.append(
                FieldError(
                    f"spec.{wire}",
                    f"not a field of {UPSTREAM_API_VERSION}; kubemill's own",
                    hint,
                )
            )
        return errors

    def _replica_errors(self, field: str) -> list[FieldError]:
        errors: list[FieldError] = []
        specs = self.replica_specs
        if specs and "Launcher" not in specs:
            errors.append(
                FieldError(
                    child_path(field, "Launcher"),
                    "required: an MPIJob has one Launcher",
                    "add a Launcher (replicas: 1) whose container runs mpirun",
                )
            )
        if "Launcher" in specs and self.replica_count("Launcher") != 1:
            errors.append(
                FieldError(
                    f"{child_path(field, 'Launcher')}.replicas",
                    f"must be 1, got {specs['Launcher'].replicas}",
                    "an MPIJob has exactly one Launcher",
                )
            )
        if "Worker" in specs and self.replica_count("Worker") < 1:
            errors.append(
                FieldError(
                    f"{child_path(field, 'Worker')}.replicas",
                    f"must be at least 1, got {specs['Worker'].replicas}",
                    "give the number of Workers, which default to 0 in an MPIJob; "
                    "or remove Worker to run the Launcher alone",
                )
            )
        for rtype, spec in specs.items():
            policy = spec.restart_policy
            if rtype in MPI_REPLICA_TYPES and policy not in ALLOWED_RESTART_POLICIES:
                errors.append(
                    FieldError(
                        f"{child_path(field, rtype)}.restartPolicy",
                        f"{policy.value if policy else policy!r} is not allowed for an MPIJob",
                        "use Never or OnFailure; the Launcher defaults to OnFailure, "
                        "Workers to Never",
                    )
                )
        return errors

    def _name_errors(self) -> list[FieldError]:
        """``<job>-worker-<N-1>`` must be a DNS-1035 label: it names a Worker's host
        under the job's headless service. (Its length is the loader's check.)"""
        name = self.metadata.name or ""
        if not name or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
            return []  # missing or not a DNS label at all: the loader says so
        host = f"{name}-worker-{max(self.worker_count, 1) - 1}"
        if _DNS_1035_LABEL.match(host):
            return []
        return [
            FieldError(
                "metadata.name",
                f"the Workers' hostname {host!r} would not be a valid DNS-1035 label",
                "start the job name with a lowercase letter: it names the job's headless "
                "service and the Workers' hosts",
            )
        ]

    def _main_container_errors(self, field: str) -> list[FieldError]:
        main = self.spec.main_container
        if not main:
            return []
        errors: list[FieldError] = []
        for rtype, spec in self.replica_specs.items():
            names = [c.name for c in spec.template.spec.containers]
            if names and main not in names:
                errors.append(
                    FieldError(
                        f"{child_path(field, rtype)}.template.spec.containers",
                        f"no container is named {main!r} (spec.mainContainer)",
                        f"rename the MPI container {main!r} or change spec.mainContainer;"
                        f" found {', '.join(map(repr, names))}",
                    )
                )
        return errors

    def _remote_shell_errors(self) -> list[FieldError]:
        value = self.metadata.annotations.get(REMOTE_SHELL_ANNOTATION)
        if value is None or value in {r.value for r in RemoteShell}:
            return []
        return [
            FieldError(
                child_path("metadata.annotations", REMOTE_SHELL_ANNOTATION),
                f"got {value!r}",
                "use exec, where an agent execs orted into the Worker pods, or ssh, where "
                "sshd runs in the Workers with keys from a per-job Secret",
            )
        ]

    def main_container(self, replica_type: str) -> Container | None:
        """The MPI container of a replica type (None if the template has none)."""
        name = self.main_container_name(replica_type)
        for container in self.replica_specs[replica_type].template.spec.containers:
            if container.name == name:
                return container
        return None


# --- kubeflow.org/v1 and the seed's kubeflow.org/v1alpha2 --------------------------------------


class V1MPIJobSpec(KubeModel):
    """``kubeflow.org/v1`` MPIJob spec (mpi-operator v1 and the training operator's)."""

    slots_per_worker: int | None = Field(default=None, ge=1)
    clean_pod_policy: CleanPodPolicy | None = None
    backoff_limit: int | None = Field(default=None, ge=0)
    active_deadline_seconds: int | None = Field(default=None, ge=0)
    mpi_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    main_container: str | None = None
    run_policy: RunPolicy | None = None

    @field_validator("mpi_replica_specs", mode="before")
    @classmethod
    def _normalise_keys(cls, raw: Any) -> Any:
        return normalise_replica_keys(raw, MPI_REPLICA_TYPES)


class V1Alpha2Distribution(StrEnum):
    """v1alpha2's ``mpiDistribution`` values."""

    OPENMPI = "OpenMPI"
    INTEL_MPI = "IntelMPI"
    MPICH = "MPICH"


DISTRIBUTIONS = {
    V1Alpha2Distribution.OPENMPI: MPIImplementation.OPENMPI,
    V1Alpha2Distribution.INTEL_MPI: MPIImplementation.INTEL,
    V1Alpha2Distribution.MPICH: MPIImplementation.MPICH,
}


class V1Alpha2MPIJobSpec(V1MPIJobSpec):
    """The seed's ``kubeflow.org/v1alpha2`` MPIJob spec."""

    mpi_distribution: V1Alpha2Distribution | None = None
    launcher_on_master: bool | None = None
    """Refused when true: upstream then put the Launcher on a control-plane node."""

    @field_validator("launcher_on_master")
    @classmethod
    def _no_launcher_on_master(cls, value: bool | None) -> bool | None:
        if value:
            raise refused(
                "not supported: kubemill does not place the Launcher on a control-plane node",
                "remove launcherOnMaster; to choose the Launcher's node, set nodeSelector "
                "and tolerations in its pod template",
            )
        return value


class V1MPIJob(KubeModel):
    """A ``kubeflow.org/v1`` MPIJob."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: V1MPIJobSpec = Field(default_factory=V1MPIJobSpec)


class V1Alpha2MPIJob(KubeModel):
    """The seed's ``kubeflow.org/v1alpha2`` MPIJob."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: V1Alpha2MPIJobSpec = Field(default_factory=V1Alpha2MPIJobSpec)


_MOVED_TO_RUN_POLICY = (
    ("clean_pod_policy", "cleanPodPolicy"),
    ("backoff_limit", "backoffLimit"),
    ("active_deadline_seconds", "activeDeadlineSeconds"),
)
"""Top-level fields of v1/v1alpha2 that live in ``runPolicy`` today: (field, wire name)."""


def convert_mpijob(old: V1MPIJob | V1Alpha2MPIJob) -> tuple[MPIJob | None, list[FieldError]]:
    """Convert a validated v1 or v1alpha2 MPIJob to the current model.

    The top-level run settings move into ``runPolicy`` (where upstream lets ``runPolicy``
    win, a disagreement is reported instead of resolved silently); ``mpiDistribution``
    becomes ``mpiImplementation``. Replica specs are the same in every version.
    """
    errors: list[FieldError] = []
    spec = old.spec
    policy = spec.run_policy.model_copy(deep=True) if spec.run_policy else RunPolicy()
    for name, wire in _MOVED_TO_RUN_POLICY:
        top = getattr(spec, name)
        inner = getattr(policy, name)
        if top is None:
            continue
        if inner is None:
            setattr(policy, name, top)
        elif inner != top:
            errors.append(
                FieldError(
                    f"spec.{wire}",
                    f"{_text(top)} disagrees with spec.runPolicy.{wire} {_text(inner)}",
                    "give it once: keep spec.runPolicy's, which upstream uses, and "
                    f"remove spec.{wire}",
                )
            )
    new_spec: dict[str, Any] = {
        "run_policy": policy,
        "mpi_replica_specs": {
            rtype: replica.model_copy(deep=True)
            for rtype, replica in spec.mpi_replica_specs.items()
        },
        "main_container": spec.main_container,
    }
    if spec.slots_per_worker is not None:
        new_spec["slots_per_worker"] = spec.slots_per_worker
    if isinstance(old, V1Alpha2MPIJob) and old.spec.mpi_distribution is not None:
        new_spec["mpi_implementation"] = DISTRIBUTIONS[old.spec.mpi_distribution]
    job = MPIJob(metadata=old.metadata.model_copy(deep=True), spec=MPIJobSpec(**new_spec))
    return job, errors


def _text(value: Any) -> str:
    return repr(value.value) if isinstance(value, StrEnum) else repr(value)


def legacy_path(old: V1MPIJob | V1Alpha2MPIJob, path: str) -> str:
    """Map a field path of the converted MPIJob back onto the v1/v1alpha2 manifest.

    ``spec.runPolicy.X`` is ``spec.X`` when the user wrote X at the top (and not in
    ``runPolicy``); ``spec.mpiImplementation`` is v1alpha2's ``spec.mpiDistribution``.
    Every other path is the same in all versions.
    """
    spec = old.spec
    for name, wire in _MOVED_TO_RUN_POLICY:
        inner = f"spec.runPolicy.{wire}"
        if path != inner or getattr(spec, name) is None:
            continue
        if spec.run_policy is None or getattr(spec.run_policy, name) is None:
            return f"spec.{wire}"
    if isinstance(old, V1Alpha2MPIJob) and path == "spec.mpiImplementation":
        return "spec.mpiDistribution"
    return path


MPIJOB = KindApi(
    model=MPIJob,
    plural="mpijobs",
    short_names=("mpij",),
    upstream=(UPSTREAM_API_VERSION,),
    legacy={
        "kubeflow.org/v1": ApiVersion(V1MPIJob, convert_mpijob, legacy_path),
        "kubeflow.org/v1alpha2": ApiVersion(V1Alpha2MPIJob, convert_mpijob, legacy_path),
    },
    schema_overrides={
        "spec.mpiReplicaSpecs": {"minProperties": 1},
        # The loader's check, as the API server can say it.
        "spec.sshAuthMountPath": {"pattern": "^/"},
    },
)
"""The MPIJob kind's API: versions, conversions and CRD."""
