"""Kubeflow Trainer v2 on the local substrate: a TrainJob of the mpi policy reaches its hosts
through kubemill's exec agent (there is no sshd here; the supervisor serves exec, as the
Kubernetes API does in a cluster), its hosts only hosting what mpirun starts in them, with
OpenMPI's settings for one machine on every replica. Other TrainJobs run as planned.

An initializer whose ``storageUri`` is on the network (``hf://``, ``s3://``) cannot run here:
kubemill reaches nothing but loopback; it is refused at its field path before anything
starts."""

from __future__ import annotations

from collections.abc import Callable

from kubemill.api import FieldError, Job
from kubemill.engines.trainer.api.trainjob import TrainJob
from kubemill.engines.trainer.framework import mpi_plan
from kubemill.frameworks import mpi_launch
from kubemill.frameworks.plan import Network, Plan

LOCAL_ENV = mpi_launch.LOCAL_ENV
"""OpenMPI's settings for one machine (``LocalSupport.env``; other frameworks ignore them)."""


def run_locally(job: Job, plan: Plan, network: Network) -> Plan:
    """The Plan as this machine runs it: an mpi TrainJob in exec mode, others unchanged."""
    if isinstance(job, TrainJob) and job.framework == "mpi":
        return mpi_plan(job, network, exec_mode=True)
    return plan


REMOTE_SCHEMES = ("hf://", "s3://", "gs://", "http://", "https://")
"""Storage an initializer would download from (this machine sends nothing off loopback)."""


def refusals(job: Job, exists: Callable[[str], bool]) -> list[FieldError]:
    """Why a TrainJob cannot run on this machine: an initializer fetching from the network."""
    initializer = job.spec.initializer if isinstance(job, TrainJob) else None
    if initializer is None:
        return []
    errors: list[FieldError] = []
    for field, settings in (("dataset", initializer.dataset), ("model", initializer.model)):
        uri = settings.storage_uri if settings is not None else None
        if uri is not None and uri.startswith(REMOTE_SCHEMES):
            errors.append(
                FieldError(
                    f"spec.initializer.{field}.storageUri",
                    f"{uri!r} would be downloaded, and the local substrate reaches nothing "
                    "but this machine",
                    "fetch it beforehand and read it from a local path, or run the TrainJob "
                    "on Kubernetes",
                )
            )
    return errors


__all__ = ["LOCAL_ENV", "REMOTE_SCHEMES", "refusals", "run_locally"]
