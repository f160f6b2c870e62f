"""What Spark's own ``spark-submit --deploy-mode cluster`` creates on Kubernetes, built with no JVM.

Measured against the JVM client of the pyspark 4.3.0 wheel (fabric8 7.6.1; see
``docs/notes/spark-submit-on-kubernetes.md``); :func:`driver_objects` builds the same four
objects from a :class:`~kubemill.engines.spark.api.submit.ClusterMode` (the driver's Spark
configuration) and the values Spark generates per submission (:class:`Generated`, passed in:
nothing here reads a clock or draws a random number):

- **the driver pod** ``<prefix>-driver``, ``<prefix>`` being the application's name cleaned
  as Spark cleans it, then ``-<16 hex>``: container ``spark-kubernetes-driver`` running
  ``driver --properties-file /opt/spark/conf/spark.properties --class <class> <app> <args>``;
  Spark's four labels (and ``spark.kubernetes.driver.label.*``), its annotations; env
  ``SPARK_USER``, ``SPARK_APPLICATION_ID``, ``spark.kubernetes.driverEnv.*``,
  ``SPARK_DRIVER_BIND_ADDRESS`` (the pod's IP), ``SPARK_LOCAL_DIRS``, ``SPARK_CONF_DIR``;
  ports 7078, 7079, 4040 and 15002 (Spark Connect); memory requested and limited at the
  heap plus its overhead (``max(factor x heap, 384 MiB)``, the factor 0.1 for the JVM and 0.4
  for Python and R); ``allowPrivilegeEscalation: false``; an emptyDir for local files and
  the ConfigMap mounted at ``/opt/spark/conf``;
- **the headless service** ``<prefix>-driver-svc`` (``spark-<16 hex>-driver-svc`` when that
  is longer than a service name may be), selecting the driver's labels; ``spark.driver.host``
  is its DNS name;
- **the NetworkPolicy** ``<prefix>-policy``: the application's executors take connections
  from the application's pods only;
- **the ConfigMap** ``spark-drv-<16 hex>-conf-map``, immutable: ``spark.properties`` (the
  configuration and what Spark's client adds: ids, names, ports, the driver's host and pod,
  the resource type and overhead factor) and ``spark.kubernetes.namespace``.

The service, the NetworkPolicy and the ConfigMap are owned by the driver pod
(:meth:`DriverObjects.owned`): they go when it goes. Confs that would shape the driver pod
in ways not built here (pod templates, volumes, secrets, local directories) are refused
(:class:`ClusterModeError`) rather than silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubemill.engines.spark.api.names import (
    DRIVER_CONTAINER,
    JVM_OVERHEAD_FACTOR,
    MAX_NAME,
    NON_JVM_OVERHEAD_FACTOR,
)
from kubemill.engines.spark.api.submit import ClusterMode
from kubemill.engines.spark.framework.wire import (
    BLOCK_MANAGER_PORT,
    CONF_MOUNT_PATH,
    CONNECT_APP_PROTOCOL,
    CONNECT_PORT,
    CONNECT_PORT_NAME,
    DRIVER_PORT,
    DRIVER_SECURITY_CONTEXT,
    LABEL_APP_NAME,
    LABEL_APP_SELECTOR,
    LABEL_ROLE,
    LABEL_VERSION,
    LOCAL_DIR_VOLUME,
    PROPERTIES,
    PYTHON_RUNNER,
    R_RUNNER,
    UI_PORT,
    SparkConfError,
    container_ports,
    driver_args,
    driver_env,
    driver_pod_conf,
    driver_ports,
    local_dir,
    properties_text,
    with_prefix,
)
from kubemill.engines.spark.framework.wire import driver_memory_mib as wire_driver_memory_mib

SPARK_VERSION = "4.3.0"
"""The Spark release whose cluster-mode submission these builders reproduce (measured
against its client): the driver's ``spark-version`` label."""
CONF_VOLUME = "spark-conf-volume-driver"
DEFAULT_NAMESPACE = "default"
CONF_MAP_KEY_NAMESPACE = "spark.kubernetes.namespace"
"""Spark's client puts the namespace into the ConfigMap as a key of its own, too."""

_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_APP_ID = re.compile(r"^spark-[0-9a-f]{32}$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

_REFUSED_CONFS = (
    ("spark.kubernetes.driver.podTemplateFile", "a pod template file"),
    ("spark.kubernetes.driver.volumes.", "driver volumes"),
    ("spark.kubernetes.driver.secrets.", "secrets mounted in the driver"),
    ("spark.kubernetes.driver.secretKeyRef.", "secrets in the driver's env"),
    ("spark.kubernetes.kerberos.", "Kerberos"),
    ("spark.kubernetes.hadoop.configMapName", "a Hadoop ConfigMap"),
    ("spark.local.dir", "local directories"),
)
"""Conf prefixes that shape the driver pod beyond what is built here -> what they are."""

_RESERVED_LABELS = (LABEL_APP_SELECTOR, LABEL_ROLE)


class ClusterModeError(ValueError):
    """A submission whose driver objects cannot be built: the conf, what is wrong, what to do."""


@dataclass(frozen=True)
class Generated:
    """What Spark's client generates per submission (the caller draws and reads them)."""

    app_id: str
    """``spark-<32 hex>`` (a random UUID's hex): ``spark.app.id``, ``spark-app-selector``."""
    prefix_id: str
    """16 hex (6 random, then the submission's milliseconds): ``<app>-<this>``."""
    conf_map_id: str
    """16 hex, as ``prefix_id``: ``spark-drv-<this>-conf-map``."""
    service_id: str
    """16 hex, as ``prefix_id``: ``spark-<this>-driver-svc`` when the usual name is too long."""
    local_dir_id: str
    """A UUID: ``/var/data/spark-<this>``."""
    submit_time_ms: int
    """``spark.app.submitTime``: milliseconds since the epoch."""
    user: str
    """``SPARK_USER``: who submits."""
    spark_version: str
    """The ``spark-version`` label: the Spark release whose submission this is."""

    def __post_init__(self) -> None:
        checks = (
            ("app_id", self.app_id, _APP_ID),
            ("prefix_id", self.prefix_id, _HEX16),
            ("conf_map_id", self.conf_map_id, _HEX16),
            ("service_id", self.service_id, _HEX16),
            ("local_dir_id", self.local_dir_id, _UUID),
        )
        for name, value, shape in checks:
            if not shape.match(value):
                raise ClusterModeError(f"Generated.{name}: {value!r} is not shaped as Spark's")


@dataclass(frozen=True)
class DriverObjects:
    """The four objects of one submission, in the order Spark's client sends them."""

    namespace: str
    pod: dict[str, Any]
    service: dict[str, Any]
    network_policy: dict[str, Any]
    config_map: dict[str, Any]

    @property
    def pod_name(self) -> str:
        """The driver pod's name (Spark's submission id is ``<namespace>:<this>``)."""
        return str(self.pod["metadata"]["name"])

    def owned(self, pod_uid: str) -> list[dict[str, Any]]:
        """The service, NetworkPolicy and ConfigMap, owned by the created driver pod."""
        owner = {
            "apiVersion": "v1",
            "kind": "Pod",
            "controller": True,
            "name": self.pod_name,
            "uid": pod_uid,
        }
        out = []
        for obj in (self.service, self.network_policy, self.config_map):
            metadata = {**obj["metadata"], "ownerReferences": [owner]}
            out.append({**obj, "metadata": metadata})
        return out


def clean_name(name: str) -> str:
    """A name as Spark makes it fit for Kubernetes: lower case, runs of anything but
    letters, digits and ``-`` as one ``-``, no leading ``-``, no leading digit."""
    out = re.sub(r"[^a-z0-9\-]", "-", name.strip().lower())
    out = re.sub(r"-+", "-", out).lstrip("-")
    return re.sub(r"^[0-9]", "x", out)


def app_name_label(name: str) -> str:
    """The ``spark-app-name`` label: the cleaned name, at most 63 characters, ending in a
    letter or digit (a label value must)."""
    out = re.sub(r"-+", "-", re.sub(r"[^a-z0-9\-]", "-", name.strip().lower()))
    return out[:MAX_NAME].strip("-")


def resource_type(mode: ClusterMode) -> str:
    """``spark.kubernetes.resource.type``: java, python or r."""
    return {"Scala": "java", "Python": "python", "R": "r"}[mode.app_type]


def driver_class(mode: ClusterMode) -> str:
    """The class the driver runs: the application's, or Spark's runner for Python and R."""
    if mode.app_type == "Python":
        return PYTHON_RUNNER
    if mode.app_type == "R":
        return R_RUNNER
    if not mode.main_class:
        raise ClusterModeError("--class: a JVM application needs its main class")
    return mode.main_class


def overhead_factor(mode: ClusterMode) -> str:
    """``spark.kubernetes.memoryOverheadFactor`` as Spark's client writes it."""
    given = mode.conf.get("spark.kubernetes.memoryOverheadFactor")
    if given is not None:
        return given
    return str(JVM_OVERHEAD_FACTOR if mode.app_type == "Scala" else NON_JVM_OVERHEAD_FACTOR)


def driver_memory_mib(mode: ClusterMode) -> int:
    """The driver pod's memory (see
    :func:`kubemill.engines.spark.framework.wire.driver_memory_mib`)."""
    try:
        return wire_driver_memory_mib(mode.conf, default_factor=overhead_factor(mode))
    except SparkConfError as exc:
        raise ClusterModeError(f"--conf {exc}") from None


def _refuse_unbuilt(conf: Mapping[str, str]) -> None:
    for key in conf:
        for prefix, what in _REFUSED_CONFS:
            if key == prefix or (prefix.endswith(".") and key.startswith(prefix)):
                raise ClusterModeError(
                    f"--conf {key}: {what} in the driver pod are not built by kubemill's "
                    "cluster-mode submission; submit with --operator (a SparkApplication's "
                    "driver takes volumes, env and pod fields), or leave it out"
                )


def _port(conf: Mapping[str, str], key: str, default: int) -> int:
    text = conf.get(key)
    if text is None:
        return default
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ClusterModeError(f"--conf {key}: {text!r} is not a port number")
    return int(text)


def java_date(epoch_ms: int) -> str:
    """A time as Java's ``Date.toString`` writes it in UTC (``Tue Dec 01 17:30:26 UTC 2026``),
    the second comment line of a stored properties file."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%a %b %d %H:%M:%S UTC %Y")


def driver_objects(mode: ClusterMode, generated: Generated) -> DriverObjects:
    """The driver pod, its service, NetworkPolicy and ConfigMap for one submission."""
    conf = dict(mode.conf)
    _refuse_unbuilt(conf)
    namespace = conf.get("spark.kubernetes.namespace") or DEFAULT_NAMESPACE
    app_name = conf["spark.app.name"]
    # Spark cleans the name and its id together: a name ending in "-" (or in what becomes
    # one) joins its id with a single "-".
    prefix = clean_name(f"{app_name}-{generated.prefix_id}")
    pod_name = conf.get("spark.kubernetes.driver.pod.name") or f"{prefix}-driver"
    service_name = f"{prefix}-driver-svc"
    if len(service_name) > MAX_NAME:
        # As Spark: a service name longer than a DNS label falls back to a generated one.
        service_name = f"spark-{generated.service_id}-driver-svc"
    conf_map = f"spark-drv-{generated.conf_map_id}-conf-map"
    driver_port = _port(conf, "spark.driver.port", DRIVER_PORT)
    block_port = _port(conf, "spark.driver.blockManager.port", BLOCK_MANAGER_PORT)
    ports = (driver_port, block_port, _port(conf, "spark.ui.port", UI_PORT))

    user_labels = with_prefix(conf, "spark.kubernetes.driver.label.")
    for reserved in _RESERVED_LABELS:
        if reserved in user_labels:
            raise ClusterModeError(
                f"--conf spark.kubernetes.driver.label.{reserved}: Spark sets this label itself"
            )
    labels = {
        **user_labels,
        LABEL_APP_NAME: app_name_label(app_name),
        LABEL_VERSION: generated.spark_version,
        LABEL_ROLE: "driver",
        LABEL_APP_SELECTOR: generated.app_id,
    }
    props = {
        **conf,
        "spark.app.id": generated.app_id,
        "spark.app.submitTime": str(generated.submit_time_ms),
        "spark.kubernetes.resource.type": resource_type(mode),
        "spark.kubernetes.memoryOverheadFactor": overhead_factor(mode),
        "spark.kubernetes.submitInDriver": "true",
        "spark.kubernetes.driver.pod.name": pod_name,
        "spark.driver.host": f"{service_name}.{namespace}.svc",
        "spark.driver.port": str(driver_port),
        "spark.driver.blockManager.port": str(block_port),
    }
    return DriverObjects(
        namespace=namespace,
        pod=_pod(mode, generated, conf, pod_name, labels, conf_map, ports),
        service=_service(generated, service_name, labels, ports),
        network_policy=_network_policy(generated, f"{prefix}-policy", namespace),
        config_map={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": conf_map, "namespace": namespace},
            "data": {
                PROPERTIES: (
                    f"#Java properties built from Kubernetes config map with name: {conf_map}\n"
                    f"#{java_date(generated.submit_time_ms)}\n{properties_text(props)}"
                ),
                CONF_MAP_KEY_NAMESPACE: namespace,
            },
            "immutable": True,
        },
    )


def _pod(
    mode: ClusterMode,
    generated: Generated,
    conf: Mapping[str, str],
    name: str,
    labels: Mapping[str, str],
    conf_map: str,
    ports: tuple[int, int, int],
) -> dict[str, Any]:
    local_dirs = local_dir(generated.local_dir_id)
    image = conf.get("spark.kubernetes.driver.container.image") or conf.get(
        "spark.kubernetes.container.image"
    )
    shape = driver_pod_conf(conf)
    env = driver_env(
        user=generated.user, app_id=generated.app_id, local_dirs=local_dirs, extra=shape.env
    )
    memory = f"{driver_memory_mib(mode)}Mi"
    limits: dict[str, str] = {"memory": memory}
    if shape.cpu_limit:
        limits["cpu"] = shape.cpu_limit
    local_volume: dict[str, Any] = {"name": LOCAL_DIR_VOLUME, "emptyDir": {}}
    if shape.memory_local_dirs:
        local_volume["emptyDir"] = {"medium": "Memory"}
    container = {
        "name": DRIVER_CONTAINER,
        "image": image,
        "imagePullPolicy": shape.pull_policy,
        "args": driver_args(driver_class(mode), mode.resource, mode.app_args),
        "env": env,
        "ports": container_ports(driver_ports(*ports)),
        "resources": {"limits": limits, "requests": {"cpu": shape.cpu_request, "memory": memory}},
        "securityContext": dict(DRIVER_SECURITY_CONTEXT),
        "volumeMounts": [
            {"mountPath": local_dirs, "name": LOCAL_DIR_VOLUME},
            {"mountPath": CONF_MOUNT_PATH, "name": CONF_VOLUME},
        ],
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Never",
        "volumes": [
            local_volume,
            {
                "name": CONF_VOLUME,
                "configMap": {
                    "name": conf_map,
                    "items": [{"key": PROPERTIES, "path": PROPERTIES, "mode": 0o644}],
                },
            },
        ],
    }
    if shape.pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in shape.pull_secrets]
    if shape.node_selector:
        spec["nodeSelector"] = dict(shape.node_selector)
    if shape.service_account:
        spec["serviceAccount"] = shape.service_account
        spec["serviceAccountName"] = shape.service_account
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if shape.annotations:
        metadata["annotations"] = dict(shape.annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _service(
    generated: Generated,
    name: str,
    selector: Mapping[str, str],
    ports: tuple[int, int, int],
) -> dict[str, Any]:
    service_ports: list[dict[str, Any]] = [
        {"name": port_name, "port": port, "targetPort": port}
        for port_name, port in driver_ports(*ports)
    ]
    for port in service_ports:
        if port["name"] == CONNECT_PORT_NAME:
            port["appProtocol"] = CONNECT_APP_PROTOCOL
    return {
        "apiVersion": "v1",
        "kind": "Service",
        # As Spark's: no namespace (the request's path names it).
        "metadata": {"name": name, "labels": {LABEL_APP_SELECTOR: generated.app_id}},
        "spec": {
            "clusterIP": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": service_ports,
            "publishNotReadyAddresses": False,
            "selector": dict(selector),
        },
    }


def _network_policy(generated: Generated, name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_APP_SELECTOR: generated.app_id},
        },
        "spec": {
            "podSelector": {
                "matchLabels": {LABEL_ROLE: "executor", LABEL_APP_SELECTOR: generated.app_id}
            },
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": {LABEL_APP_SELECTOR: generated.app_id}}}]}
            ],
        },
    }


__all__ = [
    "CONNECT_PORT",
    "SPARK_VERSION",
    "ClusterModeError",
    "DriverObjects",
    "Generated",
    "app_name_label",
    "clean_name",
    "driver_class",
    "driver_memory_mib",
    "driver_objects",
    "java_date",
    "overhead_factor",
    "resource_type",
]
