"""A RayJob on an existing cluster (``clusterSelector``): which RayCluster it selects, and
that cluster as the substrate found it, resolved into the RayJob before it is planned.

As KubeRay's, the selector names one RayCluster of the RayJob's namespace by the label key
``ray.io/cluster`` (its value is the cluster's name, the one key KubeRay reads). The RayJob
creates no cluster and never deletes or suspends the one it selects.

The substrate looks the cluster up before every planning (the engine's
:class:`~kubemill.engines.base.References`) and hands its model (with its
status) and the addresses of its ready replicas; :func:`found_cluster` reduces them to what the
Plan needs (:class:`SelectedCluster`): whether the cluster serves, the head's address and
dashboard port, its head image (the default submitter's, as KubeRay's) and, locally, its
token file. The framework plans from that alone (pure).

Whether the RayJob has *committed* to the cluster is its own last status: once it was
``Running`` on it (the cluster served, the submission went ahead), the submitter stays in
its Plan whatever the cluster does, and a cluster gone after that is lost under the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubemill.engines.base import Referred
from kubemill.engines.ray.api.auth import token_secret_name
from kubemill.engines.ray.api.raycluster import HEAD, RayCluster
from kubemill.frameworks.plan import replica_name

CLUSTER_KEY = "ray.io/cluster"
"""The selector's one key, as KubeRay's: its value is the RayCluster's name."""

COMMITTED = frozenset({"Running", "Complete", "Failed"})
"""``jobDeploymentStatus`` values past Initializing: the RayJob was handed to the cluster."""


@dataclass(frozen=True)
class SelectedCluster:
    """The RayCluster a RayJob selects, as the substrate found it before planning."""

    name: str
    found: bool = False
    serving: bool = False
    """Its ``status.state`` is ``ready`` and the substrate reaches its head."""
    state: str = ""
    """Its ``status.state`` ("" before it has one), for the waiting message."""
    head_host: str = ""
    """Where the substrate reaches the head ("": not Running and ready)."""
    dashboard_port: int = 0
    """The head's dashboard port (its ``status.endpoints``; 0: not known yet)."""
    head_image: str | None = None
    """The head's image: the default submitter's, as KubeRay's."""
    token_file: str | None = None
    """Where its token is (its ``status.authTokenFile``; locally), None: none."""
    token_secret: str | None = None
    """On Kubernetes, the Secret of its token when its ``authOptions`` ask for one (the
    cluster's: the RayJob makes none), None: no token."""
    committed: bool = False
    """The RayJob was already ``Running`` on it (see the module)."""

    @property
    def lost(self) -> bool:
        """Gone (deleted) after the RayJob was handed to it."""
        return self.committed and not self.found

    @property
    def waiting(self) -> str:
        """Why the RayJob waits for the cluster, in words ("": it does not)."""
        if self.committed or self.serving:
            return ""
        if not self.found:
            return f"waiting for RayCluster {self.name}: it does not exist (yet)"
        if self.state == "ready":
            return f"waiting for the head of RayCluster {self.name} to serve its dashboard"
        return f"waiting for RayCluster {self.name} to be ready (state {self.state or 'unset'})"


def selected_name(selector: Mapping[str, str] | None) -> str:
    """The cluster a ``clusterSelector`` names ("" for none)."""
    return (selector or {}).get(CLUSTER_KEY, "")


def names_in(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """The RayCluster a RayJob's manifest selects (as stored: a dict), if any."""
    spec = manifest.get("spec")
    selector = spec.get("clusterSelector") if isinstance(spec, Mapping) else None
    name = selector.get(CLUSTER_KEY) if isinstance(selector, Mapping) else None
    return (name,) if isinstance(name, str) and name else ()


def found_cluster(name: str, referred: Referred | None, *, committed: bool) -> SelectedCluster:
    """What a RayJob needs of the RayCluster ``name`` from the substrate's lookup."""
    cluster = referred.job if referred is not None else None
    if not isinstance(cluster, RayCluster):
        return SelectedCluster(name=name, committed=committed)
    status = cluster.status
    host = referred.addresses.get(replica_name(name, HEAD, 0), "") if referred else ""
    port = (status.endpoints or {}).get("dashboard", "")
    containers = cluster.spec.head_group_spec.template.spec.containers
    state = status.state or ""
    return SelectedCluster(
        name=name,
        found=True,
        serving=state == "ready" and bool(host) and port.isdigit(),
        state=state,
        head_host=host,
        dashboard_port=int(port) if port.isdigit() else 0,
        head_image=containers[0].image if containers else None,
        token_file=status.auth_token_file,
        token_secret=token_secret_name(name) if cluster.spec.token_auth else None,
        committed=committed,
    )


__all__ = [
    "CLUSTER_KEY",
    "COMMITTED",
    "SelectedCluster",
    "found_cluster",
    "names_in",
    "selected_name",
]
