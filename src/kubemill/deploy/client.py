"""What every ``new_cluster`` returns: a handle on a running engine cluster.

The seed's programs use ``cluster.namespace``, ``cluster.endpoint``, ``cluster.session``
and ``cluster.stop()``; a later process reattaches with the same namespace and endpoint.
Locally ``namespace`` names the cluster's own directory and process groups instead of a
Kubernetes namespace.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class ClusterError(RuntimeError):
    """A cluster could not be started, reached or stopped; the message says what to do."""


class ClusterClient(ABC):
    """A running cluster: where it is, a session on it, and how to stop it."""

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
