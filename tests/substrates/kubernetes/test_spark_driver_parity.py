"""The operator's Spark driver pod is the one Spark's own cluster mode builds, field by field.

The spark-operator runs spark-submit itself, so its driver pod IS Spark's. For one command
line, two pods are built here:

- **Spark's**: kubemill's cluster-mode builders (``driver_objects``), which
  ``tests/substrates/kubernetes/operator/test_spark_submit_native.py`` compares with what
  the JVM's spark-submit creates, field by field;
- **the operator's**: the SparkApplication ``kubemill spark-submit --operator`` makes of the
  same command line, as ``kubemill render`` shows it (the bodies the operator sends).

Both are flattened to ``{field path: value}`` and must be equal, except what
:data:`EXPLAINED` lists, each with why; values Spark generates per submission (the
application id, the local directory's UUID) are checked for Spark's shape, then replaced by a
placeholder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest

from kubemill.engines.spark.api.application import SparkApplication
from kubemill.engines.spark.api.argv import parse_spark_properties, parse_submit_arguments
from kubemill.engines.spark.api.submit import cluster_mode_of, submission_of
from kubemill.engines.spark.framework.cluster_mode import (
    SPARK_VERSION,
    Generated,
    app_name_label,
    driver_objects,
)
from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.render import render_job

MASTER = ["--master", "k8s://https://kubernetes.default.svc", "--deploy-mode", "cluster"]
IMAGE = ["--conf", "spark.kubernetes.container.image=spark:4.0.0"]
PYTHON_FILE = "local:///opt/spark/examples/src/main/python/pi.py"

CASES = {
    "python": ["--name", "pi", *IMAGE, PYTHON_FILE, "10"],
    "python-with-options": [
        "--name",
        "pi-options",
        *IMAGE,
        "--driver-memory",
        "500m",
        "--driver-cores",
        "2",
        "--executor-memory",
        "3g",
        "--num-executors",
        "3",
        "--py-files",
        "local:///opt/x.py",
        "--conf",
        "spark.kubernetes.namespace=analytics",
        "--conf",
        "spark.kubernetes.driver.label.team=ml",
        "--conf",
        "spark.kubernetes.driverEnv.FOO=bar",
        "--conf",
        "spark.kubernetes.driver.annotation.example.com/owner=data",
        "--conf",
        "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
        "--conf",
        "spark.kubernetes.container.image.pullPolicy=Always",
        "--conf",
        "spark.kubernetes.container.image.pullSecrets=one,two",
        "--conf",
        "spark.kubernetes.driver.request.cores=500m",
        "--conf",
        "spark.kubernetes.driver.limit.cores=2",
        "--conf",
        "spark.kubernetes.node.selector.disk=ssd",
        "--conf",
        "spark.kubernetes.driver.node.selector.zone=a",
        "--conf",
        "spark.driver.memoryOverhead=100m",
        "--conf",
        "spark.kubernetes.local.dirs.tmpfs=true",
        PYTHON_FILE,
        "10",
        "--x",
    ],
    "scala": [
        "--name",
        "spark-pi",
        "--class",
        "org.apache.spark.examples.SparkPi",
        *IMAGE,
        "--driver-memory",
        "2g",
        "--conf",
        "spark.driver.memoryOverheadFactor=0.2",
        "--jars",
        "local:///opt/dep.jar",
        "local:///opt/spark/examples/jars/spark-examples.jar",
        "100",
    ],
}

GENERATED = Generated(
    app_id="spark-" + "a1" * 16,
    prefix_id="b2" * 8,
    conf_map_id="c3" * 8,
    service_id="d4" * 8,
    local_dir_id="12345678-9abc-4def-8123-456789abcdef",
    submit_time_ms=1_780_000_000_000,
    user="spark",
    spark_version=SPARK_VERSION,
)
"""What Spark's client draws per submission; ``user`` is the spark-operator's (its image
runs spark-submit as ``spark``)."""

DRIVER = "spark-kubernetes-driver"
CONTAINER = f"spec.containers[{DRIVER}]"
KUBEMILL_LABEL = re.compile(r"^metadata\.labels\.kubemill\.dev/")

EXPLAINED: dict[str, str] = {
    "metadata.name": "Spark's <name>-<16 hex>-driver; the operator's is the replica's name",
    "metadata.namespace": "Spark's client leaves it to the request's path",
    "metadata.ownerReferences": "the spark-operator's driver is owned by its SparkApplication",
    "metadata.labels.sparkoperator.k8s.io/app-name": "the spark-operator's own label",
    "metadata.labels.sparkoperator.k8s.io/launched-by-spark-operator": "as app-name",
    "metadata.labels.spark-version": (
        "the submitting client's Spark; there is no client, so the application's sparkVersion"
    ),
    f"{CONTAINER}.terminationMessagePolicy": (
        "kubemill's: a failed driver's log tail becomes applicationState.errorMessage"
    ),
    "spec.hostname": "kubemill resolves the driver as <pod>.<driver service> (spark.driver.host)",
    "spec.subdomain": "as spec.hostname",
    "spec.serviceAccountName": (
        "the account named, else kubemill's per-application driver account, with the Role "
        "Spark's documentation asks for (Spark's client leaves the namespace's default)"
    ),
    "spec.serviceAccount": (
        "the deprecated alias Spark's client also sets; the API server copies "
        "serviceAccountName into it"
    ),
}
"""Field paths (or prefixes ending in a path segment) that may differ, and why."""


def _key(item: Mapping[str, Any], index: int) -> str:
    name = item.get("name")
    return str(name) if isinstance(name, str) else str(index)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{path: leaf}``; list items that have a name are keyed by it (``env[SPARK_USER]``)."""
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):
        if not value:
            out[prefix] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list):
        if not value:
            out[prefix] = []
        for index, item in enumerate(value):
            key = _key(item, index) if isinstance(item, Mapping) else str(index)
            out.update(flatten(item, f"{prefix}[{key}]"))
    else:
        out[prefix] = value
    return out


def _explained(path: str) -> bool:
    if KUBEMILL_LABEL.match(path):
        return True  # kubemill's own labels: the operator watches its pods by them
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in EXPLAINED)


def _placeholders(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod with its application id and local directory's UUID as placeholders, once
    each is checked to have Spark's shape (and to be used consistently)."""
    text = json.dumps(pod)
    app_id = pod["metadata"]["labels"]["spark-app-selector"]
    assert re.fullmatch("spark-[0-9a-f]{32}", app_id), app_id
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["SPARK_APPLICATION_ID"]["value"] == app_id
    local = env["SPARK_LOCAL_DIRS"]["value"]
    uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.fullmatch(f"/var/data/spark-{uuid}", local), local
    text = text.replace(app_id, "<app-id>").replace(local, "/var/data/spark-<uuid>")
    out: dict[str, Any] = json.loads(text)
    return out


def _conf_mount(pod: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(volume name, ConfigMap name, the volume) of what is mounted at /opt/spark/conf."""
    container = pod["spec"]["containers"][0]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/opt/spark/conf"]
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == mount["name"]]
    return mount["name"], volume["configMap"]["name"], volume


def differences(native: Mapping[str, Any], operator: Mapping[str, Any]) -> dict[str, Any]:
    """Every field where the two pods differ and no :data:`EXPLAINED` entry says why:
    ``{path: (Spark's, the operator's)}``."""
    native, operator = _placeholders(native), _placeholders(operator)
    # spark.properties is delivered by kubemill's file sets: another volume and ConfigMap
    # (<app>-spark-conf, read-only, with the executors' pod template beside it), at the path
    # Spark's args and SPARK_CONF_DIR name.
    ours, theirs = _conf_mount(operator), _conf_mount(native)
    assert {"key": "spark.properties", "path": "spark.properties", "mode": 0o644} in ours[2][
        "configMap"
    ]["items"]
    renamed = json.dumps(native).replace(f'"{theirs[0]}"', f'"{ours[0]}"')
    native = json.loads(renamed)
    flat_native, flat_operator = flatten(native), flatten(operator)
    conf_volume = f"spec.volumes[{ours[0]}]"
    conf_mount = f"{CONTAINER}.volumeMounts[{ours[0]}]"
    out = {}
    for path in sorted(set(flat_native) | set(flat_operator)):
        if _explained(path) or path.startswith((f"{conf_volume}.", f"{conf_mount}.readOnly")):
            continue
        mine, spark = flat_operator.get(path, "<absent>"), flat_native.get(path, "<absent>")
        if mine != spark:
            out[path] = (spark, mine)
    return out


def pods(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any], SparkApplication]:
    """Spark's driver pod and the operator's, for one command line."""
    args = parse_submit_arguments([*MASTER, *argv])
    native = driver_objects(cluster_mode_of(args), GENERATED).pod
    app = load_one(submission_of(args).manifest)
    assert isinstance(app, SparkApplication)
    (operator,) = [o for o in render_job(app) if o["kind"] == "Pod"]
    return native, operator, app


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_the_operators_driver_pod_is_sparks_own(argv: list[str]) -> None:
    native, operator, app = pods(argv)
    assert differences(native, operator) == {}
    # What EXPLAINED lets differ is still what it should be.
    labels = operator["metadata"]["labels"]
    assert labels["sparkoperator.k8s.io/launched-by-spark-operator"] == "true"
    assert labels["spark-app-name"] == app_name_label(app.name)
    assert labels["spark-version"] == app.spec.spark_version
    assert operator["metadata"]["ownerReferences"][0]["kind"] == "SparkApplication"
    account = native["spec"].get("serviceAccountName")
    assert operator["spec"]["serviceAccountName"] == (account or f"{app.name}-driver")


def test_the_comparison_fails_on_a_difference_it_cannot_explain() -> None:
    native, operator, _app = pods(CASES["python-with-options"])
    container = operator["spec"]["containers"][0]
    container["env"] = [e for e in container["env"] if e["name"] != "SPARK_USER"]
    container["ports"][-1]["containerPort"] = 15003
    operator["metadata"]["labels"]["team"] = "other"
    assert differences(native, operator) == {
        f"{CONTAINER}.env[SPARK_USER].name": ("SPARK_USER", "<absent>"),
        f"{CONTAINER}.env[SPARK_USER].value": ("spark", "<absent>"),
        f"{CONTAINER}.ports[spark-connect].containerPort": (15002, 15003),
        "metadata.labels.team": ("ml", "other"),
    }


# --- spark.properties --------------------------------------------------------------------------

OPERATOR_DEFAULTS = {
    "spark.driver.cores": "1",
    "spark.driver.memory": "1g",
    "spark.executor.cores": "1",
    "spark.executor.memory": "1g",
    "spark.executor.instances": "1",
}
"""What the spark-operator's defaulting fills in when the application leaves it out (Spark's
own defaults, but one executor where Spark starts two): absent from Spark's conf, these
values in the operator's."""

EXPLAINED_CONF: dict[str, str] = {
    "spark.app.id": "generated per submission (checked as the pod's, above)",
    "spark.app.submitTime": "Spark's client's clock; the planner is pure",
    "spark.driver.host": "the driver's service name, from its generated prefix (see the pod)",
    "spark.kubernetes.driver.pod.name": "the driver pod's name (see the pod)",
    "spark.kubernetes.namespace": (
        "the spark-operator always names it; Spark's client only when given (its ConfigMap "
        "has it as a key of its own)"
    ),
    "spark.ui.port": "kubemill names the port its UI service targets",
    "spark.kubernetes.executor.podNamePrefix": "executors named after the application",
    "spark.kubernetes.executor.podTemplateFile": "the executor fields, as a pod template",
    "spark.kubernetes.executor.podTemplateContainerName": "as the pod template file",
    "spark.kubernetes.executor.container.image": "the executor's image field",
    "spark.kubernetes.executor.label.kubemill.dev/": "the operator watches labelled pods",
    "spark.kubernetes.executor.label.sparkoperator.k8s.io/": "the spark-operator's labels",
}
"""Keys (or prefixes ending in ``.`` or ``/``) of spark.properties that may differ, and why."""


def confs(argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Spark's spark.properties for the driver, and the operator's, for one command line."""
    args = parse_submit_arguments([*MASTER, *argv])
    native = driver_objects(cluster_mode_of(args), GENERATED).config_map["data"]
    app = load_one(submission_of(args).manifest)
    assert isinstance(app, SparkApplication)
    (config_map,) = [
        o
        for o in render_job(app)
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == f"{app.name}-spark-conf"
    ]
    spark = parse_spark_properties(native["spark.properties"])
    return spark, parse_spark_properties(config_map["data"]["spark.properties"])


def conf_differences(
    spark: Mapping[str, str], ours: Mapping[str, str]
) -> dict[str, tuple[str | None, str | None]]:
    """``{key: (Spark's, the operator's)}`` where the two differ unexplained."""
    out = {}
    for key in sorted(set(spark) | set(ours)):
        if key in EXPLAINED_CONF or any(
            key.startswith(p) for p in EXPLAINED_CONF if p.endswith((".", "/"))
        ):
            continue
        if key not in spark and OPERATOR_DEFAULTS.get(key) == ours.get(key):
            continue
        if spark.get(key) != ours.get(key):
            out[key] = (spark.get(key), ours.get(key))
    return out


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_the_drivers_spark_conf_is_what_spark_submit_gives_it(argv: list[str]) -> None:
    assert conf_differences(*confs(argv)) == {}


def test_the_conf_comparison_fails_on_a_difference_it_cannot_explain() -> None:
    spark, ours = confs(CASES["python-with-options"])
    del ours["spark.submit.pyFiles"]
    ours["spark.executor.instances"] = "1"  # a default only where Spark's conf has none
    ours["spark.kubernetes.driver.label.team"] = "other"
    assert conf_differences(spark, ours) == {
        "spark.executor.instances": ("3", "1"),
        "spark.kubernetes.driver.label.team": ("ml", "other"),
        "spark.submit.pyFiles": ("local:///opt/x.py", None),
    }
