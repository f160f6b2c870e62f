"""JAX's distributed runtime, as every kind that runs it addresses it: process 0 of the
training replicas serves ``jax.distributed.initialize``'s coordinator, which the others
reach at that replica's short address and the coordinator port, and each process learns how
many there are and which one it is. The kinds differ only in the variables' names (and
upstream's order), which they pass in."""

from __future__ import annotations

from dataclasses import dataclass

from kubemill.api import EnvVar
from kubemill.frameworks._common import env
from kubemill.frameworks.plan import Endpoint, Network


def coordinator(network: Network, replica_type: str, port: int) -> Endpoint:
    """Where JAX's coordinator serves: process 0 of ``replica_type``, its short address."""
    return network.endpoint(replica_type, 0, port, qualified=False)


@dataclass(frozen=True)
class JaxProcess:
    """One JAX process's place: the coordinator, the process count and this one's id."""

    coordinator: Endpoint
    processes: int
    process_id: int

    @property
    def address(self) -> str:
        """``host:port``, as ``jax.distributed.initialize`` takes it."""
        return f"{self.coordinator.host}:{self.coordinator.port}"

    def env(self, names: dict[str, str]) -> list[EnvVar]:
        """The variables ``names`` maps each of ``host``, ``port``, ``address`` (host:port),
        ``processes`` and ``id`` to, in the order ``names`` lists them."""
        values = {
            "host": self.coordinator.host,
            "port": str(self.coordinator.port),
            "address": self.address,
            "processes": str(self.processes),
            "id": str(self.process_id),
        }
        return [env(name, values[part]) for part, name in names.items()]


__all__ = ["JaxProcess", "coordinator"]
