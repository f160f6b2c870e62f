"""Jobs that refer to other local jobs, in the supervisor (an engine's
:class:`~kubemill.engines.base.References`: a Ray job on an existing cluster of its
namespace, started by ``kubemill cluster create`` or ``kubemill run``).

Before every reconcile the supervisor resolves what the job names from the store
(:func:`lookup_in`: the job of that name and kind, with its recorded status, and its
replicas that run, all on the loopback address) and, when the Plan that makes differs from
the one it runs, plans again (:func:`replanned`): new replicas get launch specs, those that
run keep theirs (as :mod:`.supervisor.adopt` does for a scale). The engine decides what
the other job means; nothing here does.
"""

from __future__ import annotations

from collections.abc import Callable

from kubemill.api import Job, ManifestError
from kubemill.engines.base import Referred
from kubemill.frameworks import Plan
from kubemill.kinds import engine_for
from kubemill.substrates.errors import JobNotFound
from kubemill.substrates.local.images import ImageConfig
from kubemill.substrates.local.launch import prepare
from kubemill.substrates.local.network import LOCAL_HOST, local_plan
from kubemill.substrates.local.prepared import Prepared
from kubemill.substrates.local.store import Store


def lookup_in(store: Store, namespace: str, kind: str) -> Callable[[str], Referred | None]:
    """The lookup of a job of ``kind`` by name in ``namespace``, as the store has it."""

    def lookup(name: str) -> Referred | None:
        try:
            rec = store.job(namespace, name)
        except JobNotFound:
            return None
        if rec.kind != kind:
            return None
        try:
            job = rec.load_job()
        except (ManifestError, ValueError):
            return None  # not valid: its own supervisor reports why
        running = {r.name: LOCAL_HOST for r in store.replicas(rec.uid) if r.phase == "Running"}
        return Referred(job, running)

    return lookup


def resolved(store: Store, job: Job) -> Job:
    """``job`` with the jobs it names resolved (itself when it names none)."""
    refers = engine_for(job.KIND).refers
    if refers is None:
        return job
    return refers.resolve(job, lookup_in(store, job.namespace, refers.kind))


def replanned(prepared: Prepared, job: Job) -> Prepared:
    """``prepared`` for ``job`` (resolved anew): its Plan made again on the same network,
    launch specs for replicas it did not have (a submitter once the cluster serves), the
    others' kept."""
    plan: Plan = local_plan(job, prepared.network)
    prepared.network.reserve_plan(plan)
    environments = dict(prepared.environments)
    config: ImageConfig | None = None
    for rep in plan.replicas:
        for container in rep.template.spec.containers:
            image = container.image or ""
            if image not in environments:
                # An image the job names only now (the selected cluster's head image).
                config = config or ImageConfig.load()
                environments[image] = config.resolve(image)
    specs = prepare(job, plan, ctx=prepared.ctx, environments=environments)
    specs.update({name: spec for name, spec in prepared.specs.items() if name in specs})
    return Prepared(job, plan, specs, prepared.network, prepared.ctx, environments)


__all__ = ["lookup_in", "replanned", "resolved"]
