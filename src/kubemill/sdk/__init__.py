"""The Python SDK: ``JobClient(substrate=...)`` with the same methods on every substrate.

The public surface: :class:`JobClient`, the records it returns, the errors it raises,
and :func:`register_backend` for substrates that plug in.
"""

from typing import TYPE_CHECKING, Any

from kubemill.sdk.backends import BACKENDS, BackendFactory, backend_for, register_backend
from kubemill.sdk.client import (
    JobClient,
    JobSource,
    MissingPackages,
    NeverFinishes,
    load_source,
)
from kubemill.substrates.base import JobExists, JobNotFound, JobView, ReplicaView, SubstrateError
from kubemill.substrates.history import JobRecord

if TYPE_CHECKING:
    # A read's records, loaded on first use (:func:`__getattr__`): submitting or listing
    # jobs makes none (see :mod:`kubemill.substrates.reads`).
    from kubemill.substrates.reads import EventRecord, LogLine

READS = ("EventRecord", "LogLine")
"""The names of :mod:`kubemill.substrates.reads` offered here."""

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


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A name of :data:`READS`, imported now (once); any other is not there."""
        if name not in READS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.substrates import reads

        value = getattr(reads, name)
        globals()[name] = value
        return value
