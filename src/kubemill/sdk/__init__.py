"""The Python SDK: ``JobClient(substrate=...)`` with the same methods on every substrate.

The public surface: :class:`JobClient`, the records it returns, the errors it raises,
and :func:`register_backend` for substrates that plug in.
"""

from kubemill.sdk.backends import BACKENDS, BackendFactory, backend_for, register_backend
from kubemill.sdk.client import (
    JobClient,
    JobSource,
    MissingPackages,
    NeverFinishes,
    load_source,
)
from kubemill.substrates.base import (
    EventRecord,
    JobExists,
    JobNotFound,
    JobView,
    LogLine,
    ReplicaView,
    SubstrateError,
)
from kubemill.substrates.history import JobRecord

__all__ = [
    "BACKENDS",
    "BackendFactory",
    "EventRecord",
    "JobClient",
    "JobExists",
    "JobNotFound",
    "JobRecord",
    "JobSource",
    "JobView",
    "LogLine",
    "MissingPackages",
    "NeverFinishes",
    "ReplicaView",
    "SubstrateError",
    "backend_for",
    "load_source",
    "register_backend",
]
