"""Spark's cluster-mode submission to an API server, as Spark's own client sends it, with no JVM.

:func:`submit` sends what :func:`kubemill.engines.spark.framework.cluster_mode.driver_objects`
built, in Spark's order: ``POST`` the driver pod, then a server-side apply (``PATCH`` with
``application/apply-patch+yaml``, forced) of its service, NetworkPolicy and ConfigMap, each
owned by the pod just created. If one of those fails the driver pod is deleted again (its
dependents go with it), as Spark's client does, and the error is raised.

:func:`generated` draws the per-submission values (ids, the local directory's UUID, the
time, the user) that the pure builder takes; :func:`submit_mode` draws, builds and sends
for a :class:`~kubemill.engines.spark.api.submit.ClusterMode` (a program's entry).
:func:`find_drivers`, :func:`kill` and :func:`driver_state` serve ``--kill`` and
``--status`` (``[NAMESPACE:]POD``, a glob allowed), as Spark's ``K8SSparkSubmitOperation``
does: driver pods, by their ``spark-role=driver`` label.
"""

from __future__ import annotations

import contextlib
import fnmatch
import getpass
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubemill.engines.spark.api.names import DRIVER_CONTAINER
from kubemill.engines.spark.api.submit import ClusterMode
from kubemill.engines.spark.framework.cluster_mode import (
    SPARK_VERSION,
    DriverObjects,
    Generated,
    driver_objects,
)
from kubemill.engines.spark.framework.wire import LABEL_ROLE
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.client.connection import Http
from kubemill.substrates.kubernetes.client.errors import KubeApiError, Request
from kubemill.substrates.kubernetes.transport import api_path

if TYPE_CHECKING:
    # Only waiting and --status read pods: submitting stays free of the job models.
    from kubemill.substrates.kubernetes.observe import PodSnapshot

FIELD_MANAGER = "kubemill"
APPLY = "application/apply-patch+yaml"
_PATHS = {
    "Service": ("", "v1", "services"),
    "NetworkPolicy": ("networking.k8s.io", "v1", "networkpolicies"),
    "ConfigMap": ("", "v1", "configmaps"),
}


@dataclass(frozen=True)
class Submitted:
    """A driver pod created, with its dependents."""

    namespace: str
    pod_name: str
    pod_uid: str
    app_id: str

    @property
    def submission_id(self) -> str:
        """Spark's submission id, what ``--kill`` and ``--status`` take."""
        return f"{self.namespace}:{self.pod_name}"


def unique_id(now_ms: int) -> str:
    """16 hex digits as Spark's ``KubernetesUtils.uniqueID``: 3 random bytes, then the
    time's low 40 bits."""
    return f"{os.urandom(3).hex()}{now_ms & 0xFF_FFFF_FFFF:010x}"


def random_uuid() -> str:
    """A random (version 4) UUID as ``str(uuid.uuid4())`` writes it, from ``os.urandom`` as
    ``uuid4`` draws it: importing ``uuid`` (and ``secrets``) loads ``platform`` and OpenSSL,
    a sixth of a CLI submission's time."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def submitting_user() -> str:
    """``SPARK_USER`` as Spark reads it: the variable, else the login name."""
    try:
        return os.environ.get("SPARK_USER") or getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        return str(os.getuid())


def generated(*, spark_version: str, user: str | None = None) -> Generated:
    """Fresh ids, the current time and the user, for one submission."""
    now_ms = time.time_ns() // 1_000_000
    return Generated(
        app_id=f"spark-{random_uuid().replace('-', '')}",
        prefix_id=unique_id(now_ms),
        conf_map_id=unique_id(now_ms),
        service_id=unique_id(now_ms),
        local_dir_id=random_uuid(),
        submit_time_ms=now_ms,
        user=user if user is not None else submitting_user(),
        spark_version=spark_version,
    )


def submit(http: Http, objects: DriverObjects) -> Submitted:
    """Create the driver pod, then apply its dependents owned by it (see the module doc)."""
    namespace = objects.namespace
    pod = http.json(
        Request("create", "pods", "", namespace, objects.pod_name),
        "POST",
        api_path(group="", version="v1", plural="pods", namespace=namespace),
        body=objects.pod,
    )
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    try:
        for obj in objects.owned(uid):
            group, version, plural = _PATHS[obj["kind"]]
            name = obj["metadata"]["name"]
            http.json(
                Request("patch", plural, group, namespace, name),
                "PATCH",
                api_path(
                    group=group, version=version, plural=plural, namespace=namespace, name=name
                ),
                query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                body=obj,
                content_type=APPLY,
            )
    except SubstrateError:
        _delete_quietly(http, namespace, objects.pod_name)
        raise
    app_id = str(objects.pod["metadata"]["labels"].get("spark-app-selector", ""))
    return Submitted(namespace, objects.pod_name, uid, app_id)


def submit_mode(http: Http, mode: ClusterMode) -> Submitted:
    """One cluster-mode submission: fresh ids, the objects built, sent (:func:`submit`).
    Raises :class:`~kubemill.engines.spark.framework.cluster_mode.ClusterModeError` for confs
    that cannot be built, :class:`SubstrateError` for what the API server refused."""
    return submit(http, driver_objects(mode, generated(spark_version=SPARK_VERSION)))


def _delete_quietly(http: Http, namespace: str, name: str) -> None:
    # The first error is the one to report.
    with contextlib.suppress(SubstrateError):
        http.json(
            Request("delete", "pods", "", namespace, name),
            "DELETE",
            api_path(group="", version="v1", plural="pods", namespace=namespace, name=name),
        )


TERMINAL_PHASES = ("Succeeded", "Failed")


def wait_for_driver(
    http: Http,
    submitted: Submitted,
    *,
    interval: float,
    on_phase: Callable[[PodSnapshot], None],
) -> PodSnapshot:
    """Read the driver pod every ``interval`` seconds until it has succeeded or failed, as
    Spark's client waits (``spark.kubernetes.submission.waitAppCompletion``); ``on_phase``
    is told each time the phase changes. The pod at the end. Raises :class:`KubeApiError`
    (404) if the pod is deleted meanwhile."""
    from kubemill.substrates.kubernetes.observe import PodSnapshot

    path = api_path(
        group="",
        version="v1",
        plural="pods",
        namespace=submitted.namespace,
        name=submitted.pod_name,
    )
    request = Request("get", "pods", "", submitted.namespace, submitted.pod_name)
    phase = None
    while True:
        pod = PodSnapshot.of(http.json(request, "GET", path))
        if pod.phase != phase:
            phase = pod.phase
            on_phase(pod)
        if phase in TERMINAL_PHASES:
            return pod
        time.sleep(interval)


def driver_exit(pod: PodSnapshot) -> tuple[int | None, str]:
    """The driver container's exit code and reason (``Error``, ``OOMKilled`` ...), when known."""
    container = pod.container(DRIVER_CONTAINER)
    if container is None:
        return None, pod.reason
    return container.exit_code, container.reason or pod.reason


def parse_submission_id(text: str, *, default_namespace: str) -> tuple[str, str]:
    """``NAMESPACE:POD`` or ``POD`` (in ``default_namespace``) -> (namespace, pod glob)."""
    namespace, sep, pattern = text.partition(":")
    if not sep:
        namespace, pattern = default_namespace, text
    if not namespace or not pattern:
        raise ValueError(f"{text!r} is not [NAMESPACE:]DRIVER-POD")
    return namespace, pattern


def find_drivers(http: Http, namespace: str, pattern: str) -> list[dict[str, Any]]:
    """The driver pods in ``namespace`` whose names match the glob ``pattern``."""
    found = http.json(
        Request("list", "pods", "", namespace),
        "GET",
        api_path(group="", version="v1", plural="pods", namespace=namespace),
        query=[("labelSelector", f"{LABEL_ROLE}=driver")],
    )
    return [
        pod
        for pod in found.get("items") or []
        if fnmatch.fnmatchcase(str(pod["metadata"]["name"]), pattern)
    ]


def kill(http: Http, namespace: str, pattern: str, *, grace: int | None = None) -> list[str]:
    """Delete the matching driver pods (their service, policy and ConfigMap go with them);
    the names deleted."""
    deleted = []
    for pod in find_drivers(http, namespace, pattern):
        name = str(pod["metadata"]["name"])
        query = [] if grace is None else [("gracePeriodSeconds", str(grace))]
        try:
            http.json(
                Request("delete", "pods", "", namespace, name),
                "DELETE",
                api_path(group="", version="v1", plural="pods", namespace=namespace, name=name),
                query=query,
            )
        except KubeApiError as exc:
            if exc.status == 404:
                continue  # gone meanwhile: what was asked
            raise
        deleted.append(name)
    return deleted


def driver_state(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What ``--status`` prints of a driver pod, as Spark's ``formatPodState`` names it."""
    from kubemill.substrates.kubernetes.observe import PodSnapshot

    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    seen = PodSnapshot.of(pod)
    labels = ", ".join(f"{k} -> {v}" for k, v in sorted((metadata.get("labels") or {}).items()))
    rows = [
        ("pod name", seen.name),
        ("namespace", str(metadata.get("namespace", ""))),
        ("labels", labels),
        ("pod uid", seen.uid or "N/A"),
        ("creation time", seen.created or "N/A"),
        ("service account name", str(spec.get("serviceAccountName", "N/A"))),
        ("node name", str(spec.get("nodeName", "N/A"))),
        ("start time", seen.started or "N/A"),
        ("pod phase", seen.phase + (f" ({seen.reason})" if seen.reason else "")),
    ]
    for container in seen.containers:
        if container.running:
            text = "running"
        elif container.exit_code is not None:
            text = f"terminated, exit code {container.exit_code}"
        else:
            text = "waiting"
        if container.reason:
            text += f" ({container.reason})"
        rows.append((f"container {container.name}", text))
    return rows


__all__ = [
    "APPLY",
    "FIELD_MANAGER",
    "Submitted",
    "driver_exit",
    "driver_state",
    "find_drivers",
    "generated",
    "kill",
    "parse_submission_id",
    "random_uuid",
    "submit",
    "submit_mode",
    "submitting_user",
    "unique_id",
    "wait_for_driver",
]
