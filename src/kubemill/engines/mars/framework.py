"""Mars clusters: the Kubernetes objects of one cluster, built by pure functions.

One set of builders serves both ways a Mars cluster reaches Kubernetes:
``kubemill.deploy.kubernetes.new_cluster`` (no operator: it creates these objects itself,
in a namespace of the cluster's own) and the operator reconciling a ``MarsCluster`` (the
same objects in the MarsCluster's namespace, owned by it). Names, the namespace and the
owner are passed in: nothing here is generated, timed or read.

A cluster is, in creation order: a Role that may read and watch pods (what the in-pod
entrypoints need to find the supervisors), its RoleBinding to the namespace's ``default``
ServiceAccount, the supervisors' and the workers' Deployments, and a NodePort Service
for the supervisors' web port. :data:`ENV_POD_NAME` and the other ``ENV_*`` names, the
role label, the readiness file and the command are the contract with the in-pod
entrypoints (``python -m kubemill.engines.mars.pod.entrypoint supervisor|worker``).

The framework (:class:`Mars`) plans a MarsCluster for the core as a service cluster
(:class:`~kubemill.frameworks.plan.ServiceCluster`): these objects, and how many ready
pods of each role make it Ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from kubemill.api import Job
from kubemill.engines.mars.api import (
    DEFAULT_IMAGE,
    MarsCluster,
    MarsClusterSpec,
    cpu_text,
    parse_cache_size,
)
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_PREFIX,
    LABEL_REPLICA_TYPE,
    Network,
    Plan,
    ServiceCluster,
    ServicePolicy,
    service_fields,
)

# --- the contract with the in-pod entrypoints ---------------------------------------------

ENV_POD_NAME = "MARS_K8S_POD_NAME"
ENV_POD_NAMESPACE = "MARS_K8S_POD_NAMESPACE"
ENV_POD_IP = "MARS_K8S_POD_IP"
ENV_CPU_TOTAL = "MARS_CPU_TOTAL"
ENV_MEMORY_TOTAL = "MARS_MEMORY_TOTAL"
"""Bytes."""
ENV_SPILL_DIRS = "MARS_SPILL_DIRS"
"""Colon-separated directories inside the worker's container."""
ENV_CACHE_MEM_SIZE = "MARS_CACHE_MEM_SIZE"
"""Bytes."""
ENV_SUPERVISOR_SERVICE = "MARS_SUPERVISOR_SERVICE"
"""The name of the Service in front of the supervisors."""
ENV_SERVICE_PORT = "MARS_SERVICE_PORT"
"""The port a supervisor or worker serves Mars's actor protocol on (:data:`SERVICE_PORT`)."""
ENV_WEB_PORT = "MARS_WEB_PORT"
"""The port a supervisor serves its web API on (:data:`WEB_PORT`)."""
ENV_SUPERVISORS = "KUBEMILL_MARS_SUPERVISORS"
"""Explicit ``host:port`` supervisor addresses, comma-separated: how the entrypoints find
the supervisors without a Kubernetes API (the local substrate gives them)."""
ENV_READY_FILE = "KUBEMILL_MARS_READY_FILE"
"""Where the entrypoint writes its readiness file (default :data:`READY_FILE`)."""

LABEL_MARS_ROLE = LABEL_PREFIX + "mars-role"
"""``supervisor`` or ``worker``: how the entrypoints find the supervisors' pods."""
LABEL_MARS_CLUSTER = LABEL_PREFIX + "mars-cluster"
"""The cluster's name."""

READY_FILE = "/tmp/kubemill-mars-ready"  # noqa: S108 - inside the container, by contract
"""The entrypoint writes it once its Mars service is really up."""
READINESS_COMMAND = ("test", "-f", READY_FILE)
ENTRYPOINT = ("python", "-m", "kubemill.engines.mars.pod.entrypoint")

SERVICE_PORT = 7103
"""Mars's own default service port (``mars-supervisor -p``)."""
WEB_PORT = 7104
"""Mars's own default web port (``mars-supervisor -w``)."""
CONTAINER = "mars"
SPILL_MOUNT = "/mnt/spill-{index}"
SHM_PATH = "/dev/shm"  # noqa: S108 - the container's shared memory, not a temp file
DEFAULT_WORKER_CACHE_MEM = "40%"
"""A worker's cache when ``workerCacheMem`` is not given: Mars's own Kubernetes default (its
``DEFAULT_WORKER_CACHE_MEM``). The worker's plasma store takes its size, and /dev/shm must
hold it (a container's own is 64 MiB), so every worker gets the memory emptyDir."""

ROLES = {"Supervisor": "supervisor", "Worker": "worker"}
"""Replica type -> the role label and entrypoint argument."""


def object_names(cluster: str) -> dict[str, str]:
    """The names of one cluster's objects: Role and RoleBinding, the two Deployments and
    the web Service, all derived from the cluster's name."""
    return {
        "Role": f"{cluster}-pod-reader",
        "RoleBinding": f"{cluster}-pod-reader",
        "Supervisor": f"{cluster}-supervisor",
        "Worker": f"{cluster}-worker",
        "Service": f"{cluster}-web",
    }


def cluster_labels(cluster: str) -> dict[str, str]:
    """Labels on every object of the cluster (the operator's caches select by the first)."""
    return {LABEL_JOB_NAME: cluster, LABEL_MARS_CLUSTER: cluster}


def role_labels(cluster: str, replica_type: str) -> dict[str, str]:
    """Labels of one role's pods (and its Deployment's selector)."""
    return {
        **cluster_labels(cluster),
        LABEL_MARS_ROLE: ROLES[replica_type],
        LABEL_REPLICA_TYPE: ROLES[replica_type],
    }


def _metadata(
    name: str, namespace: str, labels: Mapping[str, str], owner: Mapping[str, Any] | None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    return meta


def build_namespace(namespace: str, cluster: str) -> dict[str, Any]:
    """The cluster's own namespace (``new_cluster`` only: ``stop()`` deletes it whole)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": cluster_labels(cluster)},
    }


def build_role(
    cluster: str, namespace: str, *, owner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A Role that reads and watches pods: what the entrypoints need to find supervisors."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(
            object_names(cluster)["Role"], namespace, cluster_labels(cluster), owner
        ),
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }


def build_role_binding(
    cluster: str, namespace: str, *, owner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The Role bound to the namespace's ``default`` ServiceAccount (the pods run as it)."""
    names = object_names(cluster)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(names["RoleBinding"], namespace, cluster_labels(cluster), owner),
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names["Role"]},
    }


def _number(value: float) -> str:
    """``1`` for 1.0, ``0.5`` for 0.5: how Mars reads ``MARS_CPU_TOTAL``."""
    return format(Decimal(str(value)).normalize(), "f")


def _env(
    cluster: str,
    cpu: float,
    memory: int,
    extra: Mapping[str, str] | None,
    more: Sequence[tuple[str, str]] = (),
) -> list[dict[str, Any]]:
    """The entrypoint's environment, then the caller's extras (which replace ours by name)."""
    env: list[dict[str, Any]] = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in (
            (ENV_POD_NAME, "metadata.name"),
            (ENV_POD_NAMESPACE, "metadata.namespace"),
            (ENV_POD_IP, "status.podIP"),
        )
    ]
    plain = [
        (ENV_CPU_TOTAL, _number(cpu)),
        (ENV_MEMORY_TOTAL, str(memory)),
        (ENV_SUPERVISOR_SERVICE, object_names(cluster)["Service"]),
        (ENV_SERVICE_PORT, str(SERVICE_PORT)),
        (ENV_WEB_PORT, str(WEB_PORT)),
        *more,
    ]
    env += [{"name": name, "value": value} for name, value in plain]
    for name, value in (extra or {}).items():
        env = [e for e in env if e["name"] != name]
        env.append({"name": name, "value": value})
    return env


def _deployment(
    cluster: str,
    namespace: str,
    spec: MarsClusterSpec,
    replica_type: str,
    *,
    replicas: int,
    cpu: float,
    memory: int,
    env: list[dict[str, Any]],
    ports: Sequence[tuple[str, int]],
    volumes: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    owner: Mapping[str, Any] | None,
) -> dict[str, Any]:
    labels = role_labels(cluster, replica_type)
    resources = {"cpu": cpu_text(cpu), "memory": str(memory)}
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image or DEFAULT_IMAGE,
        "command": [*ENTRYPOINT, ROLES[replica_type]],
        "env": env,
        "ports": [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in ports],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "readinessProbe": {
            "exec": {"command": list(READINESS_COMMAND)},
            "initialDelaySeconds": 1,
            "periodSeconds": 2,
            "failureThreshold": 3,
        },
    }
    if volumes:
        container["volumeMounts"] = [mount for _, mount in volumes]
    pod_spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod_spec["volumes"] = [volume for volume, _ in volumes]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(object_names(cluster)[replica_type], namespace, labels, owner),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def build_supervisors(
    cluster: str,
    namespace: str,
    spec: MarsClusterSpec,
    *,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The supervisors' Deployment: ``supervisorNum`` pods serving Mars and its web API."""
    memory = spec.supervisor_mem_bytes
    return _deployment(
        cluster,
        namespace,
        spec,
        "Supervisor",
        replicas=spec.supervisor_num,
        cpu=spec.supervisor_cpu,
        memory=memory,
        env=_env(cluster, spec.supervisor_cpu, memory, spec.supervisor_extra_env),
        ports=(("service", SERVICE_PORT), ("web", WEB_PORT)),
        volumes=(),
        owner=owner,
    )


def build_workers(
    cluster: str,
    namespace: str,
    spec: MarsClusterSpec,
    *,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The workers' Deployment: spill paths as hostPath volumes, the cache (``workerCacheMem``,
    else :data:`DEFAULT_WORKER_CACHE_MEM` of the worker's memory) as ``MARS_CACHE_MEM_SIZE``,
    the size of the worker's plasma store, and a memory-backed emptyDir at /dev/shm sized to
    it (a small /dev/shm makes Mars die of SIGBUS)."""
    memory = spec.worker_mem_bytes
    volumes: list[tuple[dict[str, Any], dict[str, Any]]] = []
    spill_dirs: list[str] = []
    for index, path in enumerate(spec.worker_spill_paths or ()):
        name = f"spill-{index}"
        mount = SPILL_MOUNT.format(index=index)
        spill_dirs.append(mount)
        volumes.append(
            (
                {"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}},
                {"name": name, "mountPath": mount},
            )
        )
    more: list[tuple[str, str]] = []
    if spill_dirs:
        more.append((ENV_SPILL_DIRS, ":".join(spill_dirs)))
    cache = spec.worker_cache_bytes
    if cache is None:
        cache = parse_cache_size(DEFAULT_WORKER_CACHE_MEM, memory)
    more.append((ENV_CACHE_MEM_SIZE, str(cache)))
    volumes.append(
        (
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": str(cache)}},
            {"name": "shm", "mountPath": SHM_PATH},
        )
    )
    return _deployment(
        cluster,
        namespace,
        spec,
        "Worker",
        replicas=spec.worker_num,
        cpu=spec.worker_cpu,
        memory=memory,
        env=_env(cluster, spec.worker_cpu, memory, spec.worker_extra_env, more),
        ports=(("service", SERVICE_PORT),),
        volumes=volumes,
        owner=owner,
    )


def build_web_service(
    cluster: str, namespace: str, *, owner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A NodePort Service for the supervisors' web port (the endpoint's port)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(
            object_names(cluster)["Service"], namespace, cluster_labels(cluster), owner
        ),
        "spec": {
            "type": "NodePort",
            "selector": role_labels(cluster, "Supervisor"),
            "ports": [{"name": "web", "port": WEB_PORT, "targetPort": "web", "protocol": "TCP"}],
        },
    }


def build_cluster(
    cluster: str,
    namespace: str,
    spec: MarsClusterSpec,
    *,
    owner: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], ...]:
    """Every object of the cluster (but its namespace), in the order they are created: the
    pods' access before the pods, the supervisors before the workers that look for them."""
    return (
        build_role(cluster, namespace, owner=owner),
        build_role_binding(cluster, namespace, owner=owner),
        build_supervisors(cluster, namespace, spec, owner=owner),
        build_workers(cluster, namespace, spec, owner=owner),
        build_web_service(cluster, namespace, owner=owner),
    )


def ready_needed(spec: MarsClusterSpec) -> dict[str, int]:
    """Ready pods of each role that make the cluster ready: every supervisor, and
    ``minWorkerNum`` workers (default all)."""
    return {"Supervisor": spec.supervisor_num, "Worker": spec.ready_workers_needed}


class Mars:
    """The MarsCluster framework: the cluster's objects as a service cluster."""

    kind = "MarsCluster"

    def plan(self, job: Job, network: Network) -> Plan:
        assert isinstance(job, MarsCluster)
        del network  # a cluster's pods find each other through the API, not addresses
        names = object_names(job.name)
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=(),
            outcome=ServicePolicy("Supervisor", job.spec.supervisor_num),
            services=False,
            service_cluster=ServiceCluster(
                # The substrate makes the MarsCluster their owner as it creates them.
                objects=build_cluster(job.name, job.namespace, job.spec),
                ready_needed=ready_needed(job.spec),
                web_service=names["Service"],
                web_type="Supervisor",
            ),
            # The lifecycle decides the endpoint and the ready pods; they are this kind's
            # status fields (a ServiceStatus's).
            status_extension=service_fields,
        )


__all__ = [
    "CONTAINER",
    "DEFAULT_WORKER_CACHE_MEM",
    "ENTRYPOINT",
    "ENV_CACHE_MEM_SIZE",
    "ENV_CPU_TOTAL",
    "ENV_MEMORY_TOTAL",
    "ENV_POD_IP",
    "ENV_POD_NAME",
    "ENV_POD_NAMESPACE",
    "ENV_READY_FILE",
    "ENV_SERVICE_PORT",
    "ENV_SPILL_DIRS",
    "ENV_SUPERVISORS",
    "ENV_SUPERVISOR_SERVICE",
    "ENV_WEB_PORT",
    "LABEL_MARS_CLUSTER",
    "LABEL_MARS_ROLE",
    "READINESS_COMMAND",
    "READY_FILE",
    "ROLES",
    "SERVICE_PORT",
    "WEB_PORT",
    "Mars",
    "build_cluster",
    "build_namespace",
    "build_role",
    "build_role_binding",
    "build_supervisors",
    "build_web_service",
    "build_workers",
    "cluster_labels",
    "object_names",
    "ready_needed",
    "role_labels",
]
