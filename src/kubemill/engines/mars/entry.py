"""Mars's registry record: a service cluster of supervisors and workers (Deployments on
Kubernetes, replicas locally) that serves until deleted, made by ``kubemill cluster create
mars``."""

from kubemill.core import REPLICA_SET, SERVICE_CLUSTER
from kubemill.engines.base import Engine, LocalSupport, OperatorGrant, ServiceEngine
from kubemill.engines.mars.api import MARSCLUSTER, cluster_manifest
from kubemill.engines.mars.framework import Mars
from kubemill.engines.mars.local import local_plan

ENGINE = Engine(
    MARSCLUSTER,
    Mars(),
    "Mars: a cluster of supervisors and workers (Deployments) serving until deleted; "
    "Ready with its endpoint, never Succeeded",
    grants=(
        OperatorGrant(
            ("apps",),
            ("deployments",),
            ("list", "watch", "create", "update"),
            "a Mars cluster's supervisors and workers are Deployments (updated when its "
            "spec changes)",
        ),
        OperatorGrant(
            ("rbac.authorization.k8s.io",),
            ("roles", "rolebindings"),
            ("list", "watch", "create"),
            "a Mars cluster's pods may read pods, to find their supervisors",
        ),
        # RBAC lets the operator grant only what it holds itself.
        OperatorGrant(
            ("",),
            ("pods",),
            ("get",),
            "a Mars cluster's Role lets its pods read pods",
            delegated=True,
        ),
    ),
    lifecycle=SERVICE_CLUSTER,
    restarts=False,
    finishes=False,
    # Locally its supervisors and workers are replicas the core starts one by one.
    local=LocalSupport(replan=local_plan, lifecycle=REPLICA_SET),
    cluster=ServiceEngine("mars", cluster_manifest),
)

__all__ = ["ENGINE"]
