"""`kubemill render` of SparkApplications: the seed's v1beta2 (Scala) and a Python one.

What the operator creates, each valid for Kubernetes (kubernetes-validate), shaped like what
Spark's own cluster-mode submission creates (docs/notes/spark-submit-on-kubernetes.md):
the ``spark.properties`` ConfigMap, the driver's ServiceAccount/Role/RoleBinding, the
headless driver service and the UI service, and the driver pod with Spark's labels, ports,
args, env and memory (heap plus overhead: 1433Mi for Python's 1g, 1024+384 for the JVM's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubemill.engines.spark.api.application import SparkApplication
from kubemill.kinds import load_one
from kubemill.sdk.manifests import load_path
from kubemill.substrates.kubernetes.render import render_job
from support.manifest_checks import k8s_errors

SEED = Path(__file__).resolve().parents[2] / "manifests" / "spark" / "sparkapplication-v1beta2.yaml"

PYTHON = {
    "apiVersion": "sparkoperator.k8s.io/v1beta2",
    "kind": "SparkApplication",
    "metadata": {"name": "spark-pi", "namespace": "analytics"},
    "spec": {
        "type": "Python",
        "sparkVersion": "4.0.0",
        "image": "spark:4.0.0",
        "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
        "arguments": ["10"],
        "executor": {"instances": 2},
    },
}


def seed_app() -> SparkApplication:
    [job] = load_path(SEED)
    assert isinstance(job, SparkApplication)
    return job


def python_app() -> SparkApplication:
    job = load_one(PYTHON)
    assert isinstance(job, SparkApplication)
    return job


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def properties(objects: list[dict[str, Any]]) -> dict[str, str]:
    config_map = named(objects, "ConfigMap", "spark-pi-spark-conf")
    lines = config_map["data"]["spark.properties"].splitlines()
    return dict(line.split("=", 1) for line in lines)


APPS = [pytest.param(seed_app(), id="seed-v1beta2"), pytest.param(python_app(), id="python")]


@pytest.mark.parametrize("app", APPS)
def test_every_rendered_object_is_valid_kubernetes(app: SparkApplication) -> None:
    objects = render_job(app)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "spark-pi-spark-conf"),
        ("ServiceAccount", "spark-pi-driver"),
        ("Role", "spark-pi-driver"),
        ("RoleBinding", "spark-pi-driver"),
        ("NetworkPolicy", "spark-pi-policy"),
        ("Service", "spark-pi-driver-svc"),
        ("Service", "spark-pi-ui-svc"),
        ("Pod", "spark-pi-driver-0"),
    ]
    assert [e for o in objects for e in k8s_errors(o)] == []


@pytest.mark.parametrize("app", APPS)
def test_the_network_policy_lets_only_the_applications_pods_reach_its_executors(
    app: SparkApplication,
) -> None:
    objects = render_job(app)
    selector = named(objects, "Pod", "spark-pi-driver-0")["metadata"]["labels"][
        "spark-app-selector"
    ]
    assert properties(objects)["spark.app.id"] == selector  # the executors' label, from Spark
    spec = named(objects, "NetworkPolicy", "spark-pi-policy")["spec"]
    assert spec == {
        "podSelector": {"matchLabels": {"spark-role": "executor", "spark-app-selector": selector}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"spark-app-selector": selector}}}]}],
    }


@pytest.mark.parametrize(
    ("app", "main_class", "main_file", "memory", "arguments"),
    [
        pytest.param(
            seed_app(),
            "org.apache.spark.examples.SparkPi",
            "local:///opt/spark/examples/jars/spark-examples_2.11-2.4.5.jar",
            # The seed's 512m heap with the JVM's 384 MiB floor of overhead.
            f"{512 + 384}Mi",
            [],
            id="seed-v1beta2",
        ),
        pytest.param(
            python_app(),
            "org.apache.spark.deploy.PythonRunner",
            "local:///opt/spark/examples/src/main/python/pi.py",
            "1433Mi",
            ["10"],
            id="python",
        ),
    ],
)
def test_the_driver_pod_is_shaped_like_sparks_own(
    app: SparkApplication, main_class: str, main_file: str, memory: str, arguments: list[str]
) -> None:
    objects = render_job(app)
    pod = named(objects, "Pod", "spark-pi-driver-0")
    labels = pod["metadata"]["labels"]
    assert labels["spark-role"] == "driver"
    assert labels["spark-app-name"] == "spark-pi"
    assert labels["spark-version"] == app.spec.spark_version
    assert labels["spark-app-selector"].startswith("spark-")
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    (container,) = spec["containers"]
    assert container["name"] == "spark-kubernetes-driver"
    assert container["args"] == [
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        main_class,
        main_file,
        *arguments,
    ]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {
        "driver-rpc-port": 7078,
        "blockmanager": 7079,
        "spark-ui": 4040,
        "spark-connect": 15002,
    }
    assert container["resources"]["requests"]["memory"] == memory
    assert container["resources"]["limits"]["memory"] == memory
    env = {e["name"]: e for e in container["env"]}
    assert env["SPARK_APPLICATION_ID"]["value"] == labels["spark-app-selector"]
    assert env["SPARK_DRIVER_BIND_ADDRESS"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["SPARK_CONF_DIR"]["value"] == "/opt/spark/conf"
    # spark.properties is mounted where the args say, from the ConfigMap.
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/opt/spark/conf")
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == "spark-pi-spark-conf"
    # The driver resolves as <pod>.<driver service>, which spark.driver.host names.
    assert (spec["hostname"], spec["subdomain"]) == ("spark-pi-driver-0", "spark-pi-driver-svc")
    conf = properties(objects)
    namespace = app.namespace
    assert conf["spark.driver.host"] == f"spark-pi-driver-0.spark-pi-driver-svc.{namespace}.svc"
    assert conf["spark.kubernetes.driver.pod.name"] == "spark-pi-driver-0"
    assert conf["spark.kubernetes.namespace"] == namespace
    assert conf["spark.app.id"] == labels["spark-app-selector"]
    assert conf["spark.executor.instances"] == str(app.executor_instances)


def test_the_services_select_the_driver() -> None:
    objects = render_job(python_app())
    pod = named(objects, "Pod", "spark-pi-driver-0")
    driver_svc = named(objects, "Service", "spark-pi-driver-svc")
    assert driver_svc["spec"]["clusterIP"] == "None"
    assert {p["port"] for p in driver_svc["spec"]["ports"]} == {7078, 7079, 4040, 15002}
    connect = next(p for p in driver_svc["spec"]["ports"] if p["port"] == 15002)
    assert connect["appProtocol"] == "grpc"  # as Spark's own driver service
    ui = named(objects, "Service", "spark-pi-ui-svc")
    assert ui["spec"]["type"] == "ClusterIP"
    assert [(p["port"], p["targetPort"]) for p in ui["spec"]["ports"]] == [(4040, 4040)]
    for service in (driver_svc, ui):
        selector = service["spec"]["selector"]
        assert selector.items() <= pod["metadata"]["labels"].items()


def test_the_drivers_role_lets_it_manage_its_executors() -> None:
    objects = render_job(python_app())
    (rule,) = named(objects, "Role", "spark-pi-driver")["rules"]
    assert set(rule["resources"]) == {"pods", "services", "configmaps"}
    assert {"create", "get", "list", "watch", "delete"} <= set(rule["verbs"])
    binding = named(objects, "RoleBinding", "spark-pi-driver")
    assert binding["subjects"][0]["name"] == "spark-pi-driver"
    pod = named(objects, "Pod", "spark-pi-driver-0")
    assert pod["spec"]["serviceAccountName"] == "spark-pi-driver"
    # The seed names its own account, which wins (it may carry more rights).
    seed_pod = named(render_job(seed_app()), "Pod", "spark-pi-driver-0")
    assert seed_pod["spec"]["serviceAccountName"] == "spark"
