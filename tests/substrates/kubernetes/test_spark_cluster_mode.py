"""The pure builders of Spark's cluster-mode objects: valid for Kubernetes, named and sized as
Spark names and sizes them, and refusing what they do not build.

(The field-by-field match with the JVM's own submission is tests/substrates/kubernetes/
operator/test_spark_submit_native.py; these check the rules behind it one by one, without a
JVM.)
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubemill.engines.spark.api.argv import (
    SparkSubmitError,
    parse_spark_properties,
    parse_submit_arguments,
)
from kubemill.engines.spark.api.submit import ClusterMode, cluster_mode_of
from kubemill.engines.spark.framework.cluster_mode import (
    ClusterModeError,
    DriverObjects,
    Generated,
    app_name_label,
    clean_name,
    driver_objects,
    java_date,
)
from support.manifest_checks import k8s_errors

GENERATED = Generated(
    app_id="spark-" + "a" * 32,
    prefix_id="0123456789abcdef",
    conf_map_id="fedcba9876543210",
    service_id="00000000000000ff",
    local_dir_id="12345678-1234-1234-1234-123456789abc",
    submit_time_ms=1_796_146_225_215,
    user="alice",
    spark_version="4.3.0",
)
IMAGE = "spark.kubernetes.container.image=spark:4.0.0"
PI_PY = "local:///opt/spark/examples/src/main/python/pi.py"
SEED_S1 = Path(__file__).resolve().parents[3] / "examples" / "seed" / "spark-submit-s1.txt"
SPEC_S1 = shlex.split(SEED_S1.read_text(encoding="utf-8"), comments=True)[1:]
"""The seed's spark-submit command line (SEED_S1's file), after ``spark-submit``."""


def mode_of(*argv: str) -> ClusterMode:
    return cluster_mode_of(parse_submit_arguments(list(argv)))


def python(*options: str) -> ClusterMode:
    return mode_of("--master", "k8s://https://h:6443", "--conf", IMAGE, *options, PI_PY, "10")


def container(objects: DriverObjects) -> dict[str, Any]:
    found: dict[str, Any] = objects.pod["spec"]["containers"][0]
    return found


def props(objects: DriverObjects) -> dict[str, str]:
    return parse_spark_properties(objects.config_map["data"]["spark.properties"])


def test_the_spec_line_builds_the_four_objects_as_spark_names_them() -> None:
    objects = driver_objects(mode_of(*SPEC_S1), GENERATED)
    prefix = "spark-pi-0123456789abcdef"
    assert objects.namespace == "default"
    assert objects.pod_name == f"{prefix}-driver"
    assert objects.service["metadata"]["name"] == f"{prefix}-driver-svc"
    assert objects.network_policy["metadata"]["name"] == f"{prefix}-policy"
    assert objects.config_map["metadata"]["name"] == "spark-drv-fedcba9876543210-conf-map"
    assert container(objects)["args"] == [
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.examples.SparkPi",
        "local:///path/to/examples.jar",
    ]
    assert objects.pod["metadata"]["labels"] == {
        "spark-app-selector": GENERATED.app_id,
        "spark-role": "driver",
        "spark-app-name": "spark-pi",
        "spark-version": "4.3.0",
    }
    assert objects.service["spec"]["selector"] == objects.pod["metadata"]["labels"]
    policy = objects.network_policy["spec"]
    assert policy["podSelector"]["matchLabels"] == {
        "spark-role": "executor",
        "spark-app-selector": GENERATED.app_id,
    }
    assert objects.config_map["immutable"] is True
    assert objects.config_map["data"]["spark.kubernetes.namespace"] == "default"


@pytest.mark.parametrize(
    "mode",
    [
        mode_of(*SPEC_S1),
        python("--driver-memory", "2g", "--conf", "spark.kubernetes.driver.label.team=ml"),
        python(
            "--conf",
            "spark.kubernetes.container.image.pullSecrets=a,b",
            "--conf",
            "spark.kubernetes.driver.limit.cores=2",
            "--conf",
            "spark.kubernetes.local.dirs.tmpfs=true",
            "--conf",
            "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
        ),
    ],
    ids=["spec-s1", "python", "python-pod-fields"],
)
def test_every_object_passes_kubernetes_validate(mode: ClusterMode) -> None:
    objects = driver_objects(mode, GENERATED)
    for obj in (objects.pod, *objects.owned("d9a0b3c2-0000-4000-8000-000000000001")):
        assert k8s_errors(obj) == []


def test_the_dependents_are_owned_by_the_driver_pod_and_the_originals_left_alone() -> None:
    objects = driver_objects(mode_of(*SPEC_S1), GENERATED)
    owned = objects.owned("the-uid")
    assert [o["kind"] for o in owned] == ["Service", "NetworkPolicy", "ConfigMap"]
    for obj in owned:
        assert obj["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "controller": True,
                "name": objects.pod_name,
                "uid": "the-uid",
            }
        ]
    assert "ownerReferences" not in objects.service["metadata"]


@pytest.mark.parametrize(
    ("mode", "memory"),
    [
        (mode_of(*SPEC_S1), "1408Mi"),  # JVM: 1024 + the 384 MiB minimum
        (python(), "1433Mi"),  # Python: 1024 x 1.4
        (python("--driver-memory", "2g"), "2867Mi"),  # 2048 + int(0.4 x 2048)
        (python("--driver-memory", "500m", "--conf", "spark.driver.memoryOverhead=100m"), "600Mi"),
        (python("--conf", "spark.driver.memoryOverheadFactor=0.5"), "1536Mi"),
        (python("--conf", "spark.kubernetes.memoryOverheadFactor=0.2"), "1408Mi"),
        (python("--conf", "spark.driver.minMemoryOverhead=1g"), "2048Mi"),
    ],
)
def test_the_driver_memory_is_the_heap_and_its_overhead(mode: ClusterMode, memory: str) -> None:
    resources = container(driver_objects(mode, GENERATED))["resources"]
    assert resources["requests"]["memory"] == resources["limits"]["memory"] == memory


def test_cores_request_and_limit() -> None:
    resources = container(driver_objects(python("--driver-cores", "3"), GENERATED))["resources"]
    assert resources["requests"]["cpu"] == "3"
    assert "cpu" not in resources["limits"]
    mode = python(
        "--driver-cores",
        "3",
        "--conf",
        "spark.kubernetes.driver.request.cores=500m",
        "--conf",
        "spark.kubernetes.driver.limit.cores=2",
    )
    resources = container(driver_objects(mode, GENERATED))["resources"]
    assert (resources["requests"]["cpu"], resources["limits"]["cpu"]) == ("500m", "2")


def test_spark_properties_hold_the_conf_and_what_the_client_adds() -> None:
    objects = driver_objects(mode_of(*SPEC_S1, "a1"), GENERATED)
    text = objects.config_map["data"]["spark.properties"]
    lines = text.splitlines()
    assert lines[0] == (
        "#Java properties built from Kubernetes config map with name: "
        "spark-drv-fedcba9876543210-conf-map"
    )
    assert lines[1] == f"#{java_date(GENERATED.submit_time_ms)}"
    assert props(objects) == {
        "spark.master": "k8s://https://HOST:6443",
        "spark.submit.deployMode": "cluster",
        "spark.app.name": "spark-pi",
        "spark.app.id": GENERATED.app_id,
        "spark.app.submitTime": str(GENERATED.submit_time_ms),
        "spark.executor.instances": "5",
        "spark.kubernetes.container.image": "IMG",
        "spark.jars": "local:///path/to/examples.jar",
        "spark.submit.pyFiles": "",
        "spark.kubernetes.resource.type": "java",
        "spark.kubernetes.memoryOverheadFactor": "0.1",
        "spark.kubernetes.submitInDriver": "true",
        "spark.kubernetes.driver.pod.name": objects.pod_name,
        "spark.driver.host": "spark-pi-0123456789abcdef-driver-svc.default.svc",
        "spark.driver.port": "7078",
        "spark.driver.blockManager.port": "7079",
    }


def test_a_python_application_runs_sparks_runner_with_its_factor() -> None:
    objects = driver_objects(python("--py-files", "local:///x.py"), GENERATED)
    assert container(objects)["args"][4:] == ["org.apache.spark.deploy.PythonRunner", PI_PY, "10"]
    found = props(objects)
    assert found["spark.kubernetes.resource.type"] == "python"
    assert found["spark.kubernetes.memoryOverheadFactor"] == "0.4"
    assert found["spark.submit.pyFiles"] == "local:///x.py"
    assert "spark.jars" not in found
    assert found["spark.app.name"] == "pi.py"  # Spark's default: the file's name
    assert objects.pod_name.startswith("pi-py-")


def test_env_in_sparks_order_with_the_users_between() -> None:
    mode = python(
        "--conf", "spark.kubernetes.driverEnv.B=2", "--conf", "spark.kubernetes.driverEnv.A=1"
    )
    env = container(driver_objects(mode, GENERATED))["env"]
    assert [e["name"] for e in env] == [
        "SPARK_USER",
        "SPARK_APPLICATION_ID",
        "A",
        "B",
        "SPARK_DRIVER_BIND_ADDRESS",
        "SPARK_LOCAL_DIRS",
        "SPARK_CONF_DIR",
    ]
    assert env[0]["value"] == "alice"
    assert env[5]["value"] == "/var/data/spark-12345678-1234-1234-1234-123456789abc"


def test_names_are_cleaned_as_spark_cleans_them() -> None:
    assert clean_name("  My App_2.0 ") == "my-app-2-0"
    assert clean_name("42 things") == "x2-things"
    assert clean_name("--a--b") == "a-b"
    long = "A Very_Long.Application-Name That Goes On And On And On For Ever 42"
    label = app_name_label(long)
    assert label == "a-very-long-application-name-that-goes-on-and-on-and-on-for-eve"
    assert len(label) == 63


@pytest.mark.parametrize(
    ("name", "pod", "label"),
    [
        # As the JVM spark-submit of pyspark 4.3.0 names them.
        ("42 things", "x2-things-0123456789abcdef-driver", "42-things"),
        ("--a--b", "a-b-0123456789abcdef-driver", "a-b"),
        ("Ünïcode Name!", "n-code-name-0123456789abcdef-driver", "n-code-name"),
    ],
)
def test_odd_names_as_spark_names_them(name: str, pod: str, label: str) -> None:
    objects = driver_objects(python("--name", name), GENERATED)
    assert objects.pod_name == pod
    assert objects.pod["metadata"]["labels"]["spark-app-name"] == label
    assert props(objects)["spark.app.name"] == name


def test_a_long_name_falls_back_to_a_generated_service_name() -> None:
    long = "a" * 60
    objects = driver_objects(python("--name", long), GENERATED)
    assert objects.pod_name == f"{long}-0123456789abcdef-driver"
    service = objects.service["metadata"]["name"]
    assert service == "spark-00000000000000ff-driver-svc"
    assert props(objects)["spark.driver.host"] == f"{service}.default.svc"
    assert objects.pod["metadata"]["labels"]["spark-app-name"] == long


def test_namespace_pod_name_and_ports_come_from_the_conf() -> None:
    mode = python(
        "--conf",
        "spark.kubernetes.namespace=team-a",
        "--conf",
        "spark.kubernetes.driver.pod.name=my-driver",
        "--conf",
        "spark.driver.port=9000",
    )
    objects = driver_objects(mode, GENERATED)
    assert objects.namespace == "team-a"
    assert objects.pod_name == "my-driver"
    assert objects.config_map["metadata"]["namespace"] == "team-a"
    assert container(objects)["ports"][0] == {
        "containerPort": 9000,
        "name": "driver-rpc-port",
        "protocol": "TCP",
    }
    assert props(objects)["spark.driver.host"].endswith(".team-a.svc")


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ("spark.kubernetes.driver.podTemplateFile=/t.yaml", "a pod template file"),
        ("spark.kubernetes.driver.volumes.hostPath.d.mount.path=/d", "driver volumes"),
        ("spark.kubernetes.driver.secrets.s=/s", "secrets mounted"),
        ("spark.local.dir=/tmp/a", "local directories"),
        ("spark.kubernetes.driver.label.spark-role=x", "Spark sets this label itself"),
        ("spark.driver.port=http", "not a port number"),
        ("spark.driver.memoryOverheadFactor=lots", "not a number"),
        ("spark.driver.memory=lots", "not a memory size"),
    ],
)
def test_what_is_not_built_is_refused_naming_the_conf(conf: str, words: str) -> None:
    with pytest.raises((ClusterModeError, SparkSubmitError)) as caught:
        driver_objects(python("--conf", conf), GENERATED)
    assert f"--conf {conf.partition('=')[0]}" in str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("app_id", "spark-xyz"),
        ("prefix_id", "0123"),
        ("conf_map_id", "0123456789ABCDEF"),
        ("local_dir_id", "not-a-uuid"),
    ],
)
def test_generated_values_must_have_sparks_shape(field: str, value: str) -> None:
    with pytest.raises(ClusterModeError, match=f"Generated.{field}"):
        replace(GENERATED, **{field: value})


def test_java_date() -> None:
    assert java_date(0) == "Thu Jan 01 00:00:00 UTC 1970"
    assert re.fullmatch(
        r"\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} UTC \d{4}", java_date(1_796_146_225_215)
    )
