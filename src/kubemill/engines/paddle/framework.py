"""PaddlePaddle: a PaddleJob becomes a Plan whose replicas carry what
``python -m paddle.distributed.launch`` reads from its environment, as Kubeflow
training-operator v1 (its Paddle controller's ``envvar.go``) sets it, in its order:

- ``PYTHONUNBUFFERED``: ``0`` as upstream writes it (any non-empty value disables
  buffering);
- ``PADDLE_JOB_ID``: the job's name; ``PADDLE_NNODES``: every replica;
- ``PADDLE_MASTER``: the rendezvous master's ``host:port``, the master port (port name
  ``master``, 36543 by default) of worker 0 in collective mode (no Master replica) or of
  Master 0 in parameter-server mode. That replica itself gets ``POD_IP_DUMMY`` (its pod's
  IP, ``valueFrom.fieldRef: status.podIP``) and ``PADDLE_MASTER=$(POD_IP_DUMMY):<port>``, so
  it serves on its own address; every other replica gets the master's short address
  (``<job>-worker-0`` on Kubernetes);
- parameter-server mode only: ``PADDLE_SERVER_NUM=1`` on a Master, ``PADDLE_TRAINER_NUM=1``
  on a Worker (one server or trainer a pod).

Locally the pod IP is the loopback address and the port one the local network reserves.

Who decides (upstream's status rules): with a Master, the job succeeds when every Master
has; without, when every Worker has. Any replica failing for good fails it.
"""

from __future__ import annotations

from kubemill.api import EnvVar, EnvVarSource, Job, ObjectFieldSelector
from kubemill.engines.paddle.api import PaddleJob
from kubemill.frameworks._common import (
    PlanError,
    ReplicaSlot,
    env,
    framework_port,
    replica_plan,
    total_replicas,
)
from kubemill.frameworks.plan import Network, Plan, SuccessPolicy

MASTER = "Master"
WORKER = "Worker"
POD_IP_VARIABLE = "POD_IP_DUMMY"


def rendezvous_type(job: PaddleJob) -> str:
    """The replica type whose replica 0 is the rendezvous master."""
    return WORKER if job.collective else MASTER


def paddle_env(job: PaddleJob, network: Network, slot: ReplicaSlot) -> list[EnvVar]:
    """The environment of one replica, in upstream's order."""
    host_type = rendezvous_type(job)
    master = network.endpoint(host_type, 0, framework_port(job, host_type), qualified=False)
    out = [
        env("PYTHONUNBUFFERED", "0"),
        env("PADDLE_JOB_ID", job.name),
        env("PADDLE_NNODES", str(total_replicas(job))),
    ]
    if slot.replica_type == host_type and slot.index == 0:
        pod_ip = EnvVarSource(field_ref=ObjectFieldSelector(field_path="status.podIP"))
        out += [
            EnvVar(name=POD_IP_VARIABLE, value_from=pod_ip),
            env("PADDLE_MASTER", f"$({POD_IP_VARIABLE}):{master.port}"),
        ]
    else:
        out.append(env("PADDLE_MASTER", str(master)))
    if not job.collective:
        one = "PADDLE_SERVER_NUM" if slot.replica_type == MASTER else "PADDLE_TRAINER_NUM"
        out.append(env(one, "1"))
    return out


def success_policy(job: PaddleJob) -> SuccessPolicy:
    """Every Master when there is one, else every Worker."""
    return SuccessPolicy(WORKER if job.collective else MASTER, "all")


class Paddle:
    """The PaddleJob framework."""

    kind = PaddleJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of a PaddleJob: PADDLE_* on every replica."""
        if not isinstance(job, PaddleJob):
            raise PlanError(f"the Paddle framework plans PaddleJobs, not {job.KIND}")
        return replica_plan(
            job,
            network,
            env_for=lambda slot: paddle_env(job, network, slot),
            is_master=lambda slot: slot.replica_type == MASTER,
            outcome=success_policy(job),
        )


__all__ = ["Paddle", "paddle_env", "rendezvous_type", "success_policy"]
