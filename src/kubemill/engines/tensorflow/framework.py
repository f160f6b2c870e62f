"""TensorFlow: a TFJob becomes a Plan whose replicas carry ``TF_CONFIG``.

``TF_CONFIG`` follows Kubeflow training-operator v1 exactly:

- ``cluster`` maps every replica type *except Evaluator* (the evaluator is not part of
  the training cluster) to the addresses of its replicas, keys lowercased (``chief``,
  ``master``, ``ps``, ``worker``) and, as Go's JSON encoder writes maps, sorted;
- ``task`` is ``{"type": <lowercased replica type>, "index": <index>}``;
- ``environment`` is ``"cloud"``;
- a job with one replica in total is not distributed and gets no ``TF_CONFIG``.

(``enableDynamicWorker``, whose sparse TF_CONFIG only makes sense with a core that keeps
the job running through worker failures, is refused when the job is loaded.)

Addresses are ``network.endpoint(type, index, tfjob-port of that type)``.

For trainers written in the seed's style (``--ps_hosts --worker_hosts --job_name
--task_index``) every replica also gets ``TF_PS_HOSTS`` and ``TF_WORKER_HOSTS``
(comma-separated, in TF_CONFIG order, empty when the type is absent),
``TF_JOB_NAME`` (the lowercased replica type, i.e. TF_CONFIG's ``task.type``) and
``TF_TASK_INDEX``, so ``args: ["--ps_hosts=$(TF_PS_HOSTS)", ...]`` works unchanged.
These are set even for a single-replica job, so ``$(TF_...)`` always expands.
A seed-style trainer knows only ``ps`` and ``worker`` jobs (worker 0 acts as chief),
so such a job should declare PS and Worker replicas only: a Chief/Master replica would
get ``TF_JOB_NAME=chief``/``master``, a job its ``tf.train.ClusterSpec`` built from
the two host lists does not contain. Without a chief, worker 0 decides success, which
matches what those trainers do.
"""

from __future__ import annotations

import json
from typing import Any

from kubemill.api import EnvVar, Job
from kubemill.engines.tensorflow.api import TFJob
from kubemill.frameworks._common import (
    PlanError,
    ReplicaSlot,
    env,
    framework_port,
    replica_plan,
    total_replicas,
)
from kubemill.frameworks.plan import Network, Plan, SuccessPolicy

CHIEF_TYPES = ("Chief", "Master")
"""Replica types that lead a TFJob; validation allows at most one of them."""
EVALUATOR = "Evaluator"


def cluster_spec(job: TFJob, network: Network) -> dict[str, list[str]]:
    """TF_CONFIG's ``cluster``: lowercased type -> addresses, evaluator left out."""
    cluster: dict[str, list[str]] = {}
    for rtype in sorted(job.replica_specs, key=str.lower):
        if rtype == EVALUATOR:
            continue
        port = framework_port(job, rtype)
        cluster[rtype.lower()] = [
            str(network.endpoint(rtype, index, port)) for index in range(job.replica_count(rtype))
        ]
    return cluster


def tf_config(job: TFJob, cluster: dict[str, list[str]], slot: ReplicaSlot) -> str | None:
    """The TF_CONFIG value of one replica, or None for a job that is not distributed."""
    if total_replicas(job) == 1:
        return None
    task = {"type": slot.replica_type.lower(), "index": slot.index}
    config: dict[str, Any] = {"cluster": cluster, "task": task, "environment": "cloud"}
    # Compact separators: byte for byte what upstream's Go encoder produces.
    return json.dumps(config, separators=(",", ":"))


def seed_style_env(cluster: dict[str, list[str]], slot: ReplicaSlot) -> list[EnvVar]:
    """TF_PS_HOSTS, TF_WORKER_HOSTS, TF_JOB_NAME, TF_TASK_INDEX for seed-style trainers."""
    return [
        env("TF_PS_HOSTS", ",".join(cluster.get("ps", []))),
        env("TF_WORKER_HOSTS", ",".join(cluster.get("worker", []))),
        env("TF_JOB_NAME", slot.replica_type.lower()),
        env("TF_TASK_INDEX", str(slot.index)),
    ]


def success_policy(job: TFJob) -> SuccessPolicy:
    """Chief/Master decides if present; else worker 0, or all workers with AllWorkers."""
    for chief in CHIEF_TYPES:
        if chief in job.replica_specs:
            return SuccessPolicy(chief, "first")
    if job.spec.success_policy == "AllWorkers":
        return SuccessPolicy("Worker", "all")
    return SuccessPolicy("Worker", "first")


def is_master_role(job: TFJob, slot: ReplicaSlot) -> bool:
    """Upstream's job-role=master: the chief/master, else worker 0."""
    if any(chief in job.replica_specs for chief in CHIEF_TYPES):
        return slot.replica_type in CHIEF_TYPES
    return slot.replica_type == "Worker" and slot.index == 0


class TensorFlow:
    """The TFJob framework."""

    kind = TFJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of a TFJob: TF_CONFIG and seed-style variables on every replica."""
        if not isinstance(job, TFJob):
            raise PlanError(f"the TensorFlow framework plans TFJobs, not {job.KIND}")
        cluster = cluster_spec(job, network)

        def env_for(slot: ReplicaSlot) -> list[EnvVar]:
            config = tf_config(job, cluster, slot)
            head = [env("TF_CONFIG", config)] if config is not None else []
            return head + seed_style_env(cluster, slot)

        return replica_plan(
            job,
            network,
            env_for=env_for,
            is_master=lambda slot: is_master_role(job, slot),
            outcome=success_policy(job),
        )


__all__ = [
    "TensorFlow",
    "cluster_spec",
    "is_master_role",
    "seed_style_env",
    "success_policy",
    "tf_config",
]
