"""Kubeflow Trainer v2 on the local substrate.

A TrainJob of the mpi policy reaches its hosts through kubemill's exec agent (there is no
sshd here; the supervisor serves exec, as the Kubernetes API does in a cluster), its hosts
only hosting what mpirun starts in them, with OpenMPI's settings for one machine on every
replica.

An initializer step whose container brings no command of its own (upstream's initializer
images, which download ``storageUri``) is run by kubemill when the storage is on this
machine (``file://`` or an absolute path): it copies the file or directory into the job's
workspace, ``dataset/`` or ``model/``, where on Kubernetes the runtime's shared volume is
(upstream's ``/workspace``). Every step is told the local directories
(``KUBEMILL_DATASET_DIR``, ``KUBEMILL_MODEL_DIR``); the trainer waits for the copy as for
any initializer (``dependsOn`` ``Complete``). An initializer whose ``storageUri`` is on the
network (``hf://``, ``s3://``) cannot run here: kubemill reaches nothing but loopback; it is
refused at its field path before anything starts, as is a local one that does not exist or a
scheme kubemill does not know.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kubemill.api import EnvVar, FieldError, Job
from kubemill.engines.trainer.api.spec import DatasetInitializer, ModelInitializer
from kubemill.engines.trainer.api.trainjob import DATASET_INITIALIZER, MODEL_INITIALIZER, TrainJob
from kubemill.engines.trainer.framework import mpi_plan
from kubemill.frameworks import mpi_launch
from kubemill.frameworks.plan import Network, Plan, ReplicaPlan

LOCAL_ENV = mpi_launch.LOCAL_ENV
"""OpenMPI's settings for one machine (``LocalSupport.env``; other frameworks ignore them)."""

REMOTE_SCHEMES = ("hf://", "s3://", "gs://", "http://", "https://")
"""Storage an initializer would download from (this machine sends nothing off loopback)."""
FILE_SCHEME = "file://"
WORKSPACE = "/workspace"
"""Where upstream's runtimes mount the volume the initializers fill and the trainer reads."""
WORKSPACE_SET = "-workspace"
"""The job's workspace directory's name (after the job's), among its local files."""
STEP_DIRS = {
    DATASET_INITIALIZER: ("dataset", "spec.initializer.dataset"),
    MODEL_INITIALIZER: ("model", "spec.initializer.model"),
}
"""An initializer step -> its directory in the workspace and its TrainJob field."""
DIR_ENV = {"dataset": "KUBEMILL_DATASET_DIR", "model": "KUBEMILL_MODEL_DIR"}
COPY = (
    "import os, shutil, sys\n"
    "source, target = sys.argv[1], sys.argv[2]\n"
    "os.makedirs(target, exist_ok=True)\n"
    "if os.path.isdir(source):\n"
    "    shutil.copytree(source, target, dirs_exist_ok=True)\n"
    "else:\n"
    "    shutil.copy2(source, target)\n"
    "print(f'copied {source} into {target}', flush=True)\n"
)
"""The copy an initializer step runs locally; the paths are its arguments, never code."""


def run_locally(job: Job, plan: Plan, network: Network) -> Plan:
    """The Plan as this machine runs it: an mpi TrainJob in exec mode, local storage copied
    by the initializer steps that bring no command; others unchanged."""
    if not isinstance(job, TrainJob):
        return plan
    if job.framework == "mpi":
        plan = mpi_plan(job, network, exec_mode=True)
    if job.spec.initializer is None:
        return plan
    workspace = network.files_path(f"{job.name}{WORKSPACE_SET}", WORKSPACE)
    dirs = [
        EnvVar(name=DIR_ENV[name], value=f"{workspace}/{name}") for name, _ in STEP_DIRS.values()
    ]
    return replace(
        plan, replicas=tuple(_local_replica(job, rep, workspace, dirs) for rep in plan.replicas)
    )


def _local_replica(
    job: TrainJob, rep: ReplicaPlan, workspace: str, dirs: list[EnvVar]
) -> ReplicaPlan:
    rep = replace(rep, env=(*rep.env, *dirs))
    source = local_source(_settings(job, rep.replica_type))
    if source is None:
        return rep
    template = rep.template.model_copy(deep=True)
    container = next(c for c in template.spec.containers if c.name == rep.container)
    if container.command:
        return rep  # the runtime's own initializer: it runs as written
    name, _ = STEP_DIRS[rep.replica_type]
    container.command = ["python", "-c", COPY, source, f"{workspace}/{name}"]
    container.args = None
    return replace(rep, template=template)


def _settings(job: TrainJob, step: str) -> DatasetInitializer | ModelInitializer | None:
    initializer = job.spec.initializer
    if initializer is None or step not in STEP_DIRS:
        return None
    return initializer.dataset if step == DATASET_INITIALIZER else initializer.model


def local_source(settings: DatasetInitializer | ModelInitializer | None) -> str | None:
    """The path on this machine a ``file://`` or absolute ``storageUri`` names, else None."""
    uri = settings.storage_uri if settings is not None else None
    if uri is None:
        return None
    if uri.startswith("/"):
        return uri
    # file:///path or file://localhost/path (the core stays free of I/O libraries: no urllib)
    for prefix in (FILE_SCHEME, f"{FILE_SCHEME}localhost"):
        rest = uri[len(prefix) :] if uri.startswith(prefix) else ""
        if rest.startswith("/") and len(rest) > 1:
            return rest
    return None


def refusals(job: Job, exists: Callable[[str], bool]) -> list[FieldError]:
    """Why a TrainJob cannot run on this machine: an initializer fetching from the network,
    or local storage that is not there, or storage kubemill cannot reach (for an initializer
    step kubemill runs; the runtime's own command takes its storageUri as it likes)."""
    if not isinstance(job, TrainJob) or job.spec.initializer is None:
        return []
    errors: list[FieldError] = []
    for step, (_, field) in STEP_DIRS.items():
        settings = _settings(job, step)
        uri = settings.storage_uri if settings is not None else None
        if uri is None:
            continue
        path = f"{field}.storageUri"
        if uri.startswith(REMOTE_SCHEMES):
            errors.append(
                FieldError(
                    path,
                    f"{uri!r} would be downloaded, and the local substrate reaches nothing "
                    "but this machine",
                    "fetch it beforehand and give its local path (file:///path), or run the "
                    "TrainJob on Kubernetes",
                )
            )
            continue
        if not _copied_by_kubemill(job, step):
            continue
        source = local_source(settings)
        if source is None:
            errors.append(
                FieldError(
                    path,
                    f"{uri!r}: the local substrate copies file:// URIs and absolute paths only",
                    "give a path on this machine (file:///path), or run the TrainJob on Kubernetes",
                )
            )
        elif not exists(source):
            errors.append(
                FieldError(
                    path,
                    f"{source} does not exist on this machine",
                    "put the dataset or model there, or give the path where it is",
                )
            )
    return errors


def _copied_by_kubemill(job: TrainJob, step: str) -> bool:
    """Whether kubemill runs the step's copy locally: its container brings no command."""
    spec = job.replica_specs.get(step)
    if spec is None:
        return False
    wanted = job.main_container_name(step)
    return any(c.name == wanted and not c.command for c in spec.template.spec.containers)


__all__ = [
    "DIR_ENV",
    "LOCAL_ENV",
    "REMOTE_SCHEMES",
    "WORKSPACE",
    "local_source",
    "refusals",
    "run_locally",
]
