"""The MarsCluster kind: a Mars supervisor and its workers, kept running as a service.

Its fields mirror the keyword arguments of Mars's ``new_cluster`` (the seed, and
``kubemill.deploy.kubernetes.new_cluster``, which validates its arguments through this
model): ``supervisorNum``, ``supervisorCpu``, ``supervisorMem``, ``supervisorExtraEnv``,
``workerNum``, ``workerCpu`` and ``workerMem`` (required), ``workerSpillPaths``,
``workerCacheMem``, ``minWorkerNum``, ``workerExtraEnv``, and the ``image``.

Sizes are read as Mars reads them (:func:`parse_size`): bytes, or a number with a binary
unit whose case does not matter (``16g`` is 16 GiB, as in Mars; Kubernetes' ``Gi`` means
the same), and for ``workerCacheMem`` also a percentage of ``workerMem``. The units differ
from Kubernetes quantities (``m`` is mebibytes here, milli there), so this is a parser of
its own rather than :mod:`kubemill.core.quantity`, which the API layer cannot import
either. Both substrates' ``new_cluster`` read their arguments through this model.

A MarsCluster never succeeds: it is ``Ready`` while every supervisor and at least
``minWorkerNum`` workers are ready, with ``status.endpoint`` the supervisors' web address.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import ClassVar

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel
from kubemill.api.clusters import ClusterOptions
from kubemill.api.common import (
    API_VERSION,
    MAX_REPLICAS,
    CleanPodPolicy,
    Job,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
)
from kubemill.api.errors import FieldError
from kubemill.api.kinds import AGE_COLUMN, STATE_COLUMN, KindApi, PrinterColumn
from kubemill.api.kube import Container, PodSpec, PodTemplateSpec
from kubemill.version import __version__

MARS_REPLICA_TYPES = ("Supervisor", "Worker")
"""A Mars cluster's roles, in the order they start."""

DEFAULT_IMAGE = f"kubemill-mars:{__version__}"
"""The image every pod runs when ``image`` is not given: the one ``scripts/build-image.sh
mars`` builds, Mars 0.10.0 with its pins and this kubemill, whose in-pod entrypoint
(``python -m kubemill.engines.mars.pod.entrypoint``) the pods run. (Mars's own
``marsproject/mars`` has no kubemill.) A cluster pulls it from a registry it can reach: push it
there and give that name.
The local substrate maps ``kubemill-mars*`` (and ``marsproject/mars*``) to the Mars
environment."""

_UNITS: dict[str, int] = {
    "": 1,
    "k": 1 << 10,
    "m": 1 << 20,
    "g": 1 << 30,
    "t": 1 << 40,
    "p": 1 << 50,
    "e": 1 << 60,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgtpe]?)(?:ib?|b)?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*%\s*$")


class SizeError(ValueError):
    """A size that is not bytes, a number with a unit, or (where allowed) a percentage."""


def parse_size(value: int | float | str) -> int:
    """Bytes from a Mars size: ``1073741824``, ``"1g"``, ``"1.5G"``, ``"512m"``, ``"2Gi"``.

    Units are binary and case-insensitive, as Mars's own ``parse_readable_size`` reads
    them (``k``, ``m``, ``g``, ``t``, ``p``, ``e``, optionally followed by ``b``/``ib``).
    """
    if isinstance(value, bool):
        raise SizeError(f"{value!r} is not a size")
    if isinstance(value, int | float):
        number = Decimal(str(value))
        unit = ""
    else:
        match = _SIZE.match(value)
        if match is None:
            raise SizeError(
                f"{value!r} is not a size: give bytes or a number with a unit "
                "(k, m, g, t; binary, e.g. '16g')"
            )
        try:
            number = Decimal(match.group(1))
        except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
            raise SizeError(f"{value!r} is not a size") from None
        unit = match.group(2).lower()
    size = int(number * _UNITS[unit])
    if size <= 0:
        raise SizeError(f"{value!r} is not a positive size")
    return size


def parse_fraction(value: int | float | str) -> Decimal | None:
    """The fraction a percentage stands for (``"20%"`` -> 0.2), or None if it is none."""
    if not isinstance(value, str):
        return None
    match = _PERCENT.match(value)
    if match is None:
        return None
    fraction = Decimal(match.group(1)) / 100
    if not 0 < fraction <= 1:
        raise SizeError(f"{value!r} is not a percentage between 0 and 100")
    return fraction


def parse_cache_size(value: int | float | str, memory: int) -> int:
    """Bytes of a worker's cache: a size, or a percentage of the worker's ``memory``."""
    fraction = parse_fraction(value)
    if fraction is not None:
        return max(int(fraction * memory), 1)
    return parse_size(value)


def cpu_text(cpu: float) -> str:
    """A CPU count as Kubernetes (and ``MARS_CPU_TOTAL``) take it: ``1``, ``500m``."""
    milli = round(Decimal(str(cpu)) * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
Size = int | str
"""A size as written: bytes, or a string with a unit (``"16g"``)."""


class MarsClusterSpec(KubeModel):
    """What the cluster is made of; ``new_cluster``'s keyword arguments, camelCased."""

    image: str | None = None
    """The image of every pod (default :data:`DEFAULT_IMAGE`)."""
    supervisor_num: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    supervisor_cpu: float = Field(default=1, ge=0.001, le=1024)
    supervisor_mem: Size = "4g"
    supervisor_extra_env: dict[str, str] | None = None
    worker_num: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    worker_cpu: float = Field(ge=0.001, le=1024)
    worker_mem: Size
    worker_spill_paths: list[str] | None = None
    """Directories on each worker's node where it spills data (hostPath volumes)."""
    worker_cache_mem: Size | None = None
    """Shared memory for the worker's cache: a size, or a percentage of ``workerMem``."""
    min_worker_num: int | None = Field(default=None, ge=0, le=MAX_REPLICAS)
    """Workers that must be ready for the cluster to be (default ``workerNum``)."""
    worker_extra_env: dict[str, str] | None = None

    @field_validator("supervisor_mem", "worker_mem")
    @classmethod
    def _size(cls, value: Size) -> Size:
        try:
            parse_size(value)
        except SizeError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("worker_cache_mem")
    @classmethod
    def _cache(cls, value: Size | None) -> Size | None:
        if value is None:
            return None
        try:
            if parse_fraction(value) is None:
                parse_size(value)
        except SizeError as exc:
            raise ValueError(f"{exc}; or a percentage of workerMem, e.g. '20%'") from None
        return value

    @field_validator("worker_spill_paths")
    @classmethod
    def _absolute(cls, value: list[str] | None) -> list[str] | None:
        for path in value or ():
            if not path.startswith("/"):
                raise ValueError(f"{path!r} is not an absolute path on the node")
            if ":" in path:
                raise ValueError(f"{path!r} has a ':', which separates MARS_SPILL_DIRS")
        return value

    @field_validator("supervisor_extra_env", "worker_extra_env")
    @classmethod
    def _env_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name in value or {}:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid environment variable name")
        return value

    # --- derived -------------------------------------------------------------------------

    @property
    def supervisor_mem_bytes(self) -> int:
        return parse_size(self.supervisor_mem)

    @property
    def worker_mem_bytes(self) -> int:
        return parse_size(self.worker_mem)

    @property
    def worker_cache_bytes(self) -> int | None:
        if self.worker_cache_mem is None:
            return None
        return parse_cache_size(self.worker_cache_mem, self.worker_mem_bytes)

    @property
    def ready_workers_needed(self) -> int:
        """``minWorkerNum``, else every worker."""
        return self.worker_num if self.min_worker_num is None else self.min_worker_num


class ServiceStatus(JobStatus):
    """The status of a service cluster (:class:`~kubemill.frameworks.ServiceCluster`): the
    common one plus where it serves and how many of its pods are ready; the core writes
    both (:mod:`kubemill.core.service`)."""

    endpoint: str | None = None
    """``http://<host IP of a node running a supervisor>:<nodePort>``, once Ready."""
    ready_replicas: dict[str, int] = Field(default_factory=dict)
    """Ready pods by replica type (``Supervisor``, ``Worker``)."""


class MarsClusterStatus(ServiceStatus):
    """A Mars cluster's status: Ready (never Succeeded), its endpoint, its ready pods."""


class MarsCluster(Job):
    """A Mars cluster: supervisors and workers as Deployments, never Succeeded."""

    KIND: ClassVar[str] = "MarsCluster"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = MARS_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = "mars"
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ALWAYS
    """Of the pods: a Deployment restarts them; a service is never done."""
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True

    kind: str = "MarsCluster"
    spec: MarsClusterSpec
    status: MarsClusterStatus = Field(default_factory=MarsClusterStatus)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """Supervisor and Worker counts, and the image (the pods themselves are the
        Deployments')."""
        # The container names the image, which picks the local substrate's environment.
        template = PodTemplateSpec(
            spec=PodSpec(
                containers=[Container(name="mars", image=self.spec.image or DEFAULT_IMAGE)]
            )
        )
        return {
            rtype: ReplicaSpec(
                replicas=count, restart_policy=RestartPolicy.ALWAYS, template=template
            )
            for rtype, count in (
                ("Supervisor", self.spec.supervisor_num),
                ("Worker", self.spec.worker_num),
            )
        }

    @property
    def run_policy(self) -> RunPolicy:
        """A service's: nothing ends it but a stop or its deletion."""
        return RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)

    def kind_errors(self) -> list[FieldError]:
        errors: list[FieldError] = []
        spec = self.spec
        if spec.min_worker_num is not None and spec.min_worker_num > spec.worker_num:
            errors.append(
                FieldError(
                    "spec.minWorkerNum",
                    f"{spec.min_worker_num} is more than workerNum ({spec.worker_num})",
                    "lower minWorkerNum or raise workerNum",
                )
            )
        cache = spec.worker_cache_bytes
        if cache is not None and cache > spec.worker_mem_bytes:
            errors.append(
                FieldError(
                    "spec.workerCacheMem",
                    f"{spec.worker_cache_mem!r} is more than workerMem ({spec.worker_mem!r})",
                    "the cache is part of the worker's memory: give less, or a percentage",
                )
            )
        return errors


MARSCLUSTER = KindApi(
    model=MarsCluster,
    plural="marsclusters",
    short_names=("mars",),
    printer_columns=(
        STATE_COLUMN,
        PrinterColumn("Workers", ".status.readyReplicas.Worker", type="integer"),
        PrinterColumn("Endpoint", ".status.endpoint"),
        AGE_COLUMN,
    ),
)
"""The MarsCluster kind's API: versions and CRD."""


def cluster_manifest(name: str, options: ClusterOptions) -> dict[str, object]:
    """The MarsCluster ``kubemill cluster create mars`` makes of its options (only the
    options given; the kind's defaults otherwise)."""
    spec: dict[str, object] = {
        "workerNum": options.workers,
        "workerCpu": options.worker_cpu,
        "workerMem": options.worker_mem,
        "supervisorNum": options.supervisors,
    }
    env = dict(options.env) or None
    optional = {
        "supervisorCpu": options.supervisor_cpu,
        "supervisorMem": options.supervisor_mem,
        "minWorkerNum": options.min_workers,
        "workerCacheMem": options.worker_cache_mem,
        "image": options.image,
        "supervisorExtraEnv": env,
        "workerExtraEnv": env,
    }
    spec.update({key: value for key, value in optional.items() if value is not None})
    return {
        "apiVersion": API_VERSION,
        "kind": MarsCluster.KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


__all__ = [
    "DEFAULT_IMAGE",
    "MARSCLUSTER",
    "MARS_REPLICA_TYPES",
    "MarsCluster",
    "MarsClusterSpec",
    "MarsClusterStatus",
    "ServiceStatus",
    "SizeError",
    "cluster_manifest",
    "cpu_text",
    "parse_cache_size",
    "parse_fraction",
    "parse_size",
]
