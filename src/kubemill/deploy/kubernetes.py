"""The seed's ``new_cluster`` on Kubernetes, with no operator, at the path the seed's programs
import it from::

    from kubemill.deploy.kubernetes import new_cluster

    cluster = new_cluster(api_client, worker_cpu=1, worker_mem="2g")

The engine's folder holds it (:mod:`kubemill.engines.mars.deploy.kubernetes`, its docs say
what it creates and waits for); this module gives it the Kubernetes substrate's reading of
pods (:class:`~kubemill.substrates.kubernetes.observe.PodSnapshot`, the one set of rules
both the operator and the client read pods by), which the engine's layer cannot import.
"""

from __future__ import annotations

from functools import wraps
from typing import Any

from kubemill.engines.mars.deploy import kubernetes as engine
from kubemill.engines.mars.deploy.cluster import cluster_spec
from kubemill.engines.mars.deploy.kubernetes import KubernetesClusterClient
from kubemill.substrates.kubernetes.observe import PodSnapshot


@wraps(engine.new_cluster)
def new_cluster(
    kube_api_client: Any, image: str | None = None, **arguments: Any
) -> KubernetesClusterClient:
    return engine.new_cluster(kube_api_client, image, read_pod=PodSnapshot.of, **arguments)


__all__ = ["KubernetesClusterClient", "cluster_spec", "new_cluster"]
