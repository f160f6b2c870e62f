"""Mars on one machine: a MarsCluster's Plan as the local substrate runs it.

On Kubernetes a MarsCluster is a service cluster (:class:`~kubemill.frameworks.plan.
ServiceCluster`): Deployments whose pods a controller keeps running, judged by
:mod:`kubemill.core.service`. Locally there is no Deployment controller, so
:func:`local_plan` (the engine's ``LocalSupport.replan``) turns the cluster into replicas
the local substrate runs and the core judges pod by pod:

- **Replicas.** ``Supervisor`` 0..supervisorNum-1 (stage 0), then ``Worker``
  0..workerNum-1 (stage 1, started once every supervisor is ready: ``start_gate`` ready).
  Each runs the same pod template as the Deployment's (its image picks the environment
  that has Mars, its command is the in-pod entrypoint
  ``python -m kubemill.engines.mars.pod.entrypoint``,
  its resources become the local limits), restarted in place (``Always``), as a
  Deployment's pod would be.
- **Addresses.** Every supervisor and worker serves Mars on a port the local
  :class:`Network` reserved for it, and each supervisor its web API on another; every
  replica is given the supervisors' addresses explicitly (``KUBEMILL_MARS_SUPERVISORS``:
  no API server to list pods from here).
- **Readiness.** The entrypoint writes its readiness file once its service is really up
  (a worker once a supervisor lists it as ready); here that file is a path of the job's
  own per replica (``KUBEMILL_MARS_READY_FILE``), and the container's exec readiness probe
  tests that path, which the local kubelet runs as a kubelet does.
- **Outcome.** A :class:`ServicePolicy`: Ready while every supervisor and
  ``minWorkerNum`` workers are ready, never Succeeded; the status extension writes
  ``status.endpoint`` (``http://127.0.0.1:<supervisor 0's web port>``) while Ready, and
  ``status.readyReplicas``. The core writes both; the substrate only runs processes.
- **Volumes.** No hostPath or memory emptyDir here: the spill paths are given to Mars as
  they are (``MARS_SPILL_DIRS``), and the cache (each worker's plasma store, of
  ``MARS_CACHE_MEM_SIZE``, as on Kubernetes) lives in the machine's own /dev/shm.

Pure: ports and paths come from the :class:`Network`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kubemill.api import ConditionType, EnvVar, Job, PodTemplateSpec, RestartPolicy
from kubemill.engines.mars.api import MarsCluster
from kubemill.engines.mars.framework import (
    CONTAINER,
    ENV_READY_FILE,
    ENV_SERVICE_PORT,
    ENV_SPILL_DIRS,
    ENV_SUPERVISORS,
    ENV_WEB_PORT,
    ROLES,
    SERVICE_PORT,
    WEB_PORT,
    build_supervisors,
    build_workers,
)
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    Network,
    Plan,
    ReplicaPlan,
    ServicePolicy,
    StatusExtension,
    StatusView,
    replica_name,
)

LOCAL_HOST = "127.0.0.1"
READY_DIR = "mars-ready"
"""The job's directory of readiness files (one per replica)."""


def ready_file(network: Network, replica: str) -> str:
    """The readiness file of ``replica``: a path of the job's own."""
    return f"{network.files_path(READY_DIR, '/var/run/' + READY_DIR)}/{replica}"


def supervisor_addresses(job: MarsCluster, network: Network) -> list[str]:
    """``127.0.0.1:<port>`` of every supervisor's Mars service."""
    return [
        str(network.endpoint("Supervisor", index, SERVICE_PORT))
        for index in range(job.spec.supervisor_num)
    ]


def endpoint(job: MarsCluster, network: Network) -> str:
    """The cluster's endpoint: the web API of supervisor 0."""
    return f"http://{network.endpoint('Supervisor', 0, WEB_PORT)}"


def _template(deployment: Mapping[str, Any], job: MarsCluster) -> PodTemplateSpec:
    """The Deployment's pod template without its volumes (none locally, see the module),
    the spill dirs given as the node's paths."""
    template = PodTemplateSpec.model_validate(deployment["spec"]["template"])
    template.spec.volumes = None
    for container in template.spec.containers:
        container.volume_mounts = None
        if container.name != CONTAINER or not job.spec.worker_spill_paths:
            continue
        if any(e.name == ENV_SPILL_DIRS for e in container.env or []):
            container.env = [
                EnvVar(name=ENV_SPILL_DIRS, value=":".join(job.spec.worker_spill_paths))
                if e.name == ENV_SPILL_DIRS
                else e
                for e in container.env or []
            ]
    return template


def _replica(
    job: MarsCluster,
    network: Network,
    replica_type: str,
    index: int,
    template: PodTemplateSpec,
    supervisors: list[str],
) -> ReplicaPlan:
    name = replica_name(job.name, replica_type, index)
    ready = ready_file(network, name)
    template = template.model_copy(deep=True)
    container = next(c for c in template.spec.containers if c.name == CONTAINER)
    probe = dict(container.readiness_probe or {})
    probe["exec"] = {"command": ["test", "-f", ready]}
    container.readiness_probe = probe
    ports = {"service": SERVICE_PORT}
    env = [
        EnvVar(
            name=ENV_SERVICE_PORT,
            value=str(network.endpoint(replica_type, index, SERVICE_PORT).port),
        ),
        EnvVar(name=ENV_SUPERVISORS, value=",".join(supervisors)),
        EnvVar(name=ENV_READY_FILE, value=ready),
    ]
    if replica_type == "Supervisor":
        ports["web"] = WEB_PORT
        env.append(
            EnvVar(
                name=ENV_WEB_PORT, value=str(network.endpoint(replica_type, index, WEB_PORT).port)
            )
        )
    return ReplicaPlan(
        replica_type=replica_type,
        index=index,
        name=name,
        template=template,
        container=CONTAINER,
        env=tuple(env),
        ports=ports,
        restart_policy=RestartPolicy.ALWAYS,
        labels={
            LABEL_JOB_NAME: job.name,
            LABEL_REPLICA_TYPE: ROLES[replica_type],
            LABEL_REPLICA_INDEX: str(index),
            LABEL_JOB_ROLE: ROLES[replica_type],
        },
        stage=0 if replica_type == "Supervisor" else 1,
        host=LOCAL_HOST,
    )


def with_endpoint(address: str) -> StatusExtension:
    """The status extension: the endpoint while Ready, and the ready replicas by type."""

    def status(view: StatusView) -> Mapping[str, object]:
        ready: dict[str, int] = {rtype: 0 for rtype in ROLES}
        for pod in view.pods:
            if not pod.owner and pod.phase == "Running" and pod.ready and pod.replica_type in ready:
                ready[pod.replica_type] += 1
        condition = view.status.condition(ConditionType.READY)
        serving = condition is not None and condition.status == "True" and not view.status.finished
        return {"endpoint": address if serving else None, "ready_replicas": ready}

    return status


def local_plan(job: Job, plan: Plan, network: Network) -> Plan:
    """The MarsCluster's Plan as this machine runs it (``LocalSupport.replan``)."""
    if not isinstance(job, MarsCluster):
        return plan
    supervisors = supervisor_addresses(job, network)
    templates = {
        "Supervisor": _template(build_supervisors(job.name, job.namespace, job.spec), job),
        "Worker": _template(build_workers(job.name, job.namespace, job.spec), job),
    }
    counts = {"Supervisor": job.spec.supervisor_num, "Worker": job.spec.worker_num}
    replicas = tuple(
        _replica(job, network, rtype, index, templates[rtype], supervisors)
        for rtype in ("Supervisor", "Worker")
        for index in range(counts[rtype])
    )
    return replace(
        plan,
        replicas=replicas,
        outcome=ServicePolicy(
            "Supervisor",
            job.spec.supervisor_num,
            also_ready=(("Worker", job.spec.ready_workers_needed),),
        ),
        start_gate="ready",
        service_cluster=None,
        status_extension=with_endpoint(endpoint(job, network)),
    )


__all__ = [
    "endpoint",
    "local_plan",
    "ready_file",
    "supervisor_addresses",
    "with_endpoint",
]
