"""Ray's registry record: KubeRay's RayCluster, a head and worker groups of ``ray start``
pods (processes locally) serving until deleted, made by ``kubemill cluster create ray``."""

from kubemill.core import REPLICA_SET
from kubemill.engines.base import Engine, ServiceEngine
from kubemill.engines.ray.api.raycluster import RAYCLUSTER, cluster_manifest
from kubemill.engines.ray.framework import Ray

ENGINE = Engine(
    RAYCLUSTER,
    Ray(),
    "Ray (KubeRay): a head and worker groups of `ray start` pods serving until deleted; "
    "Ready once every node has joined, never Succeeded",
    # Its pods are the core's, one by one, as KubeRay creates them (no Deployment).
    lifecycle=REPLICA_SET,
    finishes=False,
    cluster=ServiceEngine("ray", cluster_manifest),
)

__all__ = ["ENGINE"]
