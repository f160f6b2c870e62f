"""Networks for framework tests: the Kubernetes naming scheme and a local one.

Both implement :class:`kubemill.frameworks.Network` the way the substrates will, so the
framework tests check the addresses that end up in the environment, not a mock.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from kubemill.frameworks import Endpoint


@dataclass
class ClusterNetwork:
    """Headless-service DNS: ``<job>-<type>-<i>.<ns>.svc:<port>`` (short form without domain)."""

    job: str
    namespace: str = "default"

    def endpoint(
        self, replica_type: str, index: int, container_port: int, *, qualified: bool = True
    ) -> Endpoint:
        host = f"{self.job}-{replica_type.lower()}-{index}"
        if qualified:
            host += f".{self.namespace}.svc"
        return Endpoint(host, container_port)

    def replica_host(self, replica_type: str, index: int) -> str:
        return f"{self.job}-{replica_type.lower()}-{index}.{self.namespace}.svc"

    def files_path(self, file_set: str, mount_path: str) -> str:
        return mount_path

    def host_name(self, replica_type: str, index: int, *, subdomain: str = "") -> str:
        name = f"{self.job}-{replica_type.lower()}-{index}"
        return (
            f"{name}.{subdomain}.{self.namespace}.svc"
            if subdomain
            else self.replica_host(replica_type, index)
        )


@dataclass
class LoopbackNetwork:
    """127.0.0.1 and a distinct port per (replica, container port), handed out on first use."""

    first_port: int = 41000
    ports: dict[tuple[str, int, int], int] = field(default_factory=dict)
    _next: itertools.count[int] = field(init=False)

    def __post_init__(self) -> None:
        self._next = itertools.count(self.first_port)

    def endpoint(
        self, replica_type: str, index: int, container_port: int, *, qualified: bool = True
    ) -> Endpoint:
        key = (replica_type, index, container_port)
        if key not in self.ports:
            self.ports[key] = next(self._next)
        return Endpoint("127.0.0.1", self.ports[key])

    def replica_host(self, replica_type: str, index: int) -> str:
        return "127.0.0.1"

    def files_path(self, file_set: str, mount_path: str) -> str:
        return f"/tmp/job/files/{file_set}"

    def host_name(self, replica_type: str, index: int, *, subdomain: str = "") -> str:
        return f"{replica_type.lower()}-{index}"
