"""The Plan of a RayJob on an existing RayCluster (``clusterSelector``), from what the
substrate found of that cluster (:mod:`kubemill.engines.ray.api.selection`): no node of
its own, the submitter (``K8sJobMode``) once the cluster serves, and the Ray job as a remote
run on the selected cluster's head.

- **Waiting.** While the cluster does not exist or is not Ready, the Plan has no replica
  and its remote run no address: nothing is created or asked, and the status says
  ``Initializing`` with a message naming the cluster (KubeRay waits the same way).
- **Running.** Once it serves, the submitter is planned against the head's dashboard (on
  Kubernetes through the head Service, as KubeRay's; locally on its loopback port) and
  the substrate asks the head's job API at the address it found the head at. From then
  on (the RayJob's own status says ``Running``), the submitter stays planned whatever the
  cluster does.
- **Lost.** A cluster deleted after that fails the RayJob (:data:`CLUSTER_DELETED`),
  unless Ray's last report had already ended the job: the remote run's ``lost`` verdict,
  judged by the core.

The selected cluster is never the RayJob's to delete or suspend: its Plan has none of its
pods, so the end (``shutdownAfterJobFinishes``, a TTL) touches only the submitter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial

from kubemill.api import Job
from kubemill.engines.base import Referred
from kubemill.engines.ray.api.auth import TOKEN_KEY
from kubemill.engines.ray.api.rayjob import SUBMITTER, RayJob
from kubemill.engines.ray.api.selection import COMMITTED, SelectedCluster, found_cluster
from kubemill.engines.ray.framework.raycluster import head_service_name, kube_auth_env
from kubemill.engines.ray.framework.rayjob import RayJobs, job_plan, status_fields
from kubemill.frameworks.plan import Network, Plan, StatusView, decided_by
from kubemill.frameworks.remote import RemoteVerdict, SecretFile

CLUSTER_DELETED = "RayClusterDeleted"
"""kubemill's reason when the selected cluster was deleted under the running Ray job."""


def resolve(job: Job, lookup: Callable[[str], Referred | None]) -> Job:
    """A RayJob that selects a cluster, handed what the substrate's ``lookup`` found of it
    (the engine's :class:`~kubemill.engines.base.References`); any other job as it is."""
    if not isinstance(job, RayJob) or not job.selects:
        return job
    committed = job.status.job_deployment_status in COMMITTED
    return job.with_selected(found_cluster(job.selects, lookup(job.selects), committed=committed))


def selected_of(job: RayJob) -> SelectedCluster:
    """The cluster the RayJob selects as found (not looked up: as a missing one)."""
    return job.selected or SelectedCluster(name=job.selects)


def kube_selected_dashboard(job: RayJob) -> str:
    """The selected head's job API as the submitter reaches it in a cluster: through the
    head Service, as KubeRay's ``dashboardURL``."""
    selected = selected_of(job)
    service = f"{head_service_name(selected.name)}.{job.namespace}.svc.cluster.local"
    return f"http://{service}:{selected.dashboard_port}"


def selected_plan(job: RayJob, dashboard: str) -> Plan:
    """The Plan of a RayJob on the cluster it selects (see the module); ``dashboard``:
    ``http://host:port`` of the head's job API as the submitter reaches it."""
    selected = selected_of(job)
    own = Plan(
        kind=job.KIND,
        name=job.name,
        namespace=job.namespace,
        replicas=(),
        outcome=decided_by(SUBMITTER),
        services=False,
    )
    planned = job_plan(job, own, dashboard, selected.dashboard_port)
    assert planned.remote is not None
    handed = selected.serving or selected.committed
    lost = None
    if selected.lost:
        lost = RemoteVerdict(
            "failed",
            reason=CLUSTER_DELETED,
            message=f"RayCluster {selected.name} was deleted while the Ray job ran on it",
        )
    remote = replace(
        planned.remote,
        after="",
        host=selected.head_host if handed else "",
        lost=lost,
    )
    return replace(
        planned,
        replicas=planned.replicas if handed else (),
        remote=remote,
        status_extension=partial(
            selected_fields, selected=selected, dashboard=dashboard.removeprefix("http://")
        ),
    )


def selected_fields(
    view: StatusView, *, selected: SelectedCluster, dashboard: str
) -> Mapping[str, object]:
    """KubeRay's status fields of a RayJob on a selected cluster: the cluster's name as
    ``rayClusterName``; ``Initializing`` with why while it waits for the cluster, then
    ``Running`` from the submission on (KubeRay's), as the rest of :func:`status_fields`."""
    fields = dict(status_fields(view, dashboard if selected.found else None))
    fields["ray_cluster_name"] = selected.name
    if fields.get("job_deployment_status") != "Initializing":
        return fields
    if selected.waiting:
        fields["message"] = selected.waiting
    else:
        fields["job_deployment_status"] = "Running"
    return fields


class RayJobsAnywhere(RayJobs):
    """The RayJob framework: on a cluster of its own (:class:`RayJobs`) or on the one it
    selects (:func:`selected_plan`)."""

    def plan(self, job: Job, network: Network) -> Plan:
        assert isinstance(job, RayJob)
        if job.selects:
            return kube_selected_token(selected_plan(job, kube_selected_dashboard(job)), job)
        return super().plan(job, network)


def kube_selected_token(plan: Plan, job: RayJob) -> Plan:
    """``plan`` on Kubernetes with the token of the cluster the RayJob selects, when that
    cluster's ``authOptions`` ask for one: the submitter takes it from the cluster's own
    Secret, as the cluster's nodes do, and the operator asks the head's job API with it.
    The Secret stays the cluster's: the RayJob's Plan makes none."""
    selected = selected_of(job)
    if selected.token_secret is None:
        return plan
    env = kube_auth_env(selected.name)
    remote = plan.remote
    if remote is not None:
        remote = replace(remote, bearer_token=SecretFile(selected.token_secret, TOKEN_KEY))
    replicas = tuple(replace(rep, env=(*rep.env, *env)) for rep in plan.replicas)
    return replace(plan, replicas=replicas, remote=remote)


__all__ = [
    "CLUSTER_DELETED",
    "RayJobsAnywhere",
    "kube_selected_dashboard",
    "kube_selected_token",
    "resolve",
    "selected_fields",
    "selected_of",
    "selected_plan",
]
