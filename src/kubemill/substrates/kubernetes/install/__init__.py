"""Install manifests for the operator: CRDs, least-privilege RBAC and the Deployment.

One generator feeds ``kubemill install --print``, ``deploy/kubemill.yaml`` and the Helm
chart in ``deploy/helm/kubemill``::

    python -m kubemill.substrates.kubernetes.install --write deploy

RBAC is data: :data:`COMMON_RULES` and the engines' grants list every permission the
operator may get, each with the reason it is needed and the condition under which it is
granted; :func:`operator_rules` picks those that apply to one installation. The operator's
own tests check the API calls it makes against the same list, so a permission is added here
or the call fails.

Scope: without ``watch_namespaces`` the operator serves every namespace through a
ClusterRole; with them it gets one Role per watched namespace and no cluster-wide
permission at all. kopf runs without cluster scanning in both cases, so no permission on
CustomResourceDefinitions or namespaces is needed; and the operator reads everything from
its watch caches, so it is granted list/watch but never get. The leader
election Lease always lives in the operator's own namespace, under a Role there.

One module for each part: :mod:`.names` (what the operator is called, its defaults),
:mod:`.rbac` (the rules), :mod:`.manifests` (the objects), :mod:`.chart` (``deploy/``:
plain YAML and the Helm chart), :mod:`.apply` (``kubemill install`` and ``uninstall``
against a cluster) and :mod:`.command` (the generator's command line).
"""

from kubemill.substrates.kubernetes.install.apply import (
    CREATED_BY,
    FIELD_MANAGER,
    TARGETS,
    Applied,
    InstallError,
    Uninstalled,
    apply_object,
    count_jobs,
    install,
    installed_objects,
    operator_version,
    uninstall,
    wait_ready,
)
from kubemill.substrates.kubernetes.install.chart import chart_files, deploy_files, write_deploy
from kubemill.substrates.kubernetes.install.command import main
from kubemill.substrates.kubernetes.install.manifests import (
    build_deployment,
    build_namespace,
    build_rbac,
    build_service_account,
    install_extras,
    install_manifests,
    operator_args,
)
from kubemill.substrates.kubernetes.install.names import (
    DEFAULT_HISTORY,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    HEALTH_PATH,
    HEALTH_PORT,
    LEADER_ELECTION_ROLE,
    LEASE_NAME,
    METRICS_PORT,
    NAME,
)
from kubemill.substrates.kubernetes.install.rbac import (
    COMMON_RULES,
    HISTORY_RULES,
    Rule,
    all_rules,
    operator_rules,
    permits,
    pod_group_rule,
)

__all__ = [
    "COMMON_RULES",
    "CREATED_BY",
    "DEFAULT_HISTORY",
    "DEFAULT_IMAGE",
    "DEFAULT_NAMESPACE",
    "FIELD_MANAGER",
    "HEALTH_PATH",
    "HEALTH_PORT",
    "HISTORY_RULES",
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
    "install_extras",
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
