"""A changed recorded manifest, as the supervisor takes it in (:func:`adopted`).

Other processes change a local job through its recorded manifest: a stop request, suspend
and resume, a patch of a group's ``replicas``. The supervisor loads the new manifest and
judges the job as it now says. When it plans another set of replicas (a scale up or
down), the job is planned again here, as the operator plans from the current spec on every
pass on Kubernetes: the new replicas get their own ports (reserved with the job's, so no
other job takes them) and launch specs, and records the listing shows; the running ones
keep theirs untouched (their peers know their addresses). The core then creates the
missing pods and deletes those no longer in the Plan, as it does on Kubernetes: nothing
here decides which replica runs.

A change that cannot be planned here leaves the Plan as it was, with a ``FailedReplan``
warning event saying why.
"""

from __future__ import annotations

from kubemill.api import Job, JobStatus
from kubemill.kinds import load_one
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local.launch import prepare
from kubemill.substrates.local.network import LocalNetwork, PortAllocator, local_plan
from kubemill.substrates.local.prepared import Prepared
from kubemill.substrates.local.store import PortConflict, ReplicaRecord, Store
from kubemill.substrates.local.submission import replica_records

_ATTEMPTS = 5
"""Tries at reserving the new replicas' ports while other jobs reserve theirs."""


def adopted(
    store: Store,
    uid: str,
    prepared: Prepared,
    manifest: dict[str, object],
    status: JobStatus,
    records: dict[str, ReplicaRecord],
) -> Prepared:
    """The job as ``manifest`` says, with ``status`` so far; planned again (and the new
    replicas added to ``records``, saved) when it asks for another set of replicas."""
    job = load_one(manifest, name=f"{prepared.job.namespace}/{prepared.job.name}")
    # The kind's own status model (status extensions add fields to it).
    job.status = type(job.status).model_validate(status.to_wire())
    try:
        replanned = _replanned(store, uid, prepared, job)
    except (SubstrateError, ValueError) as exc:
        store.add_event(
            uid,
            type="Warning",
            reason="FailedReplan",
            message=f"the changed manifest cannot be planned here, the replicas stay as they"
            f" were: {exc}",
        )
        replanned = None
    if replanned is None:
        prepared.job = job
        return prepared
    added = [r for r in replica_records(uid, replanned) if r.name not in records]
    for record in added:
        records[record.name] = record
    store.save_replicas(added)
    return replanned


def _replanned(store: Store, uid: str, prepared: Prepared, job: Job) -> Prepared | None:
    """``job`` planned with the ports it has and new ones for new replicas; ``None`` when it
    plans the replicas it had."""
    current = prepared.network.ports
    for _ in range(_ATTEMPTS):
        network = LocalNetwork(
            prepared.network.job_name,
            ports=current,
            allocator=PortAllocator(avoid=store.reserved_ports() | set(current.values())),
            files_root=prepared.network.files_root,
        )
        plan = local_plan(job, network)
        if [r.name for r in plan.replicas] == [r.name for r in prepared.plan.replicas]:
            return None
        network.reserve_plan(plan)
        known = set(prepared.environments)
        images = {c.image or "" for r in plan.replicas for c in r.template.spec.containers}
        if not images <= known:
            raise SubstrateError(
                f"image(s) {sorted(images - known)} were not in the job when it was submitted"
            )
        specs = prepare(job, plan, ctx=prepared.ctx, environments=prepared.environments)
        new_ports = {key: port for key, port in network.ports.items() if key not in current}
        try:
            store.replace_ports(uid, new_ports)
        except PortConflict:
            continue  # another job took one meanwhile: pick again
        # A replica that runs (or ran) keeps the spec it was started with.
        specs.update(prepared.specs)
        return Prepared(job, plan, specs, network, prepared.ctx, prepared.environments)
    raise SubstrateError("no free ports could be reserved for the new replicas")


__all__ = ["adopted"]
