"""MPI on the local substrate: OpenMPI's settings for one machine, and every job in exec
mode (there is no sshd here; the local supervisor serves exec, as the Kubernetes API does
in a cluster)."""

from __future__ import annotations

from kubemill.api import Job
from kubemill.engines.mpi.api import REMOTE_SHELL_ANNOTATION, MPIJob, RemoteShell
from kubemill.frameworks import mpi_launch

LOCAL_ENV = mpi_launch.LOCAL_ENV
"""What OpenMPI needs on the local substrate, on every replica (``LocalSupport.env``)."""


def run_locally(job: Job) -> Job:
    """The MPIJob as the local substrate runs it: always in exec mode (no sshd here; the
    supervisor serves exec). Other jobs unchanged."""
    if not isinstance(job, MPIJob) or job.remote_shell is RemoteShell.EXEC:
        return job
    local = job.model_copy(deep=True)
    local.metadata.annotations[REMOTE_SHELL_ANNOTATION] = RemoteShell.EXEC.value
    return local


__all__ = ["LOCAL_ENV", "run_locally"]
