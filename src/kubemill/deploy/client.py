"""What every ``new_cluster`` returns: a handle on a running engine cluster
(:class:`ClusterClient`, with :class:`ClusterError`), the engine's own
(:mod:`kubemill.engines.mars.deploy.cluster`), here beside the two ``new_cluster``."""

from __future__ import annotations

from kubemill.engines.mars.deploy.cluster import ClusterClient, ClusterError

__all__ = ["ClusterClient", "ClusterError"]
