"""Ray's registry record: KubeRay's RayCluster, a head and worker groups of ``ray start``
pods (processes locally) serving until deleted, made by ``kubemill cluster create ray``."""

from kubemill.core import REPLICA_SET
from kubemill.engines.base import Engine, LocalSupport, OperatorGrant, References, ServiceEngine
from kubemill.engines.ray.api.raycluster import RAYCLUSTER, client_addresses, cluster_manifest
from kubemill.engines.ray.api.rayjob import RAYJOB
from kubemill.engines.ray.api.scaling import worker_group_patch
from kubemill.engines.ray.api.selection import names_in
from kubemill.engines.ray.framework.raycluster import Ray
from kubemill.engines.ray.framework.selected import RayJobsAnywhere, resolve
from kubemill.engines.ray.local import USAGE_STATS_ENV, local_job_plan, local_plan

ENGINE = Engine(
    RAYCLUSTER,
    Ray(),
    "Ray (KubeRay): a head and worker groups of `ray start` pods serving until deleted; "
    "Ready once every node has joined, never Succeeded",
    # Its pods are the core's, one by one, as KubeRay creates them (no Deployment).
    lifecycle=REPLICA_SET,
    finishes=False,
    # Locally every node is a process on its own loopback ports and temp dir.
    local=LocalSupport(env=USAGE_STATS_ENV, replan=local_plan),
    cluster=ServiceEngine("ray", cluster_manifest, addresses=client_addresses),
    scale=worker_group_patch,
    grants=(
        OperatorGrant(
            ("",),
            ("secrets",),
            ("list", "watch", "create", "delete"),
            "a Ray cluster with authOptions.mode token gets its token in a Secret, as KubeRay's",
        ),
    ),
)


# A RayJob: a Ray job on a cluster of its own (the RayCluster planner's) or on an existing
# RayCluster it selects (resolved by the substrates before planning: References), judged by
# Ray's job API (the Plan's remote run).
JOB = Engine(
    RAYJOB,
    RayJobsAnywhere(),
    "Ray (KubeRay): a Ray job on a cluster of its own or an existing RayCluster, submitted "
    "by a submitter Job (`ray job submit`) or over HTTP; Succeeded or Failed as Ray's job "
    "API says",
    lifecycle=REPLICA_SET,
    # Locally its cluster is the RayCluster's processes, and the submitter reaches the head's
    # dashboard on its loopback port.
    local=LocalSupport(env=USAGE_STATS_ENV, replan=local_job_plan),
    # As KubeRay's: the RayJob is never deleted by a TTL (its cluster is, at the end).
    expires=False,
    # clusterSelector: a RayCluster of the RayJob's namespace, by name (the operator's own
    # kind, which it lists and watches already: no grant of its own).
    refers=References(RAYCLUSTER.kind, names_in, resolve),
    # K8sJobMode's submitter is a batch/v1 Job, as KubeRay's (the Plan's child controller):
    # created, watched through a cache (list, watch: never read one by one) and deleted.
    grants=(
        OperatorGrant(
            ("batch",),
            ("jobs",),
            ("list", "watch", "create", "delete"),
            "run a RayJob's submitter as KubeRay does, a batch/v1 Job, and follow its status",
        ),
        OperatorGrant(
            ("",),
            ("secrets",),
            ("list", "watch", "create", "delete"),
            "a RayJob's cluster with authOptions.mode token gets its token in a Secret, which "
            "the operator lists by name to ask the head's job API with it",
        ),
    ),
)

__all__ = ["ENGINE", "JOB"]
