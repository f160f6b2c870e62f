"""Replica addresses on Kubernetes: one headless Service per replica, named like its pod.

A replica's address is its Service's DNS name, ``<job>-<type>-<i>.<ns>.svc``, which
resolves to the pod's IP; the port is the container port itself (a headless Service
does no port mapping). The short form ``<job>-<type>-<i>`` resolves through the pod's
DNS search path in the same namespace; upstream PyTorch uses it for ``MASTER_ADDR``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubemill.frameworks import Endpoint, replica_name


@dataclass(frozen=True)
class KubernetesNetwork:
    """The :class:`kubemill.frameworks.Network` of one job in one namespace."""

    job_name: str
    namespace: str

    def endpoint(
        self, replica_type: str, index: int, container_port: int, *, qualified: bool = True
    ) -> Endpoint:
        """``<job>-<type>-<i>.<ns>.svc:<port>``, or ``<job>-<type>-<i>:<port>`` unqualified."""
        host = replica_name(self.job_name, replica_type, index)
        if qualified:
            host = f"{host}.{self.namespace}.svc"
        return Endpoint(host, container_port)

    def files_path(self, file_set: str, mount_path: str) -> str:
        """The FileSet's volume is mounted there in every pod that gets it."""
        return mount_path

    def replica_host(self, replica_type: str, index: int) -> str:
        """``<job>-<type>-<i>.<ns>.svc``: the replica's headless-service DNS name."""
        return f"{replica_name(self.job_name, replica_type, index)}.{self.namespace}.svc"

    def host_name(self, replica_type: str, index: int, *, subdomain: str = "") -> str:
        """``<job>-<type>-<i>.<subdomain>.<ns>.svc``, or the per-replica service's name."""
        if not subdomain:
            return self.replica_host(replica_type, index)
        name = replica_name(self.job_name, replica_type, index)
        return f"{name}.{subdomain}.{self.namespace}.svc"


__all__ = ["KubernetesNetwork"]
