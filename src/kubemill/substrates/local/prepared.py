"""A job ready to run on this machine (:class:`Prepared`): its Plan on the local network and
the launch spec of every replica, planned at submit or again from its records, and again
before its first start if ports it was given were taken since (:func:`move_busy_ports`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubemill.api import Job
from kubemill.frameworks import Plan
from kubemill.substrates.local.images import Environment
from kubemill.substrates.local.launch import LaunchSpec, PodContext, prepare
from kubemill.substrates.local.network import LocalNetwork, PortAllocator, busy_ports, local_plan
from kubemill.substrates.local.store import JobRecord, PortConflict, Store


@dataclass
class Prepared:
    """A job ready to run: its Plan and the launch spec of every replica."""

    job: Job
    plan: Plan
    specs: dict[str, LaunchSpec]
    network: LocalNetwork
    ctx: PodContext
    environments: dict[str, Environment]


def pod_context(rec: JobRecord) -> PodContext:
    """What the replicas of a recorded job know about their pods."""
    return PodContext.for_job(
        job_uid=rec.uid, namespace=rec.namespace, base_dir=rec.base_dir, job_dir=rec.job_dir
    )


def plan_local(
    job: Job,
    network: LocalNetwork,
    *,
    ctx: PodContext,
    environments: Mapping[str, Environment],
) -> Prepared:
    """Plan ``job`` on ``network`` and check every replica can start (raises if not)."""
    plan = local_plan(job, network)
    network.reserve_plan(plan)
    specs = prepare(job, plan, ctx=ctx, environments=environments)
    return Prepared(job, plan, specs, network, ctx, dict(environments))


def prepare_recorded(rec: JobRecord, ports: Mapping[tuple[str, int], int]) -> Prepared:
    """Rebuild a recorded job's Plan with the ports and environments it was given."""
    environments = {k: Environment.from_json(v) for k, v in rec.environments.items()}
    return plan_local(
        rec.load_job(),
        LocalNetwork(rec.name, ports=ports, files_root=str(rec.files_dir)),
        ctx=pod_context(rec),
        environments=environments,
    )


def move_busy_ports(store: Store, uid: str, prepared: Prepared) -> tuple[Prepared, str] | None:
    """The job planned again with the ports taken since submit moved to free ones, and what
    moved; ``None`` if every port is still free (or no new ones could be reserved)."""
    for _ in range(5):
        busy = busy_ports(prepared.network.ports)
        if not busy:
            return None
        current = prepared.network.ports
        allocator = PortAllocator(avoid=store.reserved_ports() | set(current.values()))
        moved = {key: allocator.allocate() for key in busy}
        try:
            store.replace_ports(uid, moved)
        except PortConflict:
            continue
        p = prepared
        replanned = plan_local(
            p.job,
            LocalNetwork(
                p.job.name,
                ports={**current, **moved},
                files_root=p.network.files_root,
            ),
            ctx=p.ctx,
            environments=p.environments,
        )
        text = ", ".join(
            f"{r} port {cp}: {busy[(r, cp)]} -> {port}" for (r, cp), port in moved.items()
        )
        return replanned, text
    return None
