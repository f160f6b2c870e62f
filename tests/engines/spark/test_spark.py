"""SparkApplication: the seed's v1beta2 manifest loads unchanged, a manifest with every field
round-trips, upstream's defaults, the derived Driver/Executor view, the status model, and
every validation error and refusal with its field path.

These tests load through a kind table of their own, independent of the registry
(:mod:`kubemill.kinds`, where SparkApplication is registered with its framework).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import (
    API_VERSION,
    ApplicationStateType,
    FieldError,
    KindTable,
    ManifestError,
    RestartPolicy,
)
from kubemill.api.loader import load_one
from kubemill.engines.spark.api.application import SPARKAPPLICATION, ExecutorState, SparkApplication
from kubemill.engines.spark.api.scheduled import SCHEDULEDSPARKAPPLICATION
from kubemill.engines.spark.api.spec import DeployMode, SparkApplicationType, SparkRestartPolicyType

MANIFESTS = Path(__file__).parents[2] / "manifests" / "spark"
SEED = MANIFESTS / "sparkapplication-v1beta2.yaml"
FULL = MANIFESTS / "full-v1beta2.yaml"
KINDS = KindTable([SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION])


def load_app(source: Any) -> SparkApplication:
    job = load_one(source, kinds=KINDS)
    assert isinstance(job, SparkApplication)
    return job


def errors_of(source: Any) -> list[FieldError]:
    with pytest.raises(ManifestError) as caught:
        load_one(source, kinds=KINDS)
    return list(caught.value.errors)


def seed() -> dict[str, Any]:
    doc = yaml.safe_load(SEED.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def full() -> dict[str, Any]:
    doc = yaml.safe_load(FULL.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def minimal(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "pi"},
        "spec": {
            "type": "Python",
            "sparkVersion": "4.0.0",
            "image": "spark:4.0.0",
            "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
            **spec,
        },
    }


# --- the seed --------------------------------------------------------------------------------


def test_the_seed_loads_unchanged_with_every_field() -> None:
    app = load_app(SEED.read_text(encoding="utf-8"))
    spec = app.spec
    assert app.api_version == API_VERSION
    assert (app.name, app.namespace) == ("spark-pi", "default")
    assert spec.type is SparkApplicationType.SCALA
    assert spec.mode is DeployMode.CLUSTER
    assert spec.image == "gcr.io/spark-operator/spark:v2.4.5"
    assert spec.image_pull_policy == "Always"
    assert spec.main_class == "org.apache.spark.examples.SparkPi"
    assert spec.main_application_file == (
        "local:///opt/spark/examples/jars/spark-examples_2.11-2.4.5.jar"
    )
    assert spec.spark_version == "2.4.5"
    assert spec.restart_policy.type is SparkRestartPolicyType.NEVER
    assert spec.volumes == [
        {"name": "test-volume", "hostPath": {"path": "/tmp", "type": "Directory"}}
    ]
    mount = [{"name": "test-volume", "mountPath": "/tmp"}]
    assert (spec.driver.cores, spec.driver.core_limit, spec.driver.memory) == (1, "1200m", "512m")
    assert spec.driver.labels == {"version": "2.4.5"}
    assert spec.driver.service_account == "spark"
    assert spec.driver.volume_mounts == mount
    assert (spec.executor.cores, spec.executor.instances, spec.executor.memory) == (1, 1, "512m")
    assert spec.executor.labels == {"version": "2.4.5"}
    assert spec.executor.volume_mounts == mount


def test_the_seed_as_driver_and_executor_replicas() -> None:
    app = load_app(seed())
    specs = app.replica_specs
    assert list(specs) == ["Driver", "Executor"]
    assert [specs[t].replicas for t in specs] == [1, 1]
    assert all(s.restart_policy is RestartPolicy.NEVER for s in specs.values())
    driver = specs["Driver"].template
    (container,) = driver.spec.containers
    assert container.name == "spark-kubernetes-driver"
    assert container.image == "gcr.io/spark-operator/spark:v2.4.5"
    assert container.image_pull_policy == "Always"
    # 512 MiB of heap and Spark's 384 MiB minimum overhead.
    assert container.resources == {
        "requests": {"cpu": "1", "memory": "896Mi"},
        "limits": {"cpu": "1200m", "memory": "896Mi"},
    }
    assert container.volume_mounts == [{"name": "test-volume", "mountPath": "/tmp"}]
    assert driver.spec.volumes == [
        {"name": "test-volume", "hostPath": {"path": "/tmp", "type": "Directory"}}
    ]
    assert driver.spec.service_account_name == "spark"
    assert driver.spec.restart_policy == "Never"
    assert driver.metadata.labels == {"version": "2.4.5"}
    executor = specs["Executor"].template
    assert executor.spec.containers[0].name == "spark-kubernetes-executor"
    assert executor.spec.containers[0].resources == {
        "requests": {"cpu": "1", "memory": "896Mi"},
        "limits": {"memory": "896Mi"},
    }
    assert executor.spec.service_account_name is None


def test_the_view_is_derived_afresh_from_the_spec() -> None:
    app = load_app(seed())
    app.spec.executor.instances = 4
    app.spec.driver.memory = "1g"
    assert app.replica_count("Executor") == 4
    resources = app.replica_specs["Driver"].template.spec.containers[0].resources
    assert resources is not None
    assert resources["requests"]["memory"] == "1408Mi"
    # A view: changing it changes nothing in the spec.
    view = app.replica_specs["Driver"].template.spec
    (view.volumes or [])[0]["name"] = "changed"
    (view.containers[0].volume_mounts or [])[0]["mountPath"] = "/elsewhere"
    assert (app.spec.volumes or [])[0]["name"] == "test-volume"
    assert (app.spec.driver.volume_mounts or [])[0]["mountPath"] == "/tmp"


def test_run_policy_stands_for_the_spec() -> None:
    app = load_app(seed())
    policy = app.run_policy
    assert (policy.suspend, policy.ttl_seconds_after_finished, policy.backoff_limit) == (
        False,
        None,
        0,
    )
    assert policy.scheduling_policy is None
    app.spec.suspend = True
    app.spec.time_to_live_seconds = 60
    assert (app.run_policy.suspend, app.run_policy.ttl_seconds_after_finished) == (True, 60)


# --- defaults --------------------------------------------------------------------------------


def test_upstream_defaults() -> None:
    app = load_app(minimal())
    spec = app.spec
    assert spec.mode is DeployMode.CLUSTER
    assert spec.restart_policy.type is SparkRestartPolicyType.NEVER
    assert spec.restart_policy.on_failure_retry_interval is None
    assert (spec.driver.cores, spec.driver.memory) == (1, "1g")
    assert (spec.executor.cores, spec.executor.memory, spec.executor.instances) == (1, "1g", 1)
    assert spec.dynamic_allocation is None


def test_defaults_leave_what_spark_conf_sets() -> None:
    conf = {
        "spark.driver.cores": "2",
        "spark.executor.memory": "3g",
        "spark.executor.instances": "4",
    }
    app = load_app(minimal(sparkConf=conf))
    assert app.spec.driver.cores is None
    assert app.spec.executor.memory is None
    assert app.spec.executor.instances is None
    assert app.executor_instances == 4
    resources = app.replica_specs["Executor"].template.spec.containers[0].resources
    assert resources is not None
    # 3 GiB of heap with the Python overhead factor 0.4.
    assert resources["limits"]["memory"] == f"{int(3072 * 1.4)}Mi"


@pytest.mark.parametrize("kind", ["OnFailure", "Always"])
def test_retry_intervals_default_to_five_seconds_when_retrying(kind: str) -> None:
    policy = load_app(minimal(restartPolicy={"type": kind})).spec.restart_policy
    assert policy.on_failure_retry_interval == 5
    assert policy.on_submission_failure_retry_interval == 5


def test_dynamic_allocation_defaults() -> None:
    app = load_app(minimal(dynamicAllocation={"enabled": True, "minExecutors": 2}))
    assert app.spec.executor.instances is None
    assert app.spec.dynamic_allocation is not None
    assert app.spec.dynamic_allocation.shuffle_tracking_enabled is True
    assert app.executor_instances == 2
    off = load_app(minimal(dynamicAllocation={"enabled": False}))
    assert off.spec.executor.instances == 1
    assert off.spec.dynamic_allocation is not None
    assert off.spec.dynamic_allocation.shuffle_tracking_enabled is None


def test_dynamic_allocation_from_spark_conf() -> None:
    conf = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.initialExecutors": "3",
        "spark.dynamicAllocation.maxExecutors": "6",
    }
    app = load_app(minimal(sparkConf=conf))
    assert app.dynamic_allocation_enabled
    assert app.spec.executor.instances is None
    assert app.executor_instances == 3


@pytest.mark.parametrize(
    ("spec", "role", "mib"),
    [
        # Python and R: 0.4 of the heap; JVM: 0.1, at least 384 MiB (the note's figures).
        ({"type": "Python"}, {"memory": "1g"}, 1433),
        ({"type": "R"}, {"memory": "1g"}, 1433),
        ({"type": "Scala"}, {"memory": "1g"}, 1408),
        ({"type": "Java"}, {"memory": "8g"}, 8192 + 819),
        ({"type": "Scala", "memoryOverheadFactor": "0.2"}, {"memory": "4096m"}, 4096 + 819),
        ({"type": "Python"}, {"memory": "2g", "memoryOverhead": "100m"}, 2148),
        ({"type": "Python"}, {"memory": "1048576k"}, 1433),
    ],
)
def test_pod_memory_is_heap_plus_overhead(
    spec: dict[str, Any], role: dict[str, Any], mib: int
) -> None:
    app = load_app(minimal(**spec, driver=role))
    assert app.pod_memory_mib(app.spec.driver) == mib
    resources = app.replica_specs["Driver"].template.spec.containers[0].resources
    assert resources is not None
    assert resources["requests"]["memory"] == resources["limits"]["memory"] == f"{mib}Mi"


# --- every field -----------------------------------------------------------------------------


def _contains(whole: Any, part: Any, path: str = "") -> list[str]:
    """Where ``part`` (what the user wrote) is missing from or differs in ``whole``."""
    if isinstance(part, dict):
        if not isinstance(whole, dict):
            return [path]
        return [m for k, v in part.items() for m in _contains(whole.get(k), v, f"{path}.{k}")]
    if isinstance(part, list):
        if not isinstance(whole, list) or len(whole) != len(part):
            return [path]
        return [m for i, v in enumerate(part) for m in _contains(whole[i], v, f"{path}[{i}]")]
    return [] if whole == part else [f"{path}: {whole!r} != {part!r}"]


def test_every_field_round_trips() -> None:
    doc = full()
    app = load_app(copy.deepcopy(doc))
    wire = app.to_wire()
    assert _contains(wire["spec"], doc["spec"]) == []
    assert wire["metadata"]["labels"] == {"team": "data"}
    again = load_app(wire)
    assert again.to_wire() == wire
    assert again.replica_specs == app.replica_specs


def test_every_field_in_the_derived_pods() -> None:
    app = load_app(full())
    driver = app.replica_specs["Driver"].template
    main, sidecar = driver.spec.containers
    assert main.name == "spark-kubernetes-driver"
    assert main.working_dir == "/work"  # from the pod template the fields go on top of
    assert main.image == "spark-driver:4.0.0"
    assert [e.name for e in main.env or []] == [
        "MODE",
        "OLD_STYLE",
        "DB_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SPARK_CONF_DIR",
        "HADOOP_CONF_DIR",
    ]
    assert [e.value for e in main.env or []][-3:] == [
        "/etc/gcp/key.json",
        "/etc/spark/conf",
        "/etc/hadoop/conf",
    ]
    assert main.env_from == [{"configMapRef": {"name": "driver-env"}}]
    assert main.resources == {
        "requests": {"cpu": "1500m", "memory": "2560Mi"},
        "limits": {"cpu": "2", "memory": "2560Mi", "nvidia.com/gpu": 1},
    }
    assert main.volume_mounts == [
        {"name": "data", "mountPath": "/data"},
        {"name": "spark-configmap-volume", "mountPath": "/etc/spark/conf", "readOnly": True},
        {"name": "hadoop-configmap-volume", "mountPath": "/etc/hadoop/conf", "readOnly": True},
        {"name": "driver-files-vol", "mountPath": "/etc/driver-files", "readOnly": True},
        {"name": "gcp-key-vol", "mountPath": "/etc/gcp", "readOnly": True},
    ]
    assert [(p.name, p.container_port) for p in main.ports or []] == [("jmx", 9999)]
    assert main.security_context == {"allowPrivilegeEscalation": False}
    assert main.lifecycle is not None
    assert sidecar.name == "logger"
    assert [c.name for c in driver.spec.init_containers or []] == ["prepare"]
    pod = driver.spec
    assert pod.volumes == [
        {"name": "data", "emptyDir": {}},
        {"name": "spark-configmap-volume", "configMap": {"name": "spark-extra-conf"}},
        {"name": "hadoop-configmap-volume", "configMap": {"name": "hadoop-site"}},
        {"name": "driver-files-vol", "configMap": {"name": "driver-files"}},
        {"name": "gcp-key-vol", "secret": {"secretName": "gcp-key"}},
    ]
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.image_pull_secrets == [{"name": "registry-key"}]
    assert (pod.scheduler_name, pod.priority_class_name, pod.runtime_class_name) == (
        "volcano",
        "high",
        "runc",
    )
    assert pod.security_context == {"runAsUser": 185, "fsGroup": 185}
    assert (pod.share_process_namespace, pod.termination_grace_period_seconds) == (True, 30)
    assert driver.metadata.labels == {"from": "template", "role": "driver"}
    assert driver.metadata.annotations == {"note": "driver"}
    executor = app.replica_specs["Executor"]
    assert executor.replicas == 2
    assert [v["name"] for v in executor.template.spec.volumes or []] == [
        "cache",
        "spark-configmap-volume",
        "hadoop-configmap-volume",
    ]
    assert executor.template.spec.service_account_name == "spark-executor"


def test_host_network_resolves_cluster_names() -> None:
    doc = seed()
    doc["spec"]["executor"]["hostNetwork"] = True
    specs = load_app(doc).replica_specs
    assert specs["Executor"].template.spec.host_network is True
    assert specs["Executor"].template.spec.dns_policy == "ClusterFirstWithHostNet"
    assert specs["Driver"].template.spec.dns_policy is None


def test_batch_scheduler_is_a_scheduling_policy() -> None:
    policy = load_app(full()).run_policy
    assert policy.ttl_seconds_after_finished == 3600
    assert policy.scheduling_policy is not None
    assert policy.scheduling_policy.queue == "analytics"
    assert policy.scheduling_policy.priority_class == "high"
    assert policy.scheduling_policy.min_resources == {"cpu": "4", "memory": "8Gi"}
    plugins = load_app(minimal(batchScheduler="kube-scheduler"))
    assert plugins.run_policy.scheduling_policy is not None


def test_our_api_version_loads_the_same() -> None:
    ours = {**full(), "apiVersion": API_VERSION}
    assert load_app(ours).to_wire() == load_app(full()).to_wire()


def test_python_version_may_be_a_number() -> None:
    assert load_app(minimal(pythonVersion=3)).spec.python_version == "3"


# --- status ----------------------------------------------------------------------------------


def test_status_as_the_spark_operator_writes_it() -> None:
    doc = seed()
    doc["status"] = {
        "sparkApplicationId": "spark-0123456789abcdef",
        "submissionID": "8f7e1d7c-1d2b-4c6b-9b5e-0a1b2c3d4e5f",
        "lastSubmissionAttemptTime": "2026-12-01T10:00:00Z",
        "terminationTime": None,
        "driverInfo": {
            "podName": "spark-pi-driver",
            "webUIServiceName": "spark-pi-ui-svc",
            "webUIAddress": "10.0.0.7:4040",
            "webUIPort": 4040,
            "webUIIngressName": "spark-pi-ui-ingress",
            "webUIIngressAddress": "spark-pi.example.com",
        },
        "applicationState": {"state": "RUNNING"},
        "executorState": {"spark-pi-1-exec-1": "RUNNING", "spark-pi-1-exec-2": "PENDING"},
        "executionAttempts": 1,
        "submissionAttempts": 1,
    }
    app = load_app(doc)
    status = app.status
    assert status.state is ApplicationStateType.RUNNING
    assert status.phase == "RUNNING"
    assert not status.finished
    assert status.driver_info.web_ui_port == 4040
    assert status.executor_state["spark-pi-1-exec-2"] is ExecutorState.PENDING
    wire = app.to_wire()["status"]
    written = {k: v for k, v in doc["status"].items() if "Time" not in k}
    assert _contains(wire, written) == []
    assert wire["lastSubmissionAttemptTime"].startswith("2026-12-01T10:00:00")
    assert "terminationTime" not in wire


def test_every_spark_operator_state() -> None:
    assert [s.value for s in ApplicationStateType] == [
        "",
        "SUBMITTED",
        "RUNNING",
        "SUCCEEDING",
        "COMPLETED",
        "FAILING",
        "FAILED",
        "SUBMISSION_FAILED",
        "PENDING_RERUN",
        "INVALIDATING",
        "SUSPENDING",
        "SUSPENDED",
        "RESUMING",
        "UNKNOWN",
    ]
    assert [s.value for s in ExecutorState] == [
        "PENDING",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "UNKNOWN",
    ]


@pytest.mark.parametrize("state", list(ApplicationStateType))
def test_only_completed_and_failed_are_finished(state: ApplicationStateType) -> None:
    app = load_app(seed())
    app.status.application_state.state = state
    assert app.status.finished == (state.value in ("COMPLETED", "FAILED"))
    assert app.status.phase == (state.value or "NEW")


def test_a_new_application_is_new_and_holds_conditions_too() -> None:
    doc = seed()
    doc["status"] = {
        "applicationState": {"state": "FAILED", "errorMessage": "driver exited with 1"},
        "conditions": [{"type": "Failed", "status": "True", "reason": "DriverFailed"}],
    }
    status = load_app(doc).status
    assert status.application_state.error_message == "driver exited with 1"
    assert status.finished and status.phase == "FAILED"
    assert load_app(seed()).status.phase == "NEW"


# --- validation ------------------------------------------------------------------------------


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``doc`` with the dotted ``path`` set (``None`` removes it)."""
    node = doc
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return doc


INVALID = [
    ("spec.type", None, "spec.type", "required field is missing"),
    ("spec.type", "Go", "spec.type", "got 'Go'"),
    ("spec.sparkVersion", None, "spec.sparkVersion", "required field is missing"),
    ("spec.mainApplicationFile", None, "spec.mainApplicationFile", "required field is missing"),
    ("spec.image", None, "spec.image", "the driver and executor would have no image"),
    ("spec.driver.template", {"spec": {}}, "spec.driver.template", "need Spark 3.0.0"),
    (
        "spec.sparkConf",
        {"spark.kubernetes.container.image": "x"},
        "spec.sparkConf['spark.kubernetes.container.image']",
        "not allowed here",
    ),
    (
        "spec.sparkConf",
        {"spark.kubernetes.namespace": "other"},
        "spec.sparkConf['spark.kubernetes.namespace']",
        "not the application's namespace 'default'",
    ),
    (
        "spec.sparkConf",
        {"spark.master": "local[2]"},
        "spec.sparkConf['spark.master']",
        "not allowed here",
    ),
    (
        "spec.sparkConf",
        {"spark.executor.instances": 2},
        "spec.sparkConf['spark.executor.instances']",
        "must be a string",
    ),
    (
        "spec.dynamicAllocation",
        {"enabled": True, "minExecutors": 4, "maxExecutors": 2},
        "spec.dynamicAllocation.minExecutors",
        "4 is above the maximum 2",
    ),
    (
        "spec.dynamicAllocation",
        {"enabled": True, "maxExecutors": 0},
        "spec.dynamicAllocation.maxExecutors",
        "must be >= 1",
    ),
    (
        "spec.dynamicAllocation",
        {"enabled": True, "initialExecutors": 3, "maxExecutors": 2},
        "spec.dynamicAllocation.initialExecutors",
        "Spark would start 3 executors, above the maximum 2",
    ),
    (
        "spec.sparkConf",
        {
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.maxExecutors": "2",
            "spark.dynamicAllocation.initialExecutors": "5",
        },
        "spec.sparkConf['spark.dynamicAllocation.initialExecutors']",
        "above the maximum 2 (spec.sparkConf['spark.dynamicAllocation.maxExecutors'])",
    ),
    (
        "spec.sparkConf",
        {"spark.dynamicAllocation.enabled": "yes"},
        "spec.sparkConf['spark.dynamicAllocation.enabled']",
        "'yes' is not a boolean",
    ),
    (
        "spec.sparkConf",
        {"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "x"},
        "spec.sparkConf['spark.dynamicAllocation.maxExecutors']",
        "'x' is not a whole number",
    ),
    (
        "spec.driver.volumeMounts",
        [{"name": "test-volme", "mountPath": "/x"}],
        "spec.driver.volumeMounts[0].name",
        "no volume named 'test-volme'",
    ),
    ("spec.driver.memory", "lots", "spec.driver.memory", "not a Spark memory size"),
    ("spec.executor.memoryOverhead", "0m", "spec.executor.memoryOverhead", "no memory"),
    ("spec.executor.coreLimit", "two", "spec.executor.coreLimit", "not a Kubernetes CPU"),
    ("spec.driver.coreRequest", "1.5.0", "spec.driver.coreRequest", "not a Kubernetes CPU"),
    ("spec.driver.cores", 0, "spec.driver.cores", "must be >= 1"),
    ("spec.executor.instances", 0, "spec.executor.instances", "must be >= 1"),
    ("spec.memoryOverheadFactor", "-1", "spec.memoryOverheadFactor", "not a positive number"),
    ("spec.pythonVersion", "4", "spec.pythonVersion", "got '4'"),
    ("spec.deps", {"packages": ["avro"]}, "spec.deps.packages", "not a Maven coordinate"),
    (
        "spec.deps",
        {"excludePackages": ["a:b:1.0"]},
        "spec.deps.excludePackages",
        "not groupId:artifactId",
    ),
    ("spec.batchScheduler", "volcanoo", "spec.batchScheduler", "unknown batch scheduler"),
    ("spec.restartPolicy.onFailureRetryInterval", 0, None, "must be >= 1"),
    ("spec.timeToLiveSeconds", -1, "spec.timeToLiveSeconds", "must be >= 0"),
    ("spec.imagePullPolicy", "Sometimes", "spec.imagePullPolicy", "got 'Sometimes'"),
    ("metadata.name", "1spark", "metadata.name", "must start with a letter"),
    ("metadata.name", "s" * 57, "metadata.name", "over the 56 allowed"),
]


@pytest.mark.parametrize(
    ("field", "value", "path", "message"),
    [pytest.param(*case, id=f"{case[0]}={case[1]!r}"[:60]) for case in INVALID],
)
def test_each_validation_error_has_its_path(
    field: str, value: Any, path: str | None, message: str
) -> None:
    doc = _set(seed(), field, value)
    if field == "spec.restartPolicy.onFailureRetryInterval":
        doc["spec"]["restartPolicy"]["type"] = "OnFailure"
        path = field
    errors = errors_of(doc)
    assert [e.path for e in errors] == [path], [str(e) for e in errors]
    assert message in errors[0].message
    # Every error says what to do, but a plain bound, which says it itself.
    assert errors[0].hint or errors[0].message.startswith("must be >=")


@pytest.mark.parametrize("role", ["driver", "executor"])
def test_node_selectors_at_one_level_only(role: str) -> None:
    doc = _set(seed(), "spec.nodeSelector", {"disk": "ssd"})
    assert load_app(copy.deepcopy(doc)).replica_specs["Driver"].template.spec.node_selector == {
        "disk": "ssd"
    }
    doc["spec"][role]["nodeSelector"] = {"disk": "hdd"}
    (error,) = errors_of(doc)
    assert error.path == "spec.nodeSelector"
    assert "both for the application and in driver/executor" in error.message
    assert f"spec.{role}.nodeSelector" in error.hint


def test_executor_instances_above_the_dynamic_maximum() -> None:
    doc = _set(seed(), "spec.dynamicAllocation", {"enabled": True, "maxExecutors": 2})
    doc["spec"]["executor"]["instances"] = 3
    (error,) = errors_of(doc)
    assert error.path == "spec.executor.instances"
    assert "Spark would start 3 executors, above the maximum 2" in error.message
    doc["spec"]["executor"]["instances"] = 2
    assert load_app(doc).executor_instances == 2


def test_every_problem_is_reported_at_once() -> None:
    doc = seed()
    del doc["spec"]["mainApplicationFile"]
    doc["spec"]["driver"]["memory"] = "lots"
    doc["spec"]["nodeSelector"] = {"a": "b"}
    doc["spec"]["executor"]["nodeSelector"] = {"c": "d"}
    doc["spec"]["mode"] = "client"
    paths = sorted(e.path for e in errors_of(doc))
    assert paths == [
        "spec.driver.memory",
        "spec.mainApplicationFile",
        "spec.mode",
        "spec.nodeSelector",
    ]


def test_the_image_may_be_given_per_role() -> None:
    doc = seed()
    del doc["spec"]["image"]
    doc["spec"]["driver"]["image"] = "driver:1"
    doc["spec"]["executor"]["image"] = "executor:1"
    app = load_app(doc)
    images = [s.template.spec.containers[0].image for s in app.replica_specs.values()]
    assert images == ["driver:1", "executor:1"]
    del doc["spec"]["executor"]["image"]
    (error,) = errors_of(doc)
    assert error.path == "spec.image"
    assert "the executor would have no image" in error.message


def test_a_pod_template_is_fine_from_spark_3() -> None:
    doc = seed()
    doc["spec"]["sparkVersion"] = "3.5.1"
    doc["spec"]["executor"]["template"] = {"metadata": {"labels": {"t": "1"}}}
    app = load_app(doc)
    assert app.replica_specs["Executor"].template.metadata.labels == {
        "t": "1",
        "version": "2.4.5",
    }


def test_a_pod_template_is_checked_as_one() -> None:
    doc = _set(seed(), "spec.sparkVersion", "4.0.0")
    doc["spec"]["driver"]["template"] = {"spec": {"contianers": []}}
    (error,) = errors_of(doc)
    assert error.path == "spec.driver.template.spec.contianers"
    assert error.message == "unknown field"


def test_volume_mounts_may_name_a_template_volume() -> None:
    doc = seed()
    doc["spec"]["sparkVersion"] = "4.0.0"
    doc["spec"]["driver"]["template"] = {"spec": {"volumes": [{"name": "t", "emptyDir": {}}]}}
    doc["spec"]["driver"]["volumeMounts"].append({"name": "t", "mountPath": "/t"})
    volumes = load_app(doc).replica_specs["Driver"].template.spec.volumes or []
    assert [v["name"] for v in volumes] == ["t", "test-volume"]


# --- refused fields --------------------------------------------------------------------------

REFUSED = [
    ("spec.mode", "client", "spec.mode", "client mode"),
    ("spec.mode", "in-cluster-client", "spec.mode", "in-cluster-client mode"),
    ("spec.driver.podName", "my-driver", "spec.driver.podName", "in-cluster-client"),
    (
        "spec.monitoring",
        {"exposeDriverMetrics": True, "prometheus": {"jmxExporterJar": "/p.jar"}},
        "spec.monitoring",
        "Prometheus JMX exporter",
    ),
    (
        "spec.driverIngressOptions",
        [{"servicePort": 4040, "servicePortName": "ui", "ingressURLFormat": "{{$appName}}.x"}],
        "spec.driverIngressOptions",
        "no Ingress",
    ),
    (
        "spec.sparkUIOptions",
        {"ingressAnnotations": {"kubernetes.io/ingress.class": "nginx"}},
        "spec.sparkUIOptions.ingressAnnotations",
        "no Ingress",
    ),
    (
        "spec.sparkUIOptions",
        {"ingressTLS": [{"hosts": ["ui.example.com"]}]},
        "spec.sparkUIOptions.ingressTLS",
        "no Ingress",
    ),
    ("spec.failureRetries", 3, "spec.failureRetries", "v1beta1"),
    ("spec.retryInterval", 10, "spec.retryInterval", "v1beta1"),
    ("spec.batchScheduler", "yunikorn", "spec.batchScheduler", "YuniKorn"),
    (
        "spec.restartPolicy",
        {"type": "Never", "onFailureRetries": 2, "onFailureRetryInterval": 5},
        "spec.restartPolicy.onFailureRetries spec.restartPolicy.onFailureRetryInterval",
        "Never re-runs nothing",
    ),
    (
        "spec.restartPolicy",
        {"type": "Always", "onSubmissionFailureRetries": 2, "onFailureRetryInterval": 5},
        "spec.restartPolicy.onSubmissionFailureRetries",
        "Always re-runs without limit",
    ),
]


@pytest.mark.parametrize(
    ("field", "value", "paths", "message"),
    [pytest.param(*case, id=f"{case[0]}={case[1]!r}"[:60]) for case in REFUSED],
)
def test_fields_kubemill_would_not_honour_are_refused(
    field: str, value: Any, paths: str, message: str
) -> None:
    errors = errors_of(_set(seed(), field, value))
    assert [e.path for e in errors] == paths.split(), [str(e) for e in errors]
    for error in errors:
        assert message in error.message
        assert error.hint


def test_on_failure_reads_every_retry_field() -> None:
    policy = {
        "type": "OnFailure",
        "onFailureRetries": 1,
        "onSubmissionFailureRetries": 2,
        "onFailureRetryInterval": 3,
        "onSubmissionFailureRetryInterval": 4,
    }
    loaded = load_app(_set(seed(), "spec.restartPolicy", policy)).spec.restart_policy
    assert loaded.model_dump(by_alias=True) == policy
