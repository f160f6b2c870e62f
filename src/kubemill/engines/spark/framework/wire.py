"""What Spark's driver pods are made of, as plain values: labels, ports, paths, env, args,
and the ``spark.properties`` format.

:mod:`kubemill.engines.spark.framework.planner` (the SparkApplication planner, whose driver pod the
operator creates) and :mod:`kubemill.engines.spark.framework.cluster_mode` (Spark's own
cluster-mode objects, compared with the JVM's field by field) both build their driver
container from these, so that the two drivers cannot drift apart: the spark-operator runs
Spark's own submission, so its driver pod is Spark's. They live apart from the planner,
which imports the job models, so that ``kubemill spark-submit``'s fast path
(:mod:`kubemill.cli.spark_fast`) builds the driver's objects without pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubemill.engines.spark.api.names import MIN_MEMORY_OVERHEAD_MIB, spark_memory_mib

CONF_MOUNT_PATH = "/opt/spark/conf"
PROPERTIES = "spark.properties"
LOCAL_DIR_VOLUME = "spark-local-dir-1"
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
R_RUNNER = "org.apache.spark.deploy.RRunner"

DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040
UI_PORT_NAME = "spark-ui"
CONNECT_PORT = 15002
CONNECT_PORT_NAME = "spark-connect"
"""Spark Connect's gRPC port: Spark 4's driver declares it (and its service serves it)."""
CONNECT_APP_PROTOCOL = "grpc"
"""The ``appProtocol`` of Spark Connect's port on the driver's service."""
LOCAL_DIR_ROOT = "/var/data"
DEFAULT_PULL_POLICY = "IfNotPresent"
"""``spark.kubernetes.container.image.pullPolicy``'s default: Spark always sets one."""
DRIVER_SECURITY_CONTEXT: Mapping[str, Any] = {"allowPrivilegeEscalation": False}
"""The driver container's security context when nothing else gives one (Spark 4's)."""
DEFAULT_DRIVER_MEMORY = "1g"
DEFAULT_DRIVER_CORES = "1"


class SparkConfError(ValueError):
    """A Spark conf whose value cannot shape the driver pod: the key, and what is wrong."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


def with_prefix(conf: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The confs under ``prefix`` (sorted), keyed by the rest of their key."""
    return {k[len(prefix) :]: v for k, v in sorted(conf.items()) if k.startswith(prefix)}


@dataclass(frozen=True)
class DriverPodConf:
    """What Spark's client makes of the driver's confs in the driver pod (besides its
    ports, args and env of its own)."""

    labels: Mapping[str, str]
    """``spark.kubernetes.driver.label.*``."""
    annotations: Mapping[str, str]
    """``spark.kubernetes.driver.annotation.*``."""
    env: Mapping[str, str]
    """``spark.kubernetes.driverEnv.*``."""
    node_selector: Mapping[str, str]
    """``spark.kubernetes.node.selector.*``, then ``spark.kubernetes.driver.node.selector.*``."""
    cpu_request: str
    """``spark.kubernetes.driver.request.cores``, else ``spark.driver.cores``."""
    cpu_limit: str | None
    """``spark.kubernetes.driver.limit.cores``."""
    pull_policy: str
    pull_secrets: tuple[str, ...]
    service_account: str | None
    """``spark.kubernetes.authenticate.driver.serviceAccountName``."""
    memory_local_dirs: bool
    """``spark.kubernetes.local.dirs.tmpfs``: the local directory's emptyDir in memory."""


def driver_pod_conf(conf: Mapping[str, str]) -> DriverPodConf:
    """The driver pod's shape as Spark's client reads it from the driver's confs."""
    secrets = conf.get("spark.kubernetes.container.image.pullSecrets", "").split(",")
    return DriverPodConf(
        labels=with_prefix(conf, "spark.kubernetes.driver.label."),
        annotations=with_prefix(conf, "spark.kubernetes.driver.annotation."),
        env=with_prefix(conf, "spark.kubernetes.driverEnv."),
        node_selector={
            **with_prefix(conf, "spark.kubernetes.node.selector."),
            **with_prefix(conf, "spark.kubernetes.driver.node.selector."),
        },
        cpu_request=conf.get("spark.kubernetes.driver.request.cores")
        or conf.get("spark.driver.cores", DEFAULT_DRIVER_CORES),
        cpu_limit=conf.get("spark.kubernetes.driver.limit.cores") or None,
        pull_policy=conf.get("spark.kubernetes.container.image.pullPolicy") or DEFAULT_PULL_POLICY,
        pull_secrets=tuple(s.strip() for s in secrets if s.strip()),
        service_account=conf.get("spark.kubernetes.authenticate.driver.serviceAccountName") or None,
        memory_local_dirs=conf.get("spark.kubernetes.local.dirs.tmpfs", "").lower() == "true",
    )


def _mib(conf: Mapping[str, str], key: str, default: str | None = None) -> float:
    text = conf.get(key, default)
    try:
        return spark_memory_mib(text or "")
    except ValueError:
        raise SparkConfError(key, f"{text!r} is not a memory size (512m, 2g)") from None


def driver_memory_mib(conf: Mapping[str, str], *, default_factor: str) -> int:
    """The driver pod's memory as Spark's client requests it: the heap plus
    ``spark.driver.memoryOverhead``, else ``max(int(factor x heap),
    spark.driver.minMemoryOverhead)`` (384 MiB by default); the factor is
    ``spark.driver.memoryOverheadFactor``, else ``spark.kubernetes.memoryOverheadFactor``,
    else ``default_factor`` (0.1 for the JVM, 0.4 for Python and R)."""
    heap = int(_mib(conf, "spark.driver.memory", DEFAULT_DRIVER_MEMORY))
    if "spark.driver.memoryOverhead" in conf:
        return heap + int(_mib(conf, "spark.driver.memoryOverhead"))
    key = (
        "spark.driver.memoryOverheadFactor"
        if "spark.driver.memoryOverheadFactor" in conf
        else "spark.kubernetes.memoryOverheadFactor"
    )
    text = conf.get(key) or default_factor
    try:
        factor = float(text)
    except ValueError:
        raise SparkConfError(key, f"{text!r} is not a number (e.g. 0.1)") from None
    if factor <= 0:
        raise SparkConfError(key, f"{text!r} must be more than 0")
    minimum = (
        int(_mib(conf, "spark.driver.minMemoryOverhead"))
        if "spark.driver.minMemoryOverhead" in conf
        else MIN_MEMORY_OVERHEAD_MIB
    )
    return heap + max(int(factor * heap), minimum)


LABEL_APP_SELECTOR = "spark-app-selector"
LABEL_ROLE = "spark-role"
LABEL_APP_NAME = "spark-app-name"
LABEL_VERSION = "spark-version"


def driver_ports(
    driver: int = DRIVER_PORT, block_manager: int = BLOCK_MANAGER_PORT, ui: int = UI_PORT
) -> tuple[tuple[str, int], ...]:
    """The driver container's named ports, in Spark's order (its service serves the same)."""
    return (
        ("driver-rpc-port", driver),
        ("blockmanager", block_manager),
        (UI_PORT_NAME, ui),
        (CONNECT_PORT_NAME, CONNECT_PORT),
    )


def container_ports(ports: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """Container ports as Spark's client writes them (protocol given)."""
    return [{"containerPort": port, "name": name, "protocol": "TCP"} for name, port in ports]


def driver_args(
    main_class: str, resource: str, app_args: Iterable[str], conf_dir: str = CONF_MOUNT_PATH
) -> list[str]:
    """The driver's entrypoint arguments, as cluster mode calls Spark's image."""
    return [
        "driver",
        "--properties-file",
        f"{conf_dir}/{PROPERTIES}",
        "--class",
        main_class,
        resource,
        *app_args,
    ]


def local_dir(uuid: str) -> str:
    """The driver's local directory, ``/var/data/spark-<uuid>`` (on an emptyDir)."""
    return f"{LOCAL_DIR_ROOT}/spark-{uuid}"


def driver_env(
    *,
    user: str,
    app_id: str,
    local_dirs: str,
    conf_dir: str = CONF_MOUNT_PATH,
    extra: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The env Spark's cluster mode gives the driver container, in its order: who
    submitted, the application id, ``extra`` (``spark.kubernetes.driverEnv.*``), the pod's
    IP to bind to, the local and conf directories."""
    return [
        {"name": "SPARK_USER", "value": user},
        {"name": "SPARK_APPLICATION_ID", "value": app_id},
        *({"name": key, "value": value} for key, value in (extra or {}).items()),
        {
            "name": "SPARK_DRIVER_BIND_ADDRESS",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
        },
        {"name": "SPARK_LOCAL_DIRS", "value": local_dirs},
        {"name": "SPARK_CONF_DIR", "value": conf_dir},
    ]


def _escape(text: str, *, key: bool) -> str:
    """Java properties escaping: backslash, line breaks, and in keys the separators."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\t", "\\t").replace("\f", "\\f")
    if key:
        for char in (" ", "=", ":", "#", "!"):
            out = out.replace(char, "\\" + char)
    elif out.startswith(" "):
        out = "\\" + out
    return out


def properties_text(props: Mapping[str, str]) -> str:
    """``spark.properties``: one ``key=value`` line per conf, sorted, Java-escaped."""
    return "".join(
        f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in sorted(props.items())
    )


__all__ = [
    "BLOCK_MANAGER_PORT",
    "CONF_MOUNT_PATH",
    "CONNECT_APP_PROTOCOL",
    "CONNECT_PORT",
    "CONNECT_PORT_NAME",
    "DEFAULT_DRIVER_CORES",
    "DEFAULT_DRIVER_MEMORY",
    "DEFAULT_PULL_POLICY",
    "DRIVER_PORT",
    "DRIVER_SECURITY_CONTEXT",
    "LABEL_APP_NAME",
    "LABEL_APP_SELECTOR",
    "LABEL_ROLE",
    "LABEL_VERSION",
    "LOCAL_DIR_ROOT",
    "LOCAL_DIR_VOLUME",
    "PROPERTIES",
    "PYTHON_RUNNER",
    "R_RUNNER",
    "UI_PORT",
    "UI_PORT_NAME",
    "DriverPodConf",
    "SparkConfError",
    "container_ports",
    "driver_args",
    "driver_env",
    "driver_memory_mib",
    "driver_pod_conf",
    "driver_ports",
    "local_dir",
    "properties_text",
    "with_prefix",
]
