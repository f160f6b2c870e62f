"""The client side of the Kubernetes substrate: what ``JobClient(substrate="kubernetes")`` calls.

One module per concern, this package's public names re-exported here:

- :mod:`.connection`: which cluster (kubeconfig, context, service account) and requests
  through the substrate's one HTTP layer (:mod:`kubemill.substrates.kubernetes.transport`);
- :mod:`.errors`: errors that keep the API's answer and say what to do;
- :mod:`.kinds`: the job kinds' REST paths (in our group and the upstream ones) and names,
  job objects read and sent;
- :mod:`.lookup`: a job found by name, and jobs listed, in our group and the served upstream
  ones;
- :mod:`.views`: replicas as ``get`` shows them, from the pod observation the operator
  uses too (:mod:`kubemill.substrates.kubernetes.observe`);
- :mod:`.logs`: reading and following the replicas' logs;
- :mod:`.events`: the job's Events;
- :mod:`.backend`: :class:`KubernetesBackend` (submit, get, list, wait, logs, events,
  interrupt, delete).

Nothing here imports the ``kubernetes`` package until a backend connects.

The names below load on first use, not when a submodule is imported: importing
``kubemill.substrates.kubernetes.client.spark_submit`` (as ``kubemill spark-submit``'s
fast path does) does not load the backend, the job models and the ``kubernetes`` package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.substrates.kubernetes.client.backend import (
        DEFAULT_OPERATOR_TIMEOUT,
        KubernetesBackend,
    )
    from kubemill.substrates.kubernetes.client.connection import Connection, connect
    from kubemill.substrates.kubernetes.client.errors import (
        AccessDenied,
        ClusterUnreachable,
        CRDsNotInstalled,
        KubeApiError,
        KubeconfigError,
        OperatorNotActing,
    )
    from kubemill.substrates.kubernetes.client.kinds import job_body, job_kinds, load_job
    from kubemill.substrates.kubernetes.client.views import pod_view, replica_views

__all__ = [
    "DEFAULT_OPERATOR_TIMEOUT",
    "AccessDenied",
    "CRDsNotInstalled",
    "ClusterUnreachable",
    "Connection",
    "KubeApiError",
    "KubeconfigError",
    "KubernetesBackend",
    "OperatorNotActing",
    "connect",
    "job_body",
    "job_kinds",
    "load_job",
    "pod_view",
    "replica_views",
]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A public name, from the submodule that holds it (loaded now, once)."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.substrates.kubernetes.client import backend, connection, errors, kinds, views

        for module in (backend, connection, errors, kinds, views):
            if hasattr(module, name):
                value = getattr(module, name)
                globals()[name] = value
                return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
