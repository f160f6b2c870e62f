"""What ``kubemill spark-submit --master k8s://... --deploy-mode cluster`` and the JVM's
``spark-submit`` create for the same command line, compared field by field, on the test API
server (tests/substrates/kubernetes/operator/test_spark_submit_native.py) and on the real
one (tests/cluster/test_spark_submit_real.py).

Only what Spark generates per submission may differ, and each is first checked to have
Spark's shape and then replaced by a placeholder: the ``<name>-<16 hex>`` prefix, the
ConfigMap's ``spark-drv-<16 hex>``, the ``spark-<32 hex>`` application id, the local
directory's UUID, the submission time (and its date comment line), and what the server
assigns (uid, resourceVersion, creation time, the managers' names and times in
managedFields). ``spark.properties`` is compared as properties (Java writes them in hash
order).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubemill.engines.spark.api.argv import parse_spark_properties

SEED_S1 = Path(__file__).resolve().parents[2] / "examples" / "seed" / "spark-submit-s1.txt"
SPEC_S1 = shlex.split(SEED_S1.read_text(encoding="utf-8"), comments=True)[1:][2:]
"""The seed's spark-submit command line after ``--master``."""

PYTHON_WITH_OPTIONS = [
    "--name",
    "A Very_Long.Application-Name That Goes On And On And On For Ever 42",
    "--driver-memory",
    "500m",
    "--driver-cores",
    "2",
    "--executor-memory",
    "3g",
    "--num-executors",
    "3",
    "--executor-cores",
    "2",
    "--jars",
    "local:///opt/a.jar",
    "--files",
    "local:///opt/f.txt",
    "--py-files",
    "local:///opt/x.py",
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
    "spark.executorEnv.E=1",
    "--conf",
    "spark.kubernetes.container.image=spark:4.0.0",
    "local:///opt/spark/examples/src/main/python/pi.py",
    "10",
    "--x",
]
"""A Python application with most options; its name is long enough that the service's
name falls back to a generated one, as Spark's does."""

COMMAND_LINES: list[tuple[list[str], str]] = [
    (SPEC_S1, "spark-pi"),
    (PYTHON_WITH_OPTIONS, "a-very-long-application-name-that-goes-on-and-on-and-on-for-ever-42"),
    (
        ["--conf", "spark.kubernetes.container.image=IMG", "local:///opt/app/word_count.py"],
        "word-count-py",
    ),
]
"""The command lines both servers' parity tests submit (after ``--master``), each with the
name Spark cleans its application name into."""
COMMAND_LINE_IDS = ["spec-s1", "python-options", "python-unnamed"]

KINDS = {
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "Service": "/api/v1/namespaces/{ns}/services",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
}
HEX16 = "[0-9a-f]{16}"
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
JAVA_DATE = re.compile(r"^#\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} \w+ \d{4}$")


def generated_values(objects: Mapping[str, Mapping[str, Any]], clean_name: str) -> dict[str, str]:
    """What Spark generated for one submission, each checked for Spark's shape, mapped to
    its placeholder."""
    pod = objects["Pod"]
    name = pod["metadata"]["name"]
    match = re.fullmatch(rf"({re.escape(clean_name)}-{HEX16})-driver", name)
    assert match, f"driver pod {name!r} is not <name>-<16 hex>-driver"
    prefix = match.group(1)
    app_id = pod["metadata"]["labels"]["spark-app-selector"]
    assert re.fullmatch("spark-[0-9a-f]{32}", app_id), app_id
    conf_map = objects["ConfigMap"]["metadata"]["name"]
    assert re.fullmatch(f"spark-drv-{HEX16}-conf-map", conf_map), conf_map
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    local_dir = env["SPARK_LOCAL_DIRS"]
    assert re.fullmatch(f"/var/data/spark-{UUID}", local_dir), local_dir
    props = parse_spark_properties(objects["ConfigMap"]["data"]["spark.properties"])
    submit_time = props["spark.app.submitTime"]
    assert re.fullmatch(r"\d{13}", submit_time), submit_time
    values = {
        prefix: "<prefix>",
        conf_map: "<conf-map>",
        app_id: "<app-id>",
        local_dir: "/var/data/spark-<uuid>",
        submit_time: "<submit-time>",
        pod["metadata"]["uid"]: "<driver-uid>",
    }
    service = objects["Service"]["metadata"]["name"]
    if not service.startswith(prefix):
        # Spark's fallback when <prefix>-driver-svc is longer than a service name may be.
        assert len(f"{prefix}-driver-svc") > 63
        assert re.fullmatch(f"spark-{HEX16}-driver-svc", service), service
        values[service] = "<fallback-service>"
    return values


def normalised(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` with the generated strings replaced, and what the server assigns erased."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("resourceVersion", "creationTimestamp", "time") or (
                key == "uid" and item not in values
            ):
                out[key] = "<server>"  # the server's, for every object
            elif key == "manager":
                out[key] = "<client>"  # fabric8 or kubemill: who applied, by design
            else:
                # managedFields' keys name list items by value (a mount path with the UUID).
                out[normalised(key, values)] = normalised(item, values)
        return out
    if isinstance(value, list):
        return [normalised(item, values) for item in value]
    if isinstance(value, str):
        for generated in sorted(values, key=len, reverse=True):
            value = value.replace(generated, values[generated])
        return value
    return value


def differences(ours: Any, jvm: Any, path: str = "") -> list[str]:
    """Where two JSON trees differ, as ``path: ours != jvm``."""
    if isinstance(ours, dict) and isinstance(jvm, dict):
        return [
            line
            for key in sorted(set(ours) | set(jvm))
            for line in differences(
                ours.get(key, "<absent>"), jvm.get(key, "<absent>"), f"{path}.{key}"
            )
        ]
    if isinstance(ours, list) and isinstance(jvm, list) and len(ours) == len(jvm):
        return [
            line
            for i, (a, b) in enumerate(zip(ours, jvm, strict=True))
            for line in differences(a, b, f"{path}[{i}]")
        ]
    return [] if ours == jvm else [f"{path}: {ours!r} != {jvm!r}"]


def compare(
    jvm: Mapping[str, dict[str, Any]], ours: Mapping[str, dict[str, Any]], clean_name: str
) -> None:
    jvm_values = generated_values(jvm, clean_name)
    our_values = generated_values(ours, clean_name)
    for kind in ("Service", "NetworkPolicy", "ConfigMap"):
        for which in (jvm, ours):
            owner = which[kind]["metadata"]["ownerReferences"][0]
            assert owner["uid"] == which["Pod"]["metadata"]["uid"], kind
    for objects in (jvm, ours):
        config = objects["ConfigMap"]["data"]
        header, date, _ = config["spark.properties"].split("\n", 2)
        assert JAVA_DATE.match(date), date
        props = parse_spark_properties(config.pop("spark.properties"))
        config["spark.properties"] = {"header": header, "properties": props}
    for kind in KINDS:
        jvm_obj = normalised(jvm[kind], jvm_values)
        our_obj = normalised(ours[kind], our_values)
        assert our_obj == jvm_obj, f"{kind}: " + "; ".join(differences(our_obj, jvm_obj))
