"""How one kubemill operator process is set up: :class:`OperatorSettings`.

The CLI (``kubemill operator ...``) and ``python -m kubemill.substrates.kubernetes.operator``
both fill this dataclass and hand it to
:func:`~kubemill.substrates.kubernetes.operator.run_operator`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, fields
from typing import Literal

from kubemill.api import GROUP, VERSION
from kubemill.kinds import entries
from kubemill.substrates.kubernetes.install.names import NAME
from kubemill.substrates.kubernetes.progress import ProgressSidecar

GangSchedulerName = Literal["volcano", "scheduler-plugins"]


@dataclass(frozen=True)
class JobResource:
    """One served job resource: where its objects live in the API and which kind they are."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}"


class SettingsError(ValueError):
    """The settings contradict each other or name something unknown."""


@dataclass(frozen=True)
class OperatorSettings:
    """Everything ``kubemill operator`` can be told."""

    namespaces: list[str] | None = None
    """Serve only these namespaces (a Role in each is enough); None: see ``all_namespaces``."""

    all_namespaces: bool = False
    """Serve every namespace (needs a ClusterRole). Implied when ``namespaces`` is empty."""

    gang_scheduler_name: GangSchedulerName | None = None
    """Create a PodGroup per job for this gang scheduler; None disables gang scheduling."""

    metrics_port: int | None = 8080
    """Port of the Prometheus ``/metrics`` endpoint; None or 0 disables it."""

    health_port: int | None = 8081
    """Port of the ``/healthz`` liveness and readiness endpoint; None or 0 disables it."""

    bind_address: str = "0.0.0.0"  # noqa: S104 - a pod's probes and scrapes come from outside
    """Address the metrics and health endpoints listen on."""

    serve_upstream_groups: bool = False
    """Also reconcile the upstream groups the engines declare (``kubeflow.org/v1``'s TF
    and PyTorch jobs: replaces the Kubeflow training operator without touching its
    manifests). Never run both operators at once."""

    leader_election: bool = False
    """Take a ``coordination.k8s.io`` Lease before reconciling, so that several replicas of the
    operator can run and exactly one acts. Off: this process acts alone (one replica)."""

    lease_name: str = "kubemill-operator"
    """Name of the Lease used for leader election."""

    lease_duration_seconds: int = 15
    """How long a Lease holds without renewal: the failover time when the leader dies
    (renewed every ~1/7 of it, given up after ~2/3 of it without renewal)."""

    lease_namespace: str = field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "kubemill-system")
    )
    """Namespace of the Lease (default: ``$POD_NAMESPACE``, else ``kubemill-system``)."""

    identity: str = field(
        default_factory=lambda: (
            os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
        )
    )
    """This replica's name in the Lease and in the Events it posts (``$POD_NAME`` in a pod)."""

    workers: int = 16
    """How many jobs are reconciled at the same time."""

    api_concurrency: int = 32
    """How many API requests the operator keeps in flight at most."""

    context: str | None = None
    """kubeconfig context to use outside a cluster (inside, the service account is used)."""

    max_backoff_seconds: float = 60.0
    """Upper bound of the retry delay after API errors (it doubles from 0.2 s)."""

    history: int = 1000
    """How many records of deleted jobs to keep (the oldest are pruned); 0 keeps none.
    See :mod:`kubemill.substrates.kubernetes.operator.history`."""

    history_namespace: str = field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "kubemill-system")
    )
    """Namespace of the history records: the operator's own (``$POD_NAMESPACE``, else
    ``kubemill-system``), where ``kubemill install`` grants their ConfigMaps."""

    progress_port: int | None = None
    """Port of the progress endpoint job pods' sidecars report to
    (:mod:`~kubemill.substrates.kubernetes.operator.progress`); None or 0: no endpoint, and
    pods get no sidecar."""

    progress_image: str | None = None
    """The image of job pods' progress sidecar (the operator's own: ``kubemill install`` gives
    it); None: no sidecar, whatever ``progress_port`` says."""

    progress_url: str | None = None
    """Where the sidecars reach the endpoint; None: the operator's Service,
    ``http://kubemill-operator.<lease_namespace>.svc:<progress_port>/progress``."""

    def __post_init__(self) -> None:
        if self.namespaces and self.all_namespaces:
            raise SettingsError("namespaces and all_namespaces: give one or the other, not both")
        if self.gang_scheduler_name not in (None, "volcano", "scheduler-plugins"):
            raise SettingsError(
                f"gang_scheduler_name: unknown scheduler {self.gang_scheduler_name!r}; "
                "use volcano or scheduler-plugins"
            )
        ports = (
            ("metrics_port", self.metrics_port),
            ("health_port", self.health_port),
            ("progress_port", self.progress_port),
        )
        for name, port in ports:
            if port is not None and not 0 <= port <= 65535:
                raise SettingsError(f"{name}: {port} is not a port number (0-65535)")
        used = [port for _, port in ports if port]
        if len(used) != len(set(used)):
            raise SettingsError("metrics_port, health_port and progress_port must differ")
        if self.lease_duration_seconds < 3:
            raise SettingsError("lease_duration_seconds must be at least 3")
        if self.workers < 1 or self.api_concurrency < 1:
            raise SettingsError("workers and api_concurrency must be at least 1")
        if self.history < 0:
            raise SettingsError(f"history: {self.history} records; give 0 (none) or more")

    def describe(self) -> str:
        """Every setting as ``name=value``, for the log line at start.

        Safe to log: no setting holds a secret (credentials come from the kubeconfig or the
        service account, which the settings only name by context).
        """
        return ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))

    def progress_sidecar(self) -> ProgressSidecar | None:
        """The sidecar job pods get (None: no progress endpoint, or no image for it)."""
        if not self.progress_port or not self.progress_image:
            return None
        if self.progress_url:
            return ProgressSidecar(image=self.progress_image, url=self.progress_url)
        return ProgressSidecar.in_cluster(
            self.progress_image,
            service=NAME,  # the Service `kubemill install` puts before the endpoint
            namespace=self.lease_namespace,
            port=self.progress_port,
        )

    @property
    def clusterwide(self) -> bool:
        """Whether every namespace is served."""
        return self.all_namespaces or not self.namespaces

    def job_resources(self) -> list[JobResource]:
        """The job resources this operator reconciles (every engine's and controller's)."""
        ours = [JobResource(GROUP, VERSION, e.api.plural, e.kind) for e in entries()]
        if not self.serve_upstream_groups:
            return ours
        # Ours first, then each upstream group's kinds, in registry order.
        groups = dict.fromkeys(g for e in entries() for g in e.api.upstream_groups)
        return ours + [
            JobResource(group, version, engine.api.plural, engine.kind)
            for group, version in groups
            for engine in entries()
            if (group, version) in engine.api.upstream_groups
        ]
