"""JAX's registry record: a replica-set engine with no grants beyond pods and services,
run locally as it is planned (worker 0's coordinator port is a loopback port the local
network reserves)."""

from kubemill.engines.base import Engine
from kubemill.engines.jax.api import JAXJOB
from kubemill.engines.jax.framework import Jax

ENGINE = Engine(JAXJOB, Jax(), "JAX: Workers, worker 0 coordinating (COORDINATOR_ADDRESS)")

__all__ = ["ENGINE"]
