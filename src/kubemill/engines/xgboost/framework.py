"""XGBoost: an XGBoostJob becomes a Plan whose replicas carry what XGBoost's collective
tracker and its workers need, as Kubeflow training-operator v1 (``controller.v1/xgboost``,
``SetPodEnv``) sets it, in its order:

- ``MASTER_PORT``: the Master's xgboostjob-port (9999 by default), as the network maps it;
- ``MASTER_ADDR``: the Master's *short* address (``<job>-master-0`` on Kubernetes);
- ``WORLD_SIZE``: every replica, the Master included;
- ``RANK``: the Master 0, worker i is i + 1;
- ``PYTHONUNBUFFERED``: ``0`` as upstream writes it (Python disables buffering for any
  non-empty value);
- with more than one replica, for LightGBM-style peer lists: ``WORKER_PORT`` (the Workers'
  xgboostjob-port) and ``WORKER_ADDRS`` (every worker's short address, comma-separated).

The Master runs the tracker (``xgboost.tracker.RabitTracker`` on ``MASTER_ADDR:MASTER_PORT``
for ``WORLD_SIZE`` workers) and trains as rank 0; each replica joins the collective with
``dmlc_tracker_uri``/``dmlc_tracker_port``/``dmlc_task_id`` from these variables.

Locally every replica is the loopback address with ports of its own, so ``WORKER_PORT`` is
worker 0's port there (on Kubernetes, the port every worker has): a peer list built from
``WORKER_ADDRS`` and one port reaches worker 0 only. XGBoost itself needs only the tracker's
address.

The Master decides: the job succeeds when it does, and fails when any replica fails for good.
"""

from __future__ import annotations

from kubemill.api import EnvVar, Job
from kubemill.engines.xgboost.api import XGBoostJob
from kubemill.frameworks._common import (
    PlanError,
    ReplicaSlot,
    env,
    framework_port,
    replica_plan,
    total_replicas,
)
from kubemill.frameworks.plan import Network, Plan, decided_by

MASTER = "Master"
WORKER = "Worker"


def rank(job: XGBoostJob, slot: ReplicaSlot) -> int:
    """The Master is 0; worker i comes after the Masters (i + 1)."""
    return slot.index + (job.replica_count(MASTER) if slot.replica_type == WORKER else 0)


def xgboost_env(job: XGBoostJob, network: Network, slot: ReplicaSlot) -> list[EnvVar]:
    """The environment of one replica, in upstream's order."""
    master = network.endpoint(MASTER, 0, framework_port(job, MASTER), qualified=False)
    world = total_replicas(job)
    out = [
        env("MASTER_PORT", str(master.port)),
        env("MASTER_ADDR", master.host),
        env("WORLD_SIZE", str(world)),
        env("RANK", str(rank(job, slot))),
        env("PYTHONUNBUFFERED", "0"),
    ]
    workers = job.replica_count(WORKER)
    if world > 1 and workers:
        port = framework_port(job, WORKER)
        addresses = [network.endpoint(WORKER, i, port, qualified=False) for i in range(workers)]
        out += [
            env("WORKER_PORT", str(addresses[0].port)),
            env("WORKER_ADDRS", ",".join(a.host for a in addresses)),
        ]
    return out


class XGBoost:
    """The XGBoostJob framework."""

    kind = XGBoostJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of an XGBoostJob: the tracker's env on every replica; the Master decides."""
        if not isinstance(job, XGBoostJob):
            raise PlanError(f"the XGBoost framework plans XGBoostJobs, not {job.KIND}")
        if MASTER not in job.replica_specs:
            raise PlanError(f"XGBoostJob {job.name}: a Master replica is required")
        return replica_plan(
            job,
            network,
            env_for=lambda slot: xgboost_env(job, network, slot),
            is_master=lambda slot: slot.replica_type == MASTER,
            outcome=decided_by(MASTER),
        )


__all__ = ["XGBoost", "rank", "xgboost_env"]
