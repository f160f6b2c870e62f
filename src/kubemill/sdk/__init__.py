"""The Python SDK: ``JobClient(substrate=...)`` with the same methods on every substrate.

The public surface: :class:`JobClient`, the records it returns, the errors it raises,
and :func:`register_backend` for substrates that plug in.
"""

from typing import TYPE_CHECKING

from kubemill.sdk.backends import BACKENDS, BackendFactory, backend_for, register_backend
from kubemill.sdk.client import (
    JobClient,
    JobSource,
    MissingPackages,
    NeverFinishes,
    load_source,
)
from kubemill.substrates.base import JobExists, JobNotFound, JobView, ReplicaView, SubstrateError
from kubemill.substrates.lazy_names import names_loaded_on_use

if TYPE_CHECKING:
    # A read's records, loaded on first use (:func:`__getattr__`): submitting or listing
    # jobs makes none (see :mod:`kubemill.substrates.reads`), nor a deleted job's record.
    from kubemill.substrates.history import JobRecord
    from kubemill.substrates.reads import EventRecord, LogLine

_WHERE = {
    "EventRecord": "kubemill.substrates.reads",
    "JobRecord": "kubemill.substrates.history",
    "LogLine": "kubemill.substrates.reads",
}
"""The names offered here that are loaded on first use, and their modules."""

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
    __getattr__ = names_loaded_on_use(__name__, _WHERE)
