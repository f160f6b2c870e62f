"""Install manifests for the operator: CRDs, least-privilege RBAC and the Deployment.

One generator feeds ``kubemill install --print``, ``deploy/kubemill.yaml`` and the Helm
chart in ``deploy/helm/kubemill``::

    python -m kubemill.substrates.kubernetes.install --write deploy

RBAC is data: :data:`RULES` lists every permission the operator may get, each with the
reason it is needed and the condition under which it is granted; :func:`operator_rules`
picks those that apply to one installation. The operator's own tests check the API calls
it makes against the same list, so a permission is added here or the call fails.

Scope: without ``watch_namespaces`` the operator serves every namespace through a
ClusterRole; with them it gets one Role per watched namespace and no cluster-wide
permission at all. kopf runs without cluster scanning in both cases, so no permission on
CustomResourceDefinitions or namespaces is needed; and the operator reads everything from
its watch caches, so it is granted list/watch but never get. The leader
election Lease always lives in the operator's own namespace, under a Role there.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kubemill import __version__
from kubemill.api import GROUP
from kubemill.kinds import OperatorGrant, crds, engines
from kubemill.substrates.kubernetes.build import GangScheduler, gang_scheduler
from kubemill.substrates.kubernetes.render import dump_yaml

NAME = "kubemill-operator"
"""Name of the ServiceAccount, roles, bindings and Deployment."""
LEADER_ELECTION_ROLE = f"{NAME}-leader-election"
LEASE_NAME = NAME
DEFAULT_NAMESPACE = "kubemill-system"
DEFAULT_IMAGE = f"kubemill:{__version__}"
"""The operator image: ``pip install 'kubemill[kubernetes]'`` on a Python 3.11+ base."""
DEFAULT_REPLICAS = 2
METRICS_PORT = 8080
HEALTH_PORT = 8081
HEALTH_PATH = "/healthz"
NON_ROOT_UID = 65532

Scope = Literal["namespace", "cluster", "own-namespace"]
"""Where a rule is granted: in each watched namespace (or cluster-wide when all are
watched), only cluster-wide (cluster-scoped resources), or in the operator's namespace."""
Condition = Literal["always", "gang", "upstream", "clusterwide"]


@dataclass(frozen=True)
class Rule:
    """One RBAC rule, with why the operator needs it and when it is granted."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    scope: Scope = "namespace"
    when: Condition = "always"

    def to_wire(self) -> dict[str, Any]:
        return {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }

    def allows(self, *, group: str, resource: str, verb: str) -> bool:
        """Whether this rule permits ``verb`` on ``resource`` (``pods``, ``tfjobs/status``)."""
        return group in self.api_groups and resource in self.resources and verb in self.verbs


COMMON_RULES: tuple[Rule, ...] = (
    Rule(
        ("",),
        ("pods",),
        ("list", "watch", "create", "delete"),
        "one pod per replica: watched as the informer cache, created, deleted to restart",
    ),
    Rule(
        ("",),
        ("services",),
        ("list", "watch", "create", "delete"),
        "one headless service per replica",
    ),
    Rule(("",), ("events",), ("create",), "a Kubernetes Event on the job for every decision"),
    Rule(
        ("coordination.k8s.io",),
        ("leases",),
        ("get", "create", "update"),
        "leader election between operator replicas (one Lease in the operator's namespace)",
        scope="own-namespace",
    ),
)
"""What the operator needs whatever kinds it runs."""


def all_rules() -> tuple[Rule, ...]:
    """Every permission the operator can be granted, derived from the registered kinds.

    The job resources of every kind (and, with ``--serve-upstream-groups``, of their upstream
    groups), the common rules, and what each kind's engine says it needs
    (:class:`kubemill.kinds.OperatorGrant`), merged per resource. PodGroup rules depend on
    the scheduler: see :func:`pod_group_rule`.
    """
    kinds = engines()
    jobs = tuple(engine.api.plural for engine in kinds)
    status = tuple(f"{plural}/status" for plural in jobs)
    rules = [
        Rule(
            (GROUP,),
            jobs,
            ("list", "watch", "delete"),
            "watch jobs (kopf); delete a job whose ttlSecondsAfterFinished has passed",
        ),
        Rule((GROUP,), status, ("patch",), "write job status through the status subresource"),
    ]
    upstream: dict[str, list[str]] = {}
    for engine in kinds:
        for group, _ in engine.api.upstream_groups:
            upstream.setdefault(group, []).append(engine.api.plural)
    for group, plurals in upstream.items():
        rules.append(
            Rule(
                (group,),
                tuple(plurals),
                ("list", "watch", "patch", "delete"),
                f"--serve-upstream-groups: the same for {group} jobs, and patch their "
                "kubemill.dev/restarts annotation (upstream status schemas have no restart "
                "counts)",
                when="upstream",
            )
        )
        rules.append(
            Rule(
                (group,),
                tuple(f"{p}/status" for p in plurals),
                ("patch",),
                f"--serve-upstream-groups: status of {group} jobs",
                when="upstream",
            )
        )
    rules += COMMON_RULES
    return tuple(_merge_grants(rules, [g for engine in kinds for g in engine.grants]))


def _merge_grants(rules: list[Rule], grants: Sequence[OperatorGrant]) -> list[Rule]:
    """Add the engines' grants; one rule per (groups, resources), verbs and reasons joined."""
    out = list(rules)
    for grant in grants:
        key = (grant.api_groups, grant.resources)
        at = next((i for i, r in enumerate(out) if (r.api_groups, r.resources) == key), None)
        if at is None:
            out.append(Rule(grant.api_groups, grant.resources, grant.verbs, grant.why))
            continue
        rule = out[at]
        verbs = tuple(dict.fromkeys((*rule.verbs, *grant.verbs)))
        why = rule.why if grant.why in rule.why else f"{rule.why}; {grant.why}"
        out[at] = Rule(rule.api_groups, rule.resources, verbs, why, rule.scope, rule.when)
    return out


def pod_group_rule(gang: GangScheduler) -> Rule:
    """The PodGroup permission for one gang scheduler's API group."""
    return Rule(
        (gang.api_group,),
        (gang.plural,),
        ("list", "watch", "create", "delete"),
        f"gang scheduling with {gang.scheduler_name}: one PodGroup per job, its phase watched",
        when="gang",
    )


def operator_rules(
    *,
    gang_scheduler: str | GangScheduler | None = None,
    serve_upstream_groups: bool = False,
    clusterwide: bool = True,
) -> list[Rule]:
    """The rules that apply to one installation (all scopes)."""
    gang = _gang(gang_scheduler)
    rules = list(all_rules()) + ([pod_group_rule(gang)] if gang is not None else [])
    granted = {"always"}
    if gang is not None:
        granted.add("gang")
    if serve_upstream_groups:
        granted.add("upstream")
    if clusterwide:
        granted.add("clusterwide")
    return [r for r in rules if r.when in granted]


def permits(rules: Sequence[Rule], *, group: str, resource: str, verb: str) -> bool:
    """Whether any of ``rules`` allows ``verb`` on ``resource`` of API ``group``.

    ``resource`` names a subresource as ``pods/log`` or ``tfjobs/status``; the core group
    is ``""``. For tests that check each API call the operator makes against the RBAC.
    """
    return any(r.allows(group=group, resource=resource, verb=verb) for r in rules)


def _gang(value: str | GangScheduler | None) -> GangScheduler | None:
    return gang_scheduler(value)


# --- objects ------------------------------------------------------------------------------


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
) -> list[dict[str, Any]]:
    """Roles and bindings: a ClusterRole, or a Role per watched namespace; and the Lease Role."""
    clusterwide = not watch_namespaces
    rules = operator_rules(
        gang_scheduler=gang_scheduler,
        serve_upstream_groups=serve_upstream_groups,
        clusterwide=clusterwide,
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
) -> list[str]:
    """The ``kubemill operator`` arguments of the Deployment."""
    args = ["operator"]
    if watch_namespaces:
        args += [f"--namespace={ns}" for ns in dict.fromkeys(watch_namespaces)]
    else:
        args.append("--all-namespaces")
    gang = _gang(gang_scheduler)
    if gang is not None:
        args.append(f"--gang-scheduler-name={gang.name}")
    if serve_upstream_groups:
        args.append("--serve-upstream-groups")
    args += [f"--metrics-port={METRICS_PORT}", f"--health-port={HEALTH_PORT}"]
    if leader_election:
        args.append("--leader-election")
    return args


def build_deployment(
    *,
    namespace: str,
    image: str = DEFAULT_IMAGE,
    replicas: int = DEFAULT_REPLICAS,
    args: Sequence[str],
) -> dict[str, Any]:
    """The operator Deployment: non-root, read-only root filesystem, probes on the health port."""
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


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def install_manifests(
    *,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    watch_namespaces: Sequence[str] | None = None,
    gang_scheduler: str | GangScheduler | None = None,
    serve_upstream_groups: bool = False,
    replicas: int = DEFAULT_REPLICAS,
) -> list[dict[str, Any]]:
    """Everything ``kubectl apply -f`` needs, in apply order.

    Namespace, CRDs (ours only: with ``serve_upstream_groups`` the ``kubeflow.org`` CRDs
    come from Kubeflow), ServiceAccount, RBAC, the operator Deployment.
    """
    if replicas < 1:
        raise ValueError(f"replicas: {replicas} is too few; the operator needs at least 1")
    args = operator_args(
        watch_namespaces=watch_namespaces,
        gang_scheduler=gang_scheduler,
        serve_upstream_groups=serve_upstream_groups,
        leader_election=True,
    )
    return [
        build_namespace(namespace),
        *crds(),
        build_service_account(namespace),
        *build_rbac(
            namespace=namespace,
            watch_namespaces=watch_namespaces,
            gang_scheduler=gang_scheduler,
            serve_upstream_groups=serve_upstream_groups,
        ),
        build_deployment(namespace=namespace, image=image, replicas=replicas, args=args),
    ]


# --- deploy/: plain YAML and the Helm chart -----------------------------------------------

_NS = "kubemill-sentinel-namespace"
_WATCHED = "kubemill-sentinel-watched"
_IMAGE = "kubemill-sentinel-image"
_REPLICAS = "kubemill-sentinel-replicas"
_HEADER = "# Generated by `python -m kubemill.substrates.kubernetes.install --write deploy`.\n"
_HEADER += "# Do not edit: change the generator and regenerate.\n"


def chart_files() -> dict[str, str]:
    """The Helm chart ``kubemill``: path inside the chart -> content.

    Templated values: ``image``, ``replicas``, ``watchNamespaces`` (empty: every
    namespace, via a ClusterRole; else a Role per namespace), and the release namespace.
    CRDs go to ``crds/`` (Helm installs them first and never templates them).
    """
    files: dict[str, str] = {
        "Chart.yaml": dump_yaml(
            [
                {
                    "apiVersion": "v2",
                    "name": "kubemill",
                    "description": "kubemill operator: TensorFlow and PyTorch jobs on Kubernetes",
                    "type": "application",
                    "version": __version__,
                    "appVersion": __version__,
                }
            ]
        ),
        "values.yaml": _HEADER
        + "# Operator image (build it with `pip install 'kubemill[kubernetes]'`).\n"
        + f"image: {DEFAULT_IMAGE}\n"
        + "# Operator replicas; one leads (a Lease), the others wait to take over.\n"
        + f"replicas: {DEFAULT_REPLICAS}\n"
        + "# Namespaces to serve; empty serves every namespace (needs a ClusterRole).\n"
        + "watchNamespaces: []\n",
    }
    for crd in crds():
        files[f"crds/{crd['metadata']['name']}.yaml"] = _HEADER + dump_yaml([crd])
    files["templates/serviceaccount.yaml"] = _HEADER + _template([build_service_account(_NS)])
    cluster = build_rbac(namespace=_NS)
    namespaced = build_rbac(namespace=_NS, watch_namespaces=[_WATCHED])
    per_ns = [o for o in namespaced if o["metadata"].get("namespace") == _WATCHED]
    lease = [o for o in cluster if o["metadata"].get("name") == LEADER_ELECTION_ROLE]
    cluster_scoped = [o for o in cluster if o["kind"].startswith("Cluster")]
    files["templates/rbac.yaml"] = (
        _HEADER
        + "{{- if .Values.watchNamespaces }}\n"
        + "{{- range .Values.watchNamespaces }}\n"
        + _template(per_ns)
        + "{{- end }}\n"
        + "{{- else }}\n"
        + _template(cluster_scoped)
        + "{{- end }}\n"
        + _template(lease)
    )
    deployment = build_deployment(
        namespace=_NS, image=_IMAGE, args=operator_args(watch_namespaces=None)
    )
    deployment["spec"]["replicas"] = _REPLICAS
    files["templates/deployment.yaml"] = _HEADER + _namespace_args(_template([deployment]))
    return files


def _template(objects: list[dict[str, Any]]) -> str:
    text = dump_yaml(objects)
    text = text.replace(_WATCHED, "{{ . }}")
    text = text.replace(_NS, "{{ $.Release.Namespace }}")
    text = text.replace(_IMAGE, "{{ $.Values.image }}")
    return text.replace(_REPLICAS, "{{ $.Values.replicas }}")


def _namespace_args(text: str) -> str:
    """Swap the ``--all-namespaces`` argument for a choice on ``watchNamespaces``."""
    match = re.search(r"^( *)- --all-namespaces\n", text, flags=re.MULTILINE)
    if match is None:
        raise RuntimeError("the operator Deployment has no --all-namespaces argument")
    indent = match.group(1)
    block = (
        "{{- if $.Values.watchNamespaces }}\n"
        "{{- range $.Values.watchNamespaces }}\n"
        f"{indent}- --namespace={{{{ . }}}}\n"
        "{{- end }}\n"
        "{{- else }}\n"
        f"{indent}- --all-namespaces\n"
        "{{- end }}\n"
    )
    return text[: match.start()] + block + text[match.end() :]


def deploy_files() -> dict[str, str]:
    """Everything under ``deploy/``: path -> content."""
    files = {"kubemill.yaml": _HEADER + dump_yaml(install_manifests())}
    for path, content in chart_files().items():
        files[f"helm/kubemill/{path}"] = content
    return files


def write_deploy(target: Path) -> list[Path]:
    """Write :func:`deploy_files` under ``target`` (stale generated files are removed)."""
    written: list[Path] = []
    files = deploy_files()
    chart = target / "helm" / "kubemill"
    if chart.is_dir():
        for old in sorted(chart.rglob("*.yaml")):
            if str(old.relative_to(target)) not in files:
                old.unlink()
    for relative, content in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kubemill.substrates.kubernetes.install``: print or write the manifests."""
    parser = argparse.ArgumentParser(
        prog="python -m kubemill.substrates.kubernetes.install", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--write", metavar="DIR", type=Path, help="write deploy/ files into DIR")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--watch-namespace", action="append", dest="watch_namespaces")
    parser.add_argument("--gang-scheduler-name", dest="gang_scheduler")
    parser.add_argument("--serve-upstream-groups", action="store_true")
    options = parser.parse_args(argv)
    if options.write is not None:
        write_deploy(options.write)
        return 0
    dump_yaml(
        install_manifests(
            namespace=options.namespace,
            image=options.image,
            watch_namespaces=options.watch_namespaces,
            gang_scheduler=options.gang_scheduler,
            serve_upstream_groups=options.serve_upstream_groups,
        ),
        sys.stdout,
    )
    return 0


__all__ = [
    "COMMON_RULES",
    "DEFAULT_IMAGE",
    "DEFAULT_NAMESPACE",
    "HEALTH_PATH",
    "HEALTH_PORT",
    "LEADER_ELECTION_ROLE",
    "LEASE_NAME",
    "METRICS_PORT",
    "NAME",
    "Rule",
    "all_rules",
    "build_deployment",
    "build_namespace",
    "build_rbac",
    "build_service_account",
    "chart_files",
    "deploy_files",
    "install_manifests",
    "main",
    "operator_args",
    "operator_rules",
    "permits",
    "pod_group_rule",
    "write_deploy",
]

if __name__ == "__main__":
    raise SystemExit(main())
