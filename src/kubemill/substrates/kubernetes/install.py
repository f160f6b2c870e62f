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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kubemill.api import GROUP, VERSION
from kubemill.kinds import (
    Controller,
    OperatorGrant,
    controllers,
    crds,
    engine_for,
    engines,
    entries,
)
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.build import GangScheduler, gang_scheduler
from kubemill.substrates.kubernetes.render import dump_yaml
from kubemill.substrates.kubernetes.transport import api_path
from kubemill.version import __version__

if TYPE_CHECKING:
    # The client package imports this module (for the operator's namespace): its names are
    # imported where they are used, once both modules are loaded.
    from kubemill.substrates.kubernetes.client.connection import Http
    from kubemill.substrates.kubernetes.client.errors import Request

NAME = "kubemill-operator"
"""Name of the ServiceAccount, roles, bindings and Deployment."""
LEADER_ELECTION_ROLE = f"{NAME}-leader-election"
LEASE_NAME = NAME
DEFAULT_NAMESPACE = "kubemill-system"
DEFAULT_IMAGE = f"kubemill-operator:{__version__}"
"""The operator image ``scripts/build-image.sh`` builds (``Containerfile``): kubemill with its
``[kubernetes]`` extra on a slim Python 3.11 base, running as uid 65532."""
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
    controlling = controllers()
    controls = tuple(c.api.plural for c in controlling)
    status = tuple(f"{plural}/status" for plural in (*jobs, *controls))
    ending = tuple(engine.api.plural for engine in kinds if engine.finishes)
    services = tuple(engine.api.plural for engine in kinds if not engine.finishes)
    rules = [
        Rule(
            (GROUP,),
            ending,
            ("list", "watch", "delete"),
            "watch jobs (kopf); delete a job whose ttlSecondsAfterFinished has passed",
        ),
    ]
    if services or controls:
        # A service never finishes and a schedule has no TTL: nothing ever deletes them.
        rules.append(
            Rule(
                (GROUP,),
                (*services, *controls),
                ("list", "watch"),
                "watch services, and the kinds that create jobs of another kind (kopf)",
            )
        )
    rules.append(
        Rule((GROUP,), status, ("patch",), "write job status through the status subresource")
    )
    rules += _controlled_rules(controlling, GROUP, when="always")
    upstream: dict[str, list[str]] = {}
    restarting: set[str] = {engine.api.plural for engine in kinds if engine.restarts}
    for engine in kinds:
        for group, _ in engine.api.upstream_groups:
            upstream.setdefault(group, []).append(engine.api.plural)
    upstream_controls: dict[str, list[Controller]] = {}
    for controller in controlling:
        for group, _ in controller.api.upstream_groups:
            upstream_controls.setdefault(group, []).append(controller)
            upstream.setdefault(group, [])
    for group, plurals in upstream.items():
        annotated = tuple(p for p in plurals if p in restarting)
        if annotated:
            rules.append(
                Rule(
                    (group,),
                    annotated,
                    ("list", "watch", "patch", "delete"),
                    f"--serve-upstream-groups: the same for {group} jobs, and patch their "
                    "kubemill.dev/restarts annotation (upstream status schemas have no "
                    "restart counts)",
                    when="upstream",
                )
            )
        # A kind whose pods never restart has no restart counts to annotate.
        others = tuple(p for p in plurals if p not in restarting)
        if others:
            rules.append(
                Rule(
                    (group,),
                    others,
                    ("list", "watch", "delete"),
                    f"--serve-upstream-groups: the same for {group} jobs",
                    when="upstream",
                )
            )
        mine = upstream_controls.get(group, [])
        if mine:
            rules.append(
                Rule(
                    (group,),
                    tuple(c.api.plural for c in mine),
                    ("list", "watch"),
                    f"--serve-upstream-groups: the same for {group} "
                    + ", ".join(c.kind for c in mine),
                    when="upstream",
                )
            )
            rules += _controlled_rules(mine, group, when="upstream")
        plurals = [*plurals, *(c.api.plural for c in mine)]
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
    return tuple(_merge_grants(_merged(rules), [g for engine in kinds for g in engine.grants]))


def _merged(rules: Sequence[Rule]) -> list[Rule]:
    """One rule per (groups, resources, scope, condition): verbs and reasons joined (a
    controller's create joins the jobs' list, watch and delete of the same resource)."""
    out: list[Rule] = []
    for rule in rules:
        key = (rule.api_groups, rule.resources, rule.scope, rule.when)
        at = next(
            (i for i, r in enumerate(out) if (r.api_groups, r.resources, r.scope, r.when) == key),
            None,
        )
        if at is None:
            out.append(rule)
            continue
        old = out[at]
        verbs = tuple(dict.fromkeys((*old.verbs, *rule.verbs)))
        out[at] = Rule(
            old.api_groups, old.resources, verbs, f"{old.why}; {rule.why}", old.scope, old.when
        )
    return out


def _controlled_rules(
    controlling: Sequence[Controller], group: str, *, when: Condition
) -> list[Rule]:
    """Creating the jobs that controllers make, in ``group`` (their delete is the jobs')."""
    created: dict[str, list[str]] = {}
    for controller in controlling:
        plural = engine_for(controller.controls).api.plural
        created.setdefault(plural, []).append(controller.kind)
    return [
        Rule(
            (group,),
            (plural,),
            ("create",),
            f"a {' or '.join(kinds)} creates its runs (and deletes them past its history "
            "limits, or to replace one, with the jobs' delete)",
            when=when,
        )
        for plural, kinds in created.items()
    ]


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
        + "# Operator image (scripts/build-image.sh builds it from the Containerfile).\n"
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


# --- applying to a cluster: kubemill install / uninstall ------------------------------------

FIELD_MANAGER = "kubemill"
"""The field manager of every server-side apply ``kubemill install`` sends."""
CREATED_BY = "kubemill.dev/created-by"
"""Annotation on a namespace that ``kubemill install`` created (and uninstall may delete);
a namespace that existed before is never written nor deleted."""
CREATED_BY_VALUE = "kubemill-install"
APPLY_PATCH = "application/apply-patch+yaml"
DEFAULT_WAIT_SECONDS = 300.0

Action = Literal["created", "configured", "unchanged"]
Progress = Callable[[str], None]


class InstallError(SubstrateError):
    """The installation could not finish: a conflict, or the cluster never got ready."""


@dataclass(frozen=True)
class Target:
    """Where one kind of install object lives in the API."""

    group: str
    version: str
    plural: str
    namespaced: bool


TARGETS: dict[str, Target] = {
    "Namespace": Target("", "v1", "namespaces", False),
    "CustomResourceDefinition": Target(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", False
    ),
    "ServiceAccount": Target("", "v1", "serviceaccounts", True),
    "ClusterRole": Target("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": Target("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "Role": Target("rbac.authorization.k8s.io", "v1", "roles", True),
    "RoleBinding": Target("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "Deployment": Target("apps", "v1", "deployments", True),
}
"""Every kind :func:`install_manifests` writes."""


@dataclass(frozen=True)
class Applied:
    """One object of an install and what applying it did (or would do, in a dry run)."""

    kind: str
    name: str
    namespace: str | None
    action: Action

    def __str__(self) -> str:
        where = f" -n {self.namespace}" if self.namespace else ""
        return f"{self.kind.lower()}/{self.name}{where} {self.action}"


def _target(obj: Mapping[str, Any]) -> Target:
    return TARGETS[str(obj["kind"])]


def _path(obj: Mapping[str, Any]) -> str:
    target, meta = _target(obj), obj["metadata"]
    return api_path(
        group=target.group,
        version=target.version,
        plural=target.plural,
        namespace=meta.get("namespace") if target.namespaced else None,
        name=str(meta["name"]),
    )


def _request(verb: str, obj: Mapping[str, Any]) -> Request:
    from kubemill.substrates.kubernetes.client.errors import Request

    target, meta = _target(obj), obj["metadata"]
    return Request(
        verb,
        target.plural,
        target.group,
        meta.get("namespace") if target.namespaced else None,
        str(meta["name"]),
    )


def read_object(http: Http, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The object as the cluster has it, or None when it does not exist."""
    from kubemill.substrates.kubernetes.client.errors import KubeApiError

    try:
        found: dict[str, Any] = http.json(_request("get", obj), "GET", _path(obj))
    except KubeApiError as exc:
        if exc.status == 404:
            return None
        raise
    return found


def _comparable(obj: Mapping[str, Any] | None) -> Any:
    """An object without what every write changes (its version, the apply times)."""
    if obj is None:
        return None
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    meta["managedFields"] = [
        {k: v for k, v in entry.items() if k != "time"} for entry in meta.get("managedFields", [])
    ]
    return {**obj, "metadata": meta}


def apply_object(
    http: Http, obj: Mapping[str, Any], *, dry_run: bool = False, force: bool = False
) -> Applied:
    """Server-side apply of one object (fieldManager ``kubemill``): created, configured or
    unchanged, told apart by the resourceVersion (a dry run compares the object itself)."""
    from kubemill.substrates.kubernetes.client.errors import KubeApiError

    before = read_object(http, obj)
    meta = obj["metadata"]
    namespace = meta.get("namespace") if _target(obj).namespaced else None
    query = [("fieldManager", FIELD_MANAGER)]
    if force:
        query.append(("force", "true"))
    if dry_run:
        if before is None:
            # Not sent: its namespace may not exist yet, which a dry run cannot create.
            return Applied(str(obj["kind"]), str(meta["name"]), namespace, "created")
        query.append(("dryRun", "All"))
    try:
        after = http.json(
            _request("patch", obj), "PATCH", _path(obj), query=query, body=dict(obj),
            content_type=APPLY_PATCH,
        )  # fmt: skip
    except KubeApiError as exc:
        if exc.status == 409:
            raise InstallError(
                f"{obj['kind'].lower()}/{meta['name']}: another field manager changed fields "
                f"kubemill sets ({exc.api_message}); `kubemill install --force-conflicts` "
                "takes them back"
            ) from exc
        raise
    action: Action
    if before is None:
        action = "created"
    elif dry_run:
        action = "unchanged" if _comparable(after) == _comparable(before) else "configured"
    else:
        same = after.get("metadata", {}).get("resourceVersion") == before["metadata"].get(
            "resourceVersion"
        )
        action = "unchanged" if same else "configured"
    return Applied(str(obj["kind"]), str(meta["name"]), namespace, action)


def _owned_namespace(http: Http, namespace: str) -> dict[str, Any] | None:
    """The namespace to apply: marked as ours when install creates it (or did before);
    None when it existed already and belongs to someone else."""
    wanted = build_namespace(namespace)
    found = read_object(http, wanted)
    annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
    if found is not None and annotations.get(CREATED_BY) != CREATED_BY_VALUE:
        return None
    wanted["metadata"]["annotations"] = {CREATED_BY: CREATED_BY_VALUE}
    return wanted


def install(
    http: Http,
    objects: Sequence[Mapping[str, Any]],
    *,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress = lambda _line: None,
) -> list[Applied]:
    """Apply :func:`install_manifests`' objects in order; each result goes to ``progress``."""
    done: list[Applied] = []
    for obj in objects:
        if obj["kind"] == "Namespace":
            owned = _owned_namespace(http, str(obj["metadata"]["name"]))
            if owned is None:
                progress(f"namespace/{obj['metadata']['name']} exists (not kubemill's): kept")
                continue
            obj = owned
        applied = apply_object(http, obj, dry_run=dry_run, force=force)
        progress(str(applied) + (" (dry run)" if dry_run else ""))
        done.append(applied)
    return done


def _condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def wait_ready(
    http: Http,
    objects: Sequence[Mapping[str, Any]],
    *,
    timeout: float = DEFAULT_WAIT_SECONDS,
    poll: float = 0.5,
    progress: Progress = lambda _line: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait for the CRDs to be Established and the operator Deployment to be Available.

    On a cluster the apiextensions controller sets ``Established`` once a CRD's resources are
    served, and the deployment controller sets ``Available`` once enough replicas pass their
    readiness probe. Progress goes to ``progress`` whenever it changes.
    """
    deadline = clock() + timeout
    crd_objects = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    said = ""

    def tell(line: str) -> None:
        nonlocal said
        if line != said:
            progress(line)
            said = line

    while True:
        pending = [
            str(o["metadata"]["name"])
            for o in crd_objects
            if not _condition(read_object(http, o) or {}, "Established")
        ]
        if not pending:
            break
        tell(f"waiting for {len(pending)} of {len(crd_objects)} CRDs to be established")
        if clock() >= deadline:
            raise InstallError(
                f"the CRDs {', '.join(pending)} were not established within {timeout:g}s; "
                "`kubectl get crd NAME -o yaml` shows their conditions"
            )
        sleep(poll)
    if crd_objects:
        tell(f"{len(crd_objects)} CRDs established")
    for deployment in deployments:
        meta = deployment["metadata"]
        name = f"deployment/{meta['name']} -n {meta['namespace']}"
        while True:
            found = read_object(http, deployment) or {}
            status = found.get("status") or {}
            wanted = (found.get("spec") or {}).get("replicas", 1)
            current = int(status.get("observedGeneration", 0)) >= int(
                (found.get("metadata") or {}).get("generation", 1)
            )
            if current and _condition(found, "Available"):
                break
            ready = status.get("readyReplicas", 0)
            tell(f"waiting for {name} to be available: {ready}/{wanted} replicas ready")
            if clock() >= deadline:
                raise InstallError(
                    f"{name} was not available within {timeout:g}s ({ready}/{wanted} replicas "
                    f"ready); `kubectl -n {meta['namespace']} describe deployment {meta['name']}` "
                    "shows why (an image that cannot be pulled, a failing probe, ...)"
                )
            sleep(poll)
        tell(f"{name} available")


# -- uninstall


@dataclass(frozen=True)
class Uninstalled:
    """What ``kubemill uninstall`` deleted (or would delete) and the jobs it left."""

    deleted: list[str]
    jobs: dict[str, int]
    """Jobs per kind in the cluster: deleted with the CRDs, else kept."""


def _list(http: Http, kind: str, *, namespace: str | None, labels: str) -> list[dict[str, Any]]:
    """Objects of ``kind`` with ``labels`` (``kind`` set on each: list items may lack it)."""
    from kubemill.substrates.kubernetes.client.errors import Request

    target = TARGETS[kind]
    path = api_path(
        group=target.group, version=target.version, plural=target.plural, namespace=namespace
    )
    request = Request("list", target.plural, target.group, namespace)
    answer = http.json(request, "GET", path, query=[("labelSelector", labels)])
    return [{**item, "kind": kind} for item in answer.get("items") or []]


def _binds_to(binding: Mapping[str, Any], namespace: str) -> bool:
    return any(
        (s.get("kind"), s.get("name"), s.get("namespace")) == ("ServiceAccount", NAME, namespace)
        for s in binding.get("subjects") or []
    )


def installed_objects(http: Http, namespace: str) -> list[dict[str, Any]]:
    """The objects of the installation in ``namespace``, in deletion order.

    Found by the labels install writes; RBAC in other namespaces and at the cluster scope
    only when its binding names this installation's ServiceAccount.
    """
    labels = f"app.kubernetes.io/name={NAME},app.kubernetes.io/part-of=kubemill"
    found: list[dict[str, Any]] = []
    for kind in ("Deployment", "ServiceAccount"):
        found += _list(http, kind, namespace=namespace, labels=labels)
    for binding_kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        roles = _list(http, role_kind, namespace=None, labels=labels)
        for binding in _list(http, binding_kind, namespace=None, labels=labels):
            if not _binds_to(binding, namespace):
                continue
            found.append(binding)
            found += [
                role
                for role in roles
                if role["metadata"]["name"] == binding["roleRef"]["name"]
                and role["metadata"].get("namespace") == binding["metadata"].get("namespace")
            ]
    return found


def count_jobs(http: Http) -> dict[str, int]:
    """How many jobs of each kubemill kind exist, in every namespace."""
    from kubemill.substrates.kubernetes.client.errors import KubeApiError, Request

    counts: dict[str, int] = {}
    for engine in entries():
        path = api_path(group=GROUP, version=VERSION, plural=engine.api.plural, namespace=None)
        request = Request("list", engine.api.plural, GROUP)
        items, token = 0, ""
        while True:  # page by page: a cluster may hold many jobs
            query = [("limit", "500")] + ([("continue", token)] if token else [])
            try:
                answer = http.json(request, "GET", path, query=query)
            except KubeApiError as exc:
                if exc.status == 404:
                    break  # its CRD is not installed
                raise
            items += len(answer.get("items") or [])
            token = str((answer.get("metadata") or {}).get("continue") or "")
            if not token:
                break
        if items:
            counts[engine.kind] = items
    return counts


def _delete(http: Http, obj: Mapping[str, Any]) -> bool:
    from kubemill.substrates.kubernetes.client.errors import KubeApiError

    try:
        http.json(
            _request("delete", obj), "DELETE", _path(obj),
            body={"propagationPolicy": "Background"},
        )  # fmt: skip
    except KubeApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def uninstall(
    http: Http,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    delete_crds: bool = False,
    dry_run: bool = False,
    progress: Progress = lambda _line: None,
) -> Uninstalled:
    """Delete what :func:`install` created in ``namespace``: the Deployment, ServiceAccount
    and RBAC, the namespace if install created it, and with ``delete_crds`` the CRDs (which
    deletes every job of their kinds). Jobs are counted first, for the caller's warning."""
    jobs = count_jobs(http)
    objects = installed_objects(http, namespace)
    if delete_crds:
        objects += [crd for crd in crds() if read_object(http, crd) is not None]
    owned = read_object(http, build_namespace(namespace))
    annotations = ((owned or {}).get("metadata") or {}).get("annotations") or {}
    if owned is not None and annotations.get(CREATED_BY) == CREATED_BY_VALUE:
        objects.append(build_namespace(namespace))
    deleted: list[str] = []
    for obj in objects:
        meta = obj["metadata"]
        where = f" -n {meta['namespace']}" if meta.get("namespace") else ""
        label = f"{str(obj['kind']).lower()}/{meta['name']}{where}"
        if dry_run or _delete(http, obj):
            deleted.append(label)
            progress(f"{label} deleted" + (" (dry run)" if dry_run else ""))
    return Uninstalled(deleted=deleted, jobs=jobs)


def operator_version(http: Http, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any] | None:
    """The installed operator: version (the Deployment's ``app.kubernetes.io/version``
    label, written by install), image and replicas; None when it is not installed."""
    deployment = build_deployment(namespace=namespace, args=[])
    found = read_object(http, deployment)
    if found is None:
        return None
    labels = found["metadata"].get("labels") or {}
    containers = found["spec"]["template"]["spec"].get("containers") or [{}]
    status = found.get("status") or {}
    return {
        "version": labels.get("app.kubernetes.io/version", "unknown"),
        "image": containers[0].get("image", ""),
        "replicas": (found.get("spec") or {}).get("replicas", 1),
        "available": status.get("availableReplicas", 0),
        "namespace": namespace,
    }


__all__ = [
    "COMMON_RULES",
    "CREATED_BY",
    "DEFAULT_IMAGE",
    "DEFAULT_NAMESPACE",
    "FIELD_MANAGER",
    "HEALTH_PATH",
    "HEALTH_PORT",
    "LEADER_ELECTION_ROLE",
    "LEASE_NAME",
    "METRICS_PORT",
    "NAME",
    "TARGETS",
    "Applied",
    "InstallError",
    "Rule",
    "Uninstalled",
    "all_rules",
    "apply_object",
    "build_deployment",
    "build_namespace",
    "build_rbac",
    "build_service_account",
    "chart_files",
    "count_jobs",
    "deploy_files",
    "install",
    "install_manifests",
    "installed_objects",
    "main",
    "operator_args",
    "operator_rules",
    "operator_version",
    "permits",
    "pod_group_rule",
    "uninstall",
    "wait_ready",
    "write_deploy",
]

if __name__ == "__main__":
    raise SystemExit(main())
