"""PaddlePaddle on the local substrate: every replica is a "node" of
``paddle.distributed.launch`` on this one machine.

The rendezvous master's ``POD_IP_DUMMY`` (its pod's IP, a ``valueFrom.fieldRef`` on
Kubernetes) is the replica's address from the substrate's
:class:`~kubemill.frameworks.Network`, written as a plain value: the launcher reads
``PADDLE_MASTER=$(POD_IP_DUMMY):<port>`` after expansion.

Two things a pod has of its own that local replicas share, so each gets them here:

- ``POD_IP`` (the launcher's ``--host``): the replica's address from the substrate's
  :class:`~kubemill.frameworks.Network`, the loopback address. Without it the launcher
  takes the address the host name resolves to, which on some machines is an external
  interface; every peer is on this machine.
- ``PADDLE_LOG_DIR`` (``--log_dir``): ``log/<replica>``. The launcher writes its workers'
  logs to ``log/`` in the working directory and prints the one of its local rank 0 from
  there; replicas started in one directory would overwrite each other's
  ``workerlog.0`` and each print the other's lines.

A variable the container sets itself is left as it is.
"""

from __future__ import annotations

from dataclasses import replace

from kubemill.api import Job
from kubemill.engines.paddle.framework import POD_IP_VARIABLE
from kubemill.frameworks import Network, Plan, ReplicaPlan
from kubemill.frameworks._common import env

LOG_ROOT = "log"


def _with_local_env(rep: ReplicaPlan, network: Network) -> ReplicaPlan:
    address = network.replica_host(rep.replica_type, rep.index)
    planned = tuple(
        env(var.name, address) if var.name == POD_IP_VARIABLE else var for var in rep.env
    )
    wanted = {"POD_IP": address, "PADDLE_LOG_DIR": f"{LOG_ROOT}/{rep.name}"}
    containers = [c for c in rep.template.spec.containers if c.name == rep.container]
    own = {var.name for c in containers for var in c.env or []} | {var.name for var in planned}
    extra = [env(name, value) for name, value in wanted.items() if name not in own]
    return replace(rep, env=(*planned, *extra))


def local_plan(job: Job, plan: Plan, network: Network) -> Plan:
    """The PaddleJob's Plan as this machine runs it (``LocalSupport.replan``)."""
    return replace(plan, replicas=tuple(_with_local_env(rep, network) for rep in plan.replicas))


__all__ = ["LOG_ROOT", "local_plan"]
