"""The install manifests as pure builders: namespace, ServiceAccount, RBAC objects and the
operator Deployment, in apply order (:func:`install_manifests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubemill.engines.base import InstallExtra
from kubemill.kinds import crds, engines
from kubemill.substrates.kubernetes import build
from kubemill.substrates.kubernetes.build import GangScheduler
from kubemill.substrates.kubernetes.install.names import (
    DEFAULT_HISTORY,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    DEFAULT_REPLICAS,
    HEALTH_PATH,
    HEALTH_PORT,
    LEADER_ELECTION_ROLE,
    METRICS_PORT,
    NAME,
    NON_ROOT_UID,
    PROGRESS_ROLE,
)
from kubemill.substrates.kubernetes.install.rbac import operator_rules
from kubemill.substrates.kubernetes.progress import PROGRESS_PORT
from kubemill.version import __version__


def _labels(component: str = "operator") -> dict[str, str]:
    return {
        "app.kubernetes.io/name": NAME,
        "app.kubernetes.io/part-of": "kubemill",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/version": __version__,
    }


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = _labels()
    return meta


def build_namespace(namespace: str) -> dict[str, Any]:
    """The operator's namespace."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


def build_service_account(namespace: str) -> dict[str, Any]:
    """The operator's identity."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, namespace)}


def build_rbac(
    *,
    namespace: str,
    watch_namespaces: Sequence[str] | None = None,
    gang_scheduler: str | GangScheduler | None = None,
    serve_upstream_groups: bool = False,
    history: int = DEFAULT_HISTORY,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Roles and bindings: a ClusterRole, or a Role per watched namespace; and the Role in
    the operator's own namespace (the Lease, and the history records unless ``history`` is
    0). With ``progress`` (job pods report progress), TokenReviews: in the ClusterRole, or
    in a ClusterRole of their own (``kubemill-operator-progress``) for a namespaced install."""
    clusterwide = not watch_namespaces
    rules = operator_rules(
        gang_scheduler=gang_scheduler,
        serve_upstream_groups=serve_upstream_groups,
        clusterwide=clusterwide,
        history=history > 0,
        progress=progress,
    )
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": namespace}
    per_namespace = [r.to_wire() for r in rules if r.scope == "namespace"]
    cluster_only = [r.to_wire() for r in rules if r.scope == "cluster"]
    objects: list[dict[str, Any]] = []
    if clusterwide:
        objects.append(_role("ClusterRole", NAME, None, per_namespace + cluster_only))
        objects.append(_binding("ClusterRoleBinding", "ClusterRole", NAME, None, subject))
    else:
        for watched in dict.fromkeys(watch_namespaces or ()):
            objects.append(_role("Role", NAME, watched, per_namespace))
            objects.append(_binding("RoleBinding", "Role", NAME, watched, subject))
        reviews = [r.to_wire() for r in rules if r.when == "progress"]
        if reviews:
            objects.append(_role("ClusterRole", PROGRESS_ROLE, None, reviews))
            objects.append(
                _binding("ClusterRoleBinding", "ClusterRole", PROGRESS_ROLE, None, subject)
            )
    own = [r.to_wire() for r in rules if r.scope == "own-namespace"]
    objects.append(_role("Role", LEADER_ELECTION_ROLE, namespace, own))
    objects.append(_binding("RoleBinding", "Role", LEADER_ELECTION_ROLE, namespace, subject))
    return objects


def _role(
    kind: str, name: str, namespace: str | None, rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _meta(name, namespace),
        "rules": rules,
    }


def _binding(
    kind: str, role_kind: str, name: str, namespace: str | None, subject: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [dict(subject)],
    }


def operator_args(
    *,
    watch_namespaces: Sequence[str] | None = None,
    gang_scheduler: str | GangScheduler | None = None,
    serve_upstream_groups: bool = False,
    leader_election: bool = True,
    history: int = DEFAULT_HISTORY,
    progress_image: str | None = None,
) -> list[str]:
    """The ``kubemill operator`` arguments of the Deployment; ``progress_image``: job pods
    report progress through a sidecar of this image (the operator's own) to its endpoint."""
    args = ["operator"]
    if watch_namespaces:
        args += [f"--namespace={ns}" for ns in dict.fromkeys(watch_namespaces)]
    else:
        args.append("--all-namespaces")
    gang = build.gang_scheduler(gang_scheduler)
    if gang is not None:
        args.append(f"--gang-scheduler-name={gang.name}")
    if serve_upstream_groups:
        args.append("--serve-upstream-groups")
    args += [f"--metrics-port={METRICS_PORT}", f"--health-port={HEALTH_PORT}"]
    args.append(f"--history={history}")
    if progress_image:
        args += [f"--progress-port={PROGRESS_PORT}", f"--progress-image={progress_image}"]
    if leader_election:
        args.append("--leader-election")
    return args


def build_deployment(
    *,
    namespace: str,
    image: str = DEFAULT_IMAGE,
    replicas: int = DEFAULT_REPLICAS,
    args: Sequence[str],
    progress: bool = True,
) -> dict[str, Any]:
    """The operator Deployment: non-root, read-only root filesystem, probes on the health
    port; with ``progress``, the progress endpoint's port too."""
    selector = {"app.kubernetes.io/name": NAME}

    def probe(**timing: int) -> dict[str, Any]:
        # A fresh dict per probe: shared ones would dump as YAML anchors.
        return {"httpGet": {"path": HEALTH_PATH, "port": "health"}, "periodSeconds": 10, **timing}

    container = {
        "name": "operator",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["kubemill"],
        "args": list(args),
        "env": [
            _field_env("POD_NAMESPACE", "metadata.namespace"),
            _field_env("POD_NAME", "metadata.name"),
        ],
        "ports": [
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
            *(
                [{"name": "progress", "containerPort": PROGRESS_PORT, "protocol": "TCP"}]
                if progress
                else []
            ),
        ],
        "livenessProbe": probe(initialDelaySeconds=10, failureThreshold=3),
        "readinessProbe": probe(initialDelaySeconds=2, failureThreshold=1),
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],  # noqa: S108 - a pod's own emptyDir
    }
    pod_spec = {
        "serviceAccountName": NAME,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_UID,
            "runAsGroup": NON_ROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        # Replicas on different nodes, so losing a node does not stop reconciling.
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": dict(selector)},
                        },
                    }
                ]
            }
        },
        "terminationGracePeriodSeconds": 30,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(NAME, namespace),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": _labels(),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(METRICS_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": pod_spec,
            },
        },
    }


def build_progress_service(namespace: str) -> dict[str, Any]:
    """The Service job pods' progress sidecars reach the operator through (every replica
    is behind it; a follower answers 503 and the sidecar tries again)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(NAME, namespace),
        "spec": {
            "selector": {"app.kubernetes.io/name": NAME},
            "ports": [
                {
                    "name": "progress",
                    "port": PROGRESS_PORT,
                    "targetPort": "progress",
                    "protocol": "TCP",
                }
            ],
        },
    }


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def install_extras() -> dict[str, InstallExtra]:
    """What an install may add when asked, by name (``runtimes``), from every engine."""
    return {extra.name: extra for engine in engines() for extra in engine.extras}


def install_manifests(
    *,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    watch_namespaces: Sequence[str] | None = None,
    gang_scheduler: str | GangScheduler | None = None,
    serve_upstream_groups: bool = False,
    replicas: int = DEFAULT_REPLICAS,
    extras: Sequence[str] = (),
    history: int = DEFAULT_HISTORY,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Everything ``kubectl apply -f`` needs, in apply order.

    Namespace, CRDs (ours only: with ``serve_upstream_groups`` the ``kubeflow.org`` CRDs
    come from Kubeflow), the ``extras``' CRDs, ServiceAccount, RBAC, the progress Service,
    the operator Deployment, then the ``extras``' objects (:func:`install_extras`: ``runtimes``).
    ``history``: records of deleted jobs the operator keeps (0: none, and no grant for them).
    ``progress``: job pods get a sidecar forwarding their progress reports to the operator
    (its endpoint, a Service before it and ``tokenreviews/create``); off: none of it.
    """
    if replicas < 1:
        raise ValueError(f"replicas: {replicas} is too few; the operator needs at least 1")
    if history < 0:
        raise ValueError(f"history: {history} records; give 0 (none) or more")
    known = install_extras()
    unknown = [name for name in extras if name not in known]
    if unknown:
        raise ValueError(
            f"extras: {', '.join(unknown)} unknown; an install can add "
            + (", ".join(sorted(known)) or "nothing")
        )
    chosen = [known[name] for name in dict.fromkeys(extras)]
    args = operator_args(
        watch_namespaces=watch_namespaces,
        gang_scheduler=gang_scheduler,
        serve_upstream_groups=serve_upstream_groups,
        leader_election=True,
        history=history,
        progress_image=image if progress else None,
    )
    return [
        build_namespace(namespace),
        *crds(),
        *(dict(crd) for extra in chosen for crd in extra.crds()),
        build_service_account(namespace),
        *build_rbac(
            namespace=namespace,
            watch_namespaces=watch_namespaces,
            gang_scheduler=gang_scheduler,
            serve_upstream_groups=serve_upstream_groups,
            history=history,
            progress=progress,
        ),
        *([build_progress_service(namespace)] if progress else []),
        build_deployment(
            namespace=namespace, image=image, replicas=replicas, args=args, progress=progress
        ),
        *(dict(obj) for extra in chosen for obj in extra.objects()),
    ]
