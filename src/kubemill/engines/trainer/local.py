"""Kubeflow Trainer v2 on the local substrate: a TrainJob of the mpi policy reaches its hosts
through kubemill's exec agent (there is no sshd here; the supervisor serves exec, as the
Kubernetes API does in a cluster), its hosts only hosting what mpirun starts in them, with
OpenMPI's settings for one machine on every replica. Other TrainJobs run as planned."""

from __future__ import annotations

from kubemill.api import Job
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


__all__ = ["LOCAL_ENV", "run_locally"]
