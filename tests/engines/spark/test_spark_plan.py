"""The Spark framework: the driver as cluster mode runs it, spark.properties, the services,
the driver's access, foreign executors, and the status extension."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ApplicationStateType, Condition, ConditionType, JobStatus, KindTable
from kubemill.api.loader import load_one
from kubemill.engines.spark.api.application import SPARKAPPLICATION, ExecutorState, SparkApplication
from kubemill.engines.spark.framework.driver import (
    EXECUTOR_TEMPLATE,
    application_id,
    driver_service_name,
)
from kubemill.engines.spark.framework.planner import Spark, spark_status
from kubemill.engines.spark.framework.wire import PROPERTIES, PYTHON_RUNNER
from kubemill.frameworks import ObservedPodView, Plan, StatusView, SuccessPolicy
from support.framework_networks import ClusterNetwork, LoopbackNetwork

SEED = Path(__file__).parents[2] / "manifests" / "spark" / "sparkapplication-v1beta2.yaml"
KINDS = KindTable([SPARKAPPLICATION])


def app_of(doc: dict[str, Any]) -> SparkApplication:
    job = load_one(doc, kinds=KINDS)
    assert isinstance(job, SparkApplication)
    return job


def python_app(name: str = "pi", **spec: Any) -> SparkApplication:
    return app_of(
        {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {
                "type": "Python",
                "sparkVersion": "4.0.0",
                "image": "spark:4.0.0",
                "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
                "arguments": ["10"],
                **spec,
            },
        }
    )


def seed_app() -> SparkApplication:
    doc = yaml.safe_load(SEED.read_text(encoding="utf-8"))
    return app_of(doc)


def cluster_plan(app: SparkApplication) -> Plan:
    return Spark().plan(app, ClusterNetwork(app.name, app.namespace))


def props(plan: Plan) -> dict[str, str]:
    (conf,) = plan.files
    text = next(f.content for f in conf.files if f.name == PROPERTIES)
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        out[key] = value
    return out


def driver_container(plan: Plan) -> Any:
    (driver,) = plan.replicas
    return next(c for c in driver.template.spec.containers if c.name == driver.container)


@pytest.mark.parametrize(
    ("app", "main_class", "memory", "resource_type"),
    [
        pytest.param(python_app(), PYTHON_RUNNER, "1433Mi", "python", id="python"),
        pytest.param(
            python_app(
                type="Scala", mainClass="org.example.Pi", mainApplicationFile="local:///a.jar"
            ),
            "org.example.Pi",
            f"{1024 + 384}Mi",
            "java",
            id="jvm",
        ),
        pytest.param(
            seed_app(), "org.apache.spark.examples.SparkPi", f"{512 + 384}Mi", "java", id="seed"
        ),
    ],
)
def test_the_driver_runs_sparks_entrypoint_as_cluster_mode_does(
    app: SparkApplication, main_class: str, memory: str, resource_type: str
) -> None:
    plan = cluster_plan(app)
    (driver,) = plan.replicas
    container = driver_container(plan)
    assert container.name == "spark-kubernetes-driver"
    assert container.args == [
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        main_class,
        app.spec.main_application_file,
        *(app.spec.arguments or []),
    ]
    assert container.resources["requests"]["memory"] == memory
    assert container.resources["limits"]["memory"] == memory
    assert props(plan)["spark.kubernetes.resource.type"] == resource_type
    assert driver.restart_policy.value == "Never"


def test_sparks_labels_ports_and_env_on_the_driver() -> None:
    app = python_app()
    plan = cluster_plan(app)
    (driver,) = plan.replicas
    labels = driver.template.metadata.labels
    assert labels["spark-role"] == "driver"
    assert labels["spark-app-name"] == "pi"
    assert labels["spark-version"] == "4.0.0"
    assert labels["spark-app-selector"] == application_id(app)
    assert dict(driver.ports) == {
        "driver-rpc-port": 7078,
        "blockmanager": 7079,
        "spark-ui": 4040,
        "spark-connect": 15002,
    }
    env = {e.name: e for e in driver.env}
    assert env["SPARK_USER"].value == "spark"  # who the spark-operator submits as
    assert env["SPARK_APPLICATION_ID"].value == application_id(app)
    assert env["SPARK_CONF_DIR"].value == "/opt/spark/conf"
    bind = env["SPARK_DRIVER_BIND_ADDRESS"].value_from
    assert bind is not None and bind.field_ref is not None
    assert bind.field_ref.field_path == "status.podIP"


def test_spark_user_is_the_proxy_user_when_given_and_the_users_env_wins() -> None:
    proxied = cluster_plan(python_app(proxyUser="alice")).replicas[0]
    assert {e.name: e.value for e in proxied.env}["SPARK_USER"] == "alice"
    own = python_app(driver={"env": [{"name": "SPARK_USER", "value": "bob"}]})
    (driver,) = cluster_plan(own).replicas
    assert "SPARK_USER" not in {e.name for e in driver.env}
    container = driver.template.spec.containers[0]
    assert {e.name: e.value for e in container.env or []}["SPARK_USER"] == "bob"


def test_the_application_id_follows_the_uid_and_is_stable_without_one() -> None:
    app = python_app()
    assert application_id(app) == application_id(python_app())
    assert application_id(app) != application_id(python_app("other"))
    app.metadata.uid = "0a1b2c3d-0000-4000-8000-0123456789ab"
    assert application_id(app) == "spark-0a1b2c3d000040008000" + "0123456789ab"


def test_spark_properties_tell_the_driver_how_to_create_its_executors() -> None:
    app = python_app(
        sparkConf={"spark.eventLog.enabled": "true"},
        hadoopConf={"fs.gs.project.id": "p"},
        executor={"instances": 3, "cores": 2, "memory": "2g", "labels": {"team": "a"}},
    )
    plan = cluster_plan(app)
    conf = props(plan)
    expected = {
        "spark.eventLog.enabled": "true",
        "spark.hadoop.fs.gs.project.id": "p",
        "spark.app.name": "pi",
        "spark.app.id": application_id(app),
        "spark.submit.deployMode": "cluster",
        "spark.kubernetes.namespace": "team",
        "spark.kubernetes.driver.pod.name": plan.replicas[0].name,
        "spark.driver.host": f"pi-driver-0.{driver_service_name(app)}.team.svc",
        "spark.driver.port": "7078",
        "spark.driver.blockManager.port": "7079",
        "spark.kubernetes.container.image": "spark:4.0.0",
        "spark.kubernetes.executor.container.image": "spark:4.0.0",
        "spark.executor.instances": "3",
        "spark.executor.cores": "2",
        "spark.executor.memory": "2g",
        "spark.kubernetes.executor.label.team": "a",
        # What the operator watches executors by, and counts them as.
        "spark.kubernetes.executor.label.kubemill.dev/job-name": "pi",
        "spark.kubernetes.executor.label.kubemill.dev/replica-type": "executor",
        # The spark-operator's labels on the executors it launches.
        "spark.kubernetes.executor.label.sparkoperator.k8s.io/app-name": "pi",
        "spark.kubernetes.executor.label.sparkoperator.k8s.io/launched-by-spark-operator": "true",
        "spark.kubernetes.executor.podNamePrefix": "pi",
        "spark.kubernetes.memoryOverheadFactor": "0.4",
    }
    assert {k: conf.get(k) for k in expected} == expected


def test_the_driver_host_comes_from_the_network() -> None:
    app = python_app()
    plan = Spark().plan(app, LoopbackNetwork())
    conf = props(plan)
    assert conf["spark.driver.host"] == "driver-0"
    assert driver_container(plan).args[2] == "/tmp/job/files/pi-spark-conf/spark.properties"


def test_the_executors_pod_template_is_shipped_with_the_conf() -> None:
    plan = cluster_plan(seed_app())
    (conf,) = plan.files
    template = json.loads(next(f.content for f in conf.files if f.name == EXECUTOR_TEMPLATE))
    (container,) = template["spec"]["containers"]
    assert container["name"] == "spark-kubernetes-executor"
    assert container["volumeMounts"] == [{"name": "test-volume", "mountPath": "/tmp"}]
    assert props(plan)["spark.kubernetes.executor.podTemplateFile"] == (
        f"/opt/spark/conf/{EXECUTOR_TEMPLATE}"
    )


def test_properties_escape_what_java_would_misread() -> None:
    plan = cluster_plan(python_app(sparkConf={"spark.a": "x\ny", "spark.b": " lead"}))
    (conf,) = plan.files
    text = next(f.content for f in conf.files if f.name == PROPERTIES)
    assert "spark.a=x\\ny\n" in text
    assert "spark.b=\\ lead\n" in text


def test_services_access_executors_and_outcome() -> None:
    app = python_app()
    plan = cluster_plan(app)
    assert plan.outcome == SuccessPolicy("Driver", "first")
    assert not plan.services
    by_name = {s.name: s for s in plan.exposed}
    headless = by_name["pi-driver-svc"]
    assert headless.type == "Headless" and headless.replica_type == "Driver"
    assert {p.port for p in headless.ports} == {7078, 7079, 4040, 15002}
    assert plan.subdomain == "pi-driver-svc"
    ui = by_name["pi-ui-svc"]
    assert (ui.type, [(p.name, p.port) for p in ui.ports]) == ("ClusterIP", [("spark-ui", 4040)])
    assert [(f.replica_type, f.owner_type) for f in plan.foreign] == [("Executor", "Driver")]
    assert plan.access is not None and plan.access.replica_types == ("Driver",)
    (rule,) = plan.access.rules
    assert set(rule.resources) == {"pods", "services", "configmaps"}
    assert {"create", "get", "list", "watch", "delete"} <= set(rule.verbs)


def test_a_long_name_gets_a_service_name_kubernetes_accepts() -> None:
    app = python_app("a" * 56)
    name = driver_service_name(app)
    assert len(name) <= 63 and name.endswith("-driver-svc")


def view(
    app: SparkApplication, *conditions: ConditionType, pods: tuple[ObservedPodView, ...] = ()
) -> StatusView:
    status = JobStatus(
        conditions=[
            Condition(type=c, status="True", reason="r", message=f"{c.value} because")
            for c in conditions
        ]
    )
    return StatusView(job=app, plan=cluster_plan(app), status=status, pods=pods)


def driver_pod(phase: str) -> ObservedPodView:
    return ObservedPodView("pi-driver-0", "Driver", 0, phase, phase == "Running")


def executor(name: str, phase: str) -> ObservedPodView:
    return ObservedPodView(name, "Executor", -1, phase, False, owner="pi-driver-0")


@pytest.mark.parametrize(
    ("conditions", "pods", "state", "message"),
    [
        ((), (), ApplicationStateType.SUBMITTED, None),
        ((ConditionType.CREATED,), (driver_pod("Pending"),), ApplicationStateType.SUBMITTED, None),
        ((ConditionType.RUNNING,), (driver_pod("Running"),), ApplicationStateType.RUNNING, None),
        (
            (ConditionType.SUCCEEDED,),
            (driver_pod("Succeeded"),),
            ApplicationStateType.COMPLETED,
            None,
        ),
        (
            (ConditionType.FAILED,),
            (driver_pod("Failed"),),
            ApplicationStateType.FAILED,
            "Failed because",
        ),
        ((ConditionType.SUSPENDED,), (), ApplicationStateType.SUSPENDED, None),
    ],
)
def test_application_state_follows_the_cores_verdict(
    conditions: tuple[ConditionType, ...],
    pods: tuple[ObservedPodView, ...],
    state: ApplicationStateType,
    message: str | None,
) -> None:
    app = python_app()
    fields = spark_status(view(app, *conditions, pods=pods))
    application_state = fields["application_state"]
    assert application_state.state is state  # type: ignore[attr-defined]
    assert application_state.error_message == message  # type: ignore[attr-defined]


def test_driver_info_and_executor_state() -> None:
    app = python_app()
    app.status.executor_state = {"pi-exec-9": ExecutorState.RUNNING}
    pods = (
        driver_pod("Running"),
        executor("pi-exec-1", "Running"),
        executor("pi-exec-2", "Pending"),
    )
    fields = spark_status(view(app, ConditionType.RUNNING, pods=pods))
    info = fields["driver_info"]
    assert info.pod_name == "pi-driver-0"  # type: ignore[attr-defined]
    assert info.web_ui_service_name == "pi-ui-svc"  # type: ignore[attr-defined]
    assert info.web_ui_port == 4040  # type: ignore[attr-defined]
    assert fields["executor_state"] == {
        # An executor that is gone keeps its last state.
        "pi-exec-9": ExecutorState.RUNNING,
        "pi-exec-1": ExecutorState.RUNNING,
        "pi-exec-2": ExecutorState.PENDING,
    }
    assert fields["spark_application_id"] == application_id(app)


def test_the_ui_address_is_the_ui_services_cluster_ip_once_allocated() -> None:
    app = python_app(sparkUIOptions={"servicePort": 8080})
    assert spark_status(view(app))["driver_info"].web_ui_address is None  # type: ignore[attr-defined]
    allocated = replace(
        view(app), cluster_ips=(("pi-driver-svc", "10.0.0.1"), ("pi-ui-svc", "10.96.3.4"))
    )
    info = spark_status(allocated)["driver_info"]
    # As the spark-operator: <clusterIP of the UI service>:<its port>.
    assert info.web_ui_address == "10.96.3.4:8080"  # type: ignore[attr-defined]


def test_spark_ui_options_shape_the_ui_service() -> None:
    app = python_app(
        sparkUIOptions={"servicePort": 8080, "servicePortName": "http", "serviceType": "NodePort"}
    )
    plan = cluster_plan(app)
    ui = next(s for s in plan.exposed if s.name == "pi-ui-svc")
    assert ui.type == "NodePort"
    assert [(p.name, p.port, p.target_port) for p in ui.ports] == [("http", 8080, 4040)]
    info = spark_status(view(app))["driver_info"]
    assert info.web_ui_port == 8080  # type: ignore[attr-defined]
