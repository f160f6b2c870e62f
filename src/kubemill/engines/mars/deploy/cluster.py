"""What every Mars ``new_cluster`` shares, on either substrate: its keyword arguments read
through the cluster's model (:func:`cluster_spec`, errors naming the argument), the
cluster as a job of its kind (:func:`cluster_job`), and the handle returned
(:class:`ClusterClient`: ``namespace``, ``endpoint``, a Mars ``session``, ``stop()``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import ValidationError

from kubemill.api.errors import FieldError
from kubemill.engines.mars.api import MarsCluster, MarsClusterSpec

CLUSTER_KIND = MarsCluster.KIND
"""The kind of the jobs a local ``new_cluster`` submits."""

_CAMEL_TO_ARGUMENT = {
    name: (info.alias or name) for name, info in MarsClusterSpec.model_fields.items()
}


class ClusterError(RuntimeError):
    """A cluster could not be started, reached or stopped; the message says what to do."""


class ClusterClient(ABC):
    """A running cluster: where it is, a session on it, and how to stop it.

    The seed's programs use ``cluster.namespace``, ``cluster.endpoint``, ``cluster.session``
    and ``cluster.stop()``; a later process reattaches with the same namespace and endpoint.
    Locally ``namespace`` names the cluster's job instead of a Kubernetes namespace.
    """

    def __init__(self, namespace: str, endpoint: str) -> None:
        self.namespace = namespace
        self.endpoint = endpoint
        self._session: Any = None

    @property
    def session(self) -> Any:
        """A Mars session connected to :attr:`endpoint`, made on first use (and made the
        default session, as Mars's own cluster clients do). Needs Mars in this process."""
        if self._session is None:
            try:
                from mars.session import new_session  # type: ignore[import-not-found]
            except ImportError as exc:
                raise ClusterError(
                    "this Python has no Mars: run the program with the Mars environment's "
                    "interpreter (`kubemill env python mars`)"
                ) from exc
            self._session = new_session(self.endpoint, default=True)
        return self._session

    @abstractmethod
    def stop(self, wait: bool = True, timeout: float | None = None) -> None:
        """Stop the cluster and free everything it holds; with ``wait``, return only once
        it is gone (raising :class:`ClusterError` after ``timeout`` seconds)."""

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.namespace!r}, endpoint={self.endpoint!r})"


def _argument_errors(errors: list[FieldError]) -> str:
    lines = []
    for error in errors:
        path = error.path.removeprefix("spec.")
        head, _, rest = path.partition(".")
        argument = next((k for k, v in _CAMEL_TO_ARGUMENT.items() if v == head), head)
        where = f"{argument}.{rest}" if rest else argument
        hint = f" ({error.hint})" if error.hint else ""
        lines.append(f"{where}: {error.message}{hint}")
    return "; ".join(lines)


def cluster_spec(**arguments: Any) -> MarsClusterSpec:
    """The cluster's spec from ``new_cluster``'s arguments (None: the kind's default);
    :class:`ClusterError` naming each bad argument otherwise."""
    try:
        spec = MarsClusterSpec.model_validate({k: v for k, v in arguments.items() if v is not None})
    except ValidationError as exc:
        errors = [
            FieldError(
                ".".join(str(part) for part in error["loc"]),
                "is required" if error["type"] == "missing" else error["msg"],
            )
            for error in exc.errors()
        ]
        raise ClusterError(f"new_cluster: {_argument_errors(errors)}") from None
    problems = cluster_job("mars", spec).kind_errors()
    if problems:
        raise ClusterError(f"new_cluster: {_argument_errors(problems)}")
    return spec


def cluster_job(name: str, spec: MarsClusterSpec) -> MarsCluster:
    """The cluster as a job of its kind, named ``name``."""
    return MarsCluster(metadata={"name": name}, spec=spec)


__all__ = [
    "CLUSTER_KIND",
    "ClusterClient",
    "ClusterError",
    "cluster_job",
    "cluster_spec",
]
