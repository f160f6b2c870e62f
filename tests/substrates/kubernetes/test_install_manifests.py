"""Install manifests: valid for Kubernetes 1.29+, least-privilege RBAC as data, deploy/ in sync."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_lite import render

from kubemill.kinds import crds
from kubemill.substrates.kubernetes.install import (
    DEFAULT_IMAGE,
    HEALTH_PORT,
    LEADER_ELECTION_ROLE,
    METRICS_PORT,
    NAME,
    all_rules,
    chart_files,
    deploy_files,
    install_manifests,
    main,
    operator_args,
    operator_rules,
    permits,
    write_deploy,
)
from kubemill.substrates.kubernetes.install.names import PROGRESS_ROLE
from support.manifest_checks import ROOT, k8s_errors

VARIANTS = [
    pytest.param({}, id="cluster-wide"),
    pytest.param({"watch_namespaces": ["team-a", "team-b"]}, id="namespaced"),
    pytest.param({"gang_scheduler": "volcano"}, id="volcano"),
    pytest.param(
        {"gang_scheduler": "scheduler-plugins", "watch_namespaces": ["a"]}, id="plugins-ns"
    ),
    pytest.param(
        {"serve_upstream_groups": True, "namespace": "ops", "image": "r/k:1"}, id="upstream"
    ),
]


def kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str | None, str]]:
    return [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]


def rules_of(
    objects: list[dict[str, Any]], kind: str, namespace: str | None = None
) -> list[dict[str, Any]]:
    for obj in objects:
        if (
            obj["kind"] == kind
            and obj["metadata"].get("namespace") == namespace
            and obj["metadata"]["name"] == NAME
        ):
            rules: list[dict[str, Any]] = obj["rules"]
            return rules
    raise KeyError((kind, namespace))


@pytest.mark.parametrize("options", VARIANTS)
def test_every_install_object_passes_kubernetes_validate(options: dict[str, Any]) -> None:
    objects = install_manifests(**options)
    assert [e for o in objects for e in k8s_errors(o)] == []


def test_default_install_objects_in_apply_order() -> None:
    assert kinds(install_manifests()) == [
        ("Namespace", None, "kubemill-system"),
        ("CustomResourceDefinition", None, "tfjobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "pytorchjobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "mpijobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "sparkapplications.kubemill.dev"),
        ("CustomResourceDefinition", None, "marsclusters.kubemill.dev"),
        ("CustomResourceDefinition", None, "jaxjobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "xgboostjobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "paddlejobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "trainjobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "rayclusters.kubemill.dev"),
        ("CustomResourceDefinition", None, "rayjobs.kubemill.dev"),
        ("CustomResourceDefinition", None, "scheduledsparkapplications.kubemill.dev"),
        ("ServiceAccount", "kubemill-system", NAME),
        ("ClusterRole", None, NAME),
        ("ClusterRoleBinding", None, NAME),
        ("Role", "kubemill-system", LEADER_ELECTION_ROLE),
        ("RoleBinding", "kubemill-system", LEADER_ELECTION_ROLE),
        ("Service", "kubemill-system", NAME),
        ("Deployment", "kubemill-system", NAME),
    ]


def test_install_includes_exactly_the_generated_crds() -> None:
    ours = [
        o
        for o in install_manifests(serve_upstream_groups=True)
        if o["kind"] == "CustomResourceDefinition"
    ]
    assert ours == crds()


def test_cluster_wide_rbac_rules_exactly() -> None:
    rules = rules_of(install_manifests(), "ClusterRole")
    assert rules == [
        {
            "apiGroups": ["kubemill.dev"],
            "resources": [
                "tfjobs",
                "pytorchjobs",
                "mpijobs",
                "sparkapplications",
                "jaxjobs",
                "xgboostjobs",
                "paddlejobs",
            ],
            "verbs": ["list", "watch", "delete"],
        },
        # A MarsCluster or a RayCluster never finishes and a ScheduledSparkApplication never
        # ends; a RayJob has no TTL of its own (its cluster goes): no TTL deletes them.
        {
            "apiGroups": ["kubemill.dev"],
            "resources": [
                "trainjobs",
                "rayjobs",
                "marsclusters",
                "rayclusters",
                "scheduledsparkapplications",
            ],
            "verbs": ["list", "watch"],
        },
        {
            "apiGroups": ["kubemill.dev"],
            "resources": [
                "tfjobs/status",
                "pytorchjobs/status",
                "mpijobs/status",
                "sparkapplications/status",
                "marsclusters/status",
                "jaxjobs/status",
                "xgboostjobs/status",
                "paddlejobs/status",
                "trainjobs/status",
                "rayclusters/status",
                "rayjobs/status",
                "scheduledsparkapplications/status",
            ],
            "verbs": ["patch"],
        },
        # ... and creates its runs (deleted with the jobs' delete above).
        {"apiGroups": ["kubemill.dev"], "resources": ["sparkapplications"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            # get: an MPI launcher's Role reads pods, and RBAC grants only what one holds;
            # get and deletecollection: a Spark driver's Role manages its executors.
            "resources": ["pods"],
            "verbs": ["list", "watch", "create", "delete", "get", "deletecollection"],
        },
        {
            "apiGroups": [""],
            "resources": ["services"],
            "verbs": ["list", "watch", "create", "delete", "get", "deletecollection"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["list", "watch", "create", "update", "get", "delete", "deletecollection"],
        },
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["list", "watch", "create", "delete"],
        },
        {
            "apiGroups": [""],
            "resources": ["serviceaccounts"],
            "verbs": ["list", "watch", "create", "delete"],
        },
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["roles", "rolebindings"],
            "verbs": ["list", "watch", "create", "delete"],
        },
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies"],
            "verbs": ["list", "watch", "create"],
        },
        # A Mars cluster's supervisors and workers.
        {
            "apiGroups": ["apps"],
            "resources": ["deployments"],
            "verbs": ["list", "watch", "create", "update"],
        },
        # The training runtimes TrainJobs name, read only.
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["trainingruntimes", "clustertrainingruntimes"],
            "verbs": ["list", "watch"],
        },
        # A RayJob's submitter, a batch/v1 Job as KubeRay's.
        {
            "apiGroups": ["batch"],
            "resources": ["jobs"],
            "verbs": ["list", "watch", "create", "delete"],
        },
        # Job pods' progress reports: which pod a report's token is bound to.
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
    ]
    lease = next(
        o
        for o in install_manifests()
        if o["metadata"]["name"] == LEADER_ELECTION_ROLE and o["kind"] == "Role"
    )
    lease_rule = {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    }
    # The history records (ConfigMaps) only in the operator's own namespace.
    history_rule = {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["list", "create", "delete"],
    }
    assert lease["rules"] == [lease_rule, history_rule]
    without_history = next(
        o
        for o in install_manifests(history=0)
        if o["metadata"]["name"] == LEADER_ELECTION_ROLE and o["kind"] == "Role"
    )
    assert without_history["rules"] == [lease_rule]


def test_namespaced_install_has_no_cluster_wide_permission_but_token_reviews() -> None:
    without = install_manifests(watch_namespaces=["team-a"], progress=False)
    assert not [o for o in without if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    objects = install_manifests(watch_namespaces=["team-a", "team-b", "team-a"])
    cluster_wide = [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert [(o["kind"], o["metadata"]["name"]) for o in cluster_wide] == [
        ("ClusterRole", PROGRESS_ROLE),
        ("ClusterRoleBinding", PROGRESS_ROLE),
    ]
    # Job pods' progress reports: the one cluster-scoped call, which reads nothing.
    assert cluster_wide[0]["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
    ]
    roles = [
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "Role"
    ]
    assert roles == [("team-a", NAME), ("team-b", NAME), ("kubemill-system", LEADER_ELECTION_ROLE)]
    rules = rules_of(objects, "Role", "team-b")
    assert {"apiextensions.k8s.io"} & {g for r in rules for g in r["apiGroups"]} == set()
    deployment = objects[-1]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["operator", "--namespace=team-a", "--namespace=team-b"]
    assert "--all-namespaces" not in args


def test_bindings_point_at_the_roles_and_service_account() -> None:
    for options in ({}, {"watch_namespaces": ["x"]}):
        objects = install_manifests(namespace="ops", **options)
        roles = {
            (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
            for o in objects
            if o["kind"] in ("Role", "ClusterRole")
        }
        for binding in (o for o in objects if o["kind"].endswith("Binding")):
            ref = binding["roleRef"]
            assert (ref["kind"], binding["metadata"].get("namespace"), ref["name"]) in roles
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": NAME, "namespace": "ops"}
            ]


@pytest.mark.parametrize(
    ("gang", "group"),
    [
        pytest.param("volcano", "scheduling.volcano.sh", id="volcano"),
        pytest.param("scheduler-plugins", "scheduling.x-k8s.io", id="scheduler-plugins"),
        pytest.param("my-profile", "scheduling.x-k8s.io", id="custom-profile"),
    ],
)
def test_gang_scheduling_adds_pod_groups_of_its_api(gang: str, group: str) -> None:
    rules = rules_of(install_manifests(gang_scheduler=gang), "ClusterRole")
    assert {
        "apiGroups": [group],
        "resources": ["podgroups"],
        "verbs": ["list", "watch", "create", "delete"],
    } in rules
    assert not permits(operator_rules(), group=group, resource="podgroups", verb="create")
    args = install_manifests(gang_scheduler=gang)[-1]["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    assert f"--gang-scheduler-name={gang}" in args


def test_upstream_groups_add_scheduled_spark_applications_and_their_runs() -> None:
    rules = operator_rules(serve_upstream_groups=True)
    group = "sparkoperator.k8s.io"
    for verb in ("list", "watch"):
        assert permits(rules, group=group, resource="scheduledsparkapplications", verb=verb)
    assert permits(rules, group=group, resource="scheduledsparkapplications/status", verb="patch")
    assert not permits(rules, group=group, resource="scheduledsparkapplications", verb="delete")
    for verb in ("create", "delete", "list", "watch"):
        assert permits(rules, group=group, resource="sparkapplications", verb=verb)
    assert not permits(operator_rules(), group=group, resource="sparkapplications", verb="create")


def test_upstream_groups_add_kubeflow_jobs() -> None:
    rules = operator_rules(serve_upstream_groups=True)
    assert permits(rules, group="kubeflow.org", resource="tfjobs", verb="watch")
    assert permits(rules, group="kubeflow.org", resource="pytorchjobs/status", verb="patch")
    assert not permits(operator_rules(), group="kubeflow.org", resource="tfjobs", verb="watch")
    args = install_manifests(serve_upstream_groups=True)[-1]["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert "--serve-upstream-groups" in args


@pytest.mark.parametrize(
    ("group", "resource", "verb", "allowed"),
    [
        pytest.param("", "pods", "create", True, id="create-pod"),
        pytest.param("", "pods", "get", True, id="pod-get-for-mpi-launcher-roles"),
        pytest.param(
            "apiextensions.k8s.io", "customresourcedefinitions", "list", False, id="no-crd-scan"
        ),
        pytest.param("", "pods", "delete", True, id="delete-pod"),
        pytest.param("", "pods", "patch", False, id="no-pod-patch"),
        pytest.param("", "pods/log", "get", False, id="no-logs"),
        pytest.param("", "pods/exec", "create", True, id="exec-for-mpi-launcher-roles"),
        # A WebSocket exec is a GET: the real API server checks get and create.
        pytest.param("", "pods/exec", "get", True, id="exec-get-for-websocket-exec"),
        pytest.param("", "secrets", "get", False, id="no-secrets"),
        pytest.param("", "configmaps", "create", True, id="configmaps-for-mpi-hostfiles"),
        # The operator reads ConfigMaps from its cache; it holds get only to grant it.
        pytest.param("", "configmaps", "get", True, id="configmap-get-for-spark-driver-roles"),
        pytest.param("", "secrets", "update", False, id="no-secret-update"),
        pytest.param("", "namespaces", "list", False, id="no-namespaces"),
        pytest.param("kubemill.dev", "tfjobs", "create", False, id="no-job-create"),
        pytest.param("kubemill.dev", "tfjobs", "update", False, id="no-job-update"),
        pytest.param("kubemill.dev", "pytorchjobs", "delete", True, id="ttl-delete"),
        pytest.param("kubemill.dev", "pytorchjobs/status", "patch", True, id="status-patch"),
        pytest.param("kubemill.dev", "pytorchjobs/scale", "update", False, id="no-scale"),
        pytest.param("coordination.k8s.io", "leases", "update", True, id="lease"),
        pytest.param("coordination.k8s.io", "leases", "delete", False, id="no-lease-delete"),
        pytest.param("apps", "deployments", "get", False, id="no-deployments"),
    ],
)
def test_rbac_permits(group: str, resource: str, verb: str, allowed: bool) -> None:
    assert permits(operator_rules(), group=group, resource=resource, verb=verb) is allowed


def test_rules_are_data_with_reasons_and_no_wildcards() -> None:
    for rule in all_rules():
        assert rule.why
        assert "*" not in rule.verbs + rule.resources + rule.api_groups
        assert len(set(rule.verbs)) == len(rule.verbs)
    # One rule per resource and scope (the history's ConfigMaps in the operator's own
    # namespace are not an engine's delivered files in every namespace).
    keys = [(r.api_groups, r.resources, r.scope) for r in all_rules()]
    assert len(keys) == len(set(keys))


def test_operator_deployment() -> None:
    deployment = install_manifests(image="registry.example/kubemill:9", replicas=3)[-1]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert spec["replicas"] == 3
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == NAME
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["image"] == "registry.example/kubemill:9"
    assert container["command"] == ["kubemill"]
    assert container["args"] == [
        "operator",
        "--all-namespaces",
        f"--metrics-port={METRICS_PORT}",
        f"--health-port={HEALTH_PORT}",
        "--history=1000",
        # Job pods' progress sidecars run the operator's own image and report to this port.
        "--progress-port=8082",
        "--progress-image=registry.example/kubemill:9",
        "--leader-election",
    ]
    history_args = install_manifests(history=7)[-1]["spec"]["template"]["spec"]["containers"][0]
    assert "--history=7" in history_args["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": METRICS_PORT, "health": HEALTH_PORT, "progress": 8082}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}
    assert install_manifests()[-1]["spec"]["replicas"] == 2


def test_replicas_must_be_positive() -> None:
    with pytest.raises(ValueError, match="replicas"):
        install_manifests(replicas=0)


def test_history_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="history"):
        install_manifests(history=-1)


def test_operator_args_dedupe_namespaces() -> None:
    assert operator_args(watch_namespaces=["a", "a", "b"])[:3] == [
        "operator",
        "--namespace=a",
        "--namespace=b",
    ]


# --- deploy/ --------------------------------------------------------------------------------------


def test_deploy_directory_is_in_sync_with_the_generator(tmp_path: Path) -> None:
    write_deploy(tmp_path)
    generated = {
        str(p.relative_to(tmp_path)): p.read_text() for p in tmp_path.rglob("*") if p.is_file()
    }
    deploy = ROOT / "deploy"
    on_disk = {str(p.relative_to(deploy)): p.read_text() for p in deploy.rglob("*") if p.is_file()}
    stale = (
        "deploy/ is stale: run `python -m kubemill.substrates.kubernetes.install --write deploy`"
    )
    assert sorted(on_disk) == sorted(generated), stale
    for name, text in generated.items():
        assert on_disk[name] == text, f"{name}: {stale}"


def test_plain_yaml_is_the_default_install() -> None:
    text = deploy_files()["kubemill.yaml"]
    assert list(yaml.safe_load_all(text)) == install_manifests()


def _chart_objects(values: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    files = chart_files()
    objects: list[dict[str, Any]] = []
    for name in (
        "templates/serviceaccount.yaml",
        "templates/rbac.yaml",
        "templates/service.yaml",
        "templates/deployment.yaml",
    ):
        rendered = render(files[name], values=values, namespace=namespace)
        objects += [o for o in yaml.safe_load_all(rendered) if o]
    return objects


@pytest.mark.parametrize(
    ("values", "options"),
    [
        pytest.param(
            {"image": DEFAULT_IMAGE, "replicas": 2, "watchNamespaces": [], "history": 1000},
            {},
            id="defaults",
        ),
        pytest.param(
            {"image": "r/k:2", "replicas": 1, "watchNamespaces": ["a", "b"], "history": 5},
            {"image": "r/k:2", "replicas": 1, "watch_namespaces": ["a", "b"], "history": 5},
            id="namespaced",
        ),
        pytest.param(
            {"image": DEFAULT_IMAGE, "replicas": 2, "watchNamespaces": [], "history": 0},
            {"history": 0},
            id="no-history",
        ),
    ],
)
def test_helm_chart_renders_to_the_same_objects(
    values: dict[str, Any], options: dict[str, Any]
) -> None:
    expected = [
        o
        for o in install_manifests(namespace="ops", **options)
        if o["kind"] not in ("Namespace", "CustomResourceDefinition")
    ]
    assert sorted(kinds(_chart_objects(values, "ops")), key=str) == sorted(kinds(expected), key=str)
    by_key = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in _chart_objects(values, "ops")
    }
    for obj in expected:
        assert (
            by_key[(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])] == obj
        )


def test_chart_values_and_crds() -> None:
    files = chart_files()
    values = yaml.safe_load(files["values.yaml"])
    assert values == {
        "image": DEFAULT_IMAGE,
        "replicas": 2,
        "watchNamespaces": [],
        "history": 1000,
    }
    chart_crds = [yaml.safe_load(files[f"crds/{c['metadata']['name']}.yaml"]) for c in crds()]
    assert chart_crds == crds()
    chart = yaml.safe_load(files["Chart.yaml"])
    assert chart["apiVersion"] == "v2" and chart["name"] == "kubemill"


def test_main_prints_or_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--namespace", "ops", "--watch-namespace", "a"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed == install_manifests(namespace="ops", watch_namespaces=["a"])
    assert main(["--write", str(tmp_path)]) == 0
    assert (tmp_path / "kubemill.yaml").read_text() == deploy_files()["kubemill.yaml"]
    # A generated file that no longer belongs to the chart is removed on rewrite.
    stale = tmp_path / "helm" / "kubemill" / "templates" / "old.yaml"
    stale.write_text("kind: Old\n")
    write_deploy(tmp_path)
    assert not stale.exists()


@pytest.mark.parametrize("options", VARIANTS)
def test_no_shared_objects_so_any_yaml_dumper_writes_no_anchors(options: dict[str, Any]) -> None:
    assert "&id" not in yaml.safe_dump_all(install_manifests(**options))


@pytest.mark.parametrize("watch", [None, ["team-a"]])
def test_progress_off_leaves_out_the_endpoint_its_service_and_its_grant(
    watch: list[str] | None,
) -> None:
    objects = install_manifests(progress=False, watch_namespaces=watch)
    deployment = objects[-1]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert not [a for a in container["args"] if a.startswith("--progress")]
    assert "progress" not in {p["name"] for p in container["ports"]}
    assert "Service" not in {o["kind"] for o in objects}
    assert "tokenreviews" not in str([o for o in objects if "rules" in o])
    on = install_manifests(watch_namespaces=watch)
    assert permits(
        operator_rules(clusterwide=watch is None),
        group="authentication.k8s.io",
        resource="tokenreviews",
        verb="create",
    )
    assert "tokenreviews" in str([o for o in on if "rules" in o])
