"""The SparkApplication spec: the spark-operator's fields (``sparkoperator.k8s.io/v1beta2``),
their value formats, the fields refused with a hint (see
:mod:`kubemill.engines.spark.api.application`) and upstream's defaults (:func:`default_spark_spec`).
A ScheduledSparkApplication's template is the same spec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel, invalid, refused
from kubemill.api.errors import did_you_mean
from kubemill.api.kube import JSON, Container, EnvVar, PodTemplateSpec
from kubemill.engines.spark.api.names import spark_memory_mib

UPSTREAM_API_VERSION = "sparkoperator.k8s.io/v1beta2"
"""The spark-operator's version: loads unchanged into both kinds."""

SPARK_REPLICA_TYPES = ("Driver", "Executor")

DEFAULT_CORES = 1
DEFAULT_MEMORY = "1g"
"""Upstream's defaults for driver and executor, unless sparkConf sets them."""
DEFAULT_EXECUTOR_INSTANCES = 1
"""Upstream's default, unless sparkConf sets it or dynamic allocation is on."""
DEFAULT_RETRY_INTERVAL = 5
"""Seconds between retries under OnFailure/Always when the policy names none (upstream)."""


# --- value formats ------------------------------------------------------------------------------


def _check_memory(value: str | None) -> str | None:
    if value is None:
        return value
    try:
        size = spark_memory_mib(value)
    except ValueError:
        raise invalid(
            f"{value!r} is not a Spark memory size",
            "a number with an optional unit k, m, g, t or p (512m, 2g); no unit means MiB",
        ) from None
    if size <= 0:
        raise invalid(f"{value!r} is no memory", "give a positive size, e.g. 512m")
    return value


_QUANTITY = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+|[numkMGTPE]|[KMGTPE]i)?$")


def _check_cpu(value: str | None) -> str | None:
    if value is not None and not _QUANTITY.match(value):
        raise invalid(
            f"{value!r} is not a Kubernetes CPU quantity",
            "write cores as 1, 0.5 or 500m",
        )
    return value


def _number_as_text(raw: Any) -> Any:
    """Users write ``pythonVersion: 3``; upstream's field is a string."""
    return str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw


# --- the SparkApplication spec -----------------------------------------------------------------


class SparkApplicationType(StrEnum):
    """The application's language: decides the main resource and the memory overhead."""

    JAVA = "Java"
    SCALA = "Scala"
    PYTHON = "Python"
    R = "R"

    @property
    def jvm(self) -> bool:
        """Java and Scala run in the JVM itself (overhead factor 0.1, not 0.4)."""
        return self in (SparkApplicationType.JAVA, SparkApplicationType.SCALA)


class DeployMode(StrEnum):
    """Where the driver runs. kubemill runs cluster mode; the others are refused."""

    CLUSTER = "cluster"
    CLIENT = "client"
    IN_CLUSTER_CLIENT = "in-cluster-client"


class SparkRestartPolicyType(StrEnum):
    """Whether an application that ended is run again."""

    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    ALWAYS = "Always"


class SparkRestartPolicy(KubeModel):
    """When the application is submitted again (the whole application: driver and executors)."""

    type: SparkRestartPolicyType | None = None
    on_submission_failure_retries: int | None = Field(default=None, ge=0)
    on_failure_retries: int | None = Field(default=None, ge=0)
    """Re-runs after a failed run (OnFailure). None, as upstream reads it: no re-run."""
    on_submission_failure_retry_interval: int | None = Field(default=None, ge=1)
    on_failure_retry_interval: int | None = Field(default=None, ge=1)
    """Seconds between a failed run and the next; 5 under OnFailure/Always unless given."""


_PACKAGE = re.compile(r"^[^:\s]+:[^:\s]+:[^:\s]+$")
_EXCLUDED_PACKAGE = re.compile(r"^[^:\s]+:[^:\s]+$")


class Dependencies(KubeModel):
    """What the application needs beside its main file (spark-submit's --jars, --packages ...)."""

    jars: list[str] | None = None
    files: list[str] | None = None
    py_files: list[str] | None = None
    packages: list[str] | None = None
    """Maven coordinates ``groupId:artifactId:version``."""
    exclude_packages: list[str] | None = None
    """``groupId:artifactId`` to leave out while resolving ``packages``."""
    repositories: list[str] | None = None
    archives: list[str] | None = None

    @field_validator("packages")
    @classmethod
    def _coordinates(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            if not _PACKAGE.match(item):
                raise invalid(
                    f"{item!r} is not a Maven coordinate",
                    "write groupId:artifactId:version, e.g. org.apache.spark:spark-avro_2.13:4.0.0",
                )
        return value

    @field_validator("exclude_packages")
    @classmethod
    def _excluded(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            if not _EXCLUDED_PACKAGE.match(item):
                raise invalid(
                    f"{item!r} is not groupId:artifactId",
                    "exclude a package by group and artifact, without a version",
                )
        return value


class NamePath(KubeModel):
    """A ConfigMap mounted at ``path`` in the pod."""

    name: str
    path: str


class SecretType(StrEnum):
    """How a mounted Secret is announced to the application."""

    GCP_SERVICE_ACCOUNT = "GCPServiceAccount"
    """``GOOGLE_APPLICATION_CREDENTIALS=<path>/key.json``."""
    HADOOP_DELEGATION_TOKEN = "HadoopDelegationToken"  # noqa: S105 (a type's name, no token)
    """``HADOOP_TOKEN_FILE_LOCATION=<path>/hadoop.token``."""
    GENERIC = "Generic"


SECRET_ENV = {
    SecretType.GCP_SERVICE_ACCOUNT: ("GOOGLE_APPLICATION_CREDENTIALS", "key.json"),
    SecretType.HADOOP_DELEGATION_TOKEN: ("HADOOP_TOKEN_FILE_LOCATION", "hadoop.token"),
}
"""The variable upstream sets for a typed Secret, and the file in the Secret it names."""


class SecretInfo(KubeModel):
    """A Secret mounted at ``path`` in the pod."""

    name: str
    path: str
    secret_type: SecretType = SecretType.GENERIC


class NameKey(KubeModel):
    """One key of a Secret (the deprecated ``envSecretKeyRefs``)."""

    name: str
    key: str


class SparkPort(KubeModel):
    """An extra port of the driver or executor container."""

    name: str
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    container_port: int = Field(ge=1, le=65535)


class GPUSpec(KubeModel):
    """GPUs for each pod of a role: ``name`` is the resource (``nvidia.com/gpu``)."""

    name: str
    quantity: int = Field(ge=0)


class SparkPodSpec(KubeModel):
    """What the driver and the executors share: their pods, as Spark's confs describe them."""

    template: dict[str, JSON] | None = None
    """A pod template (Spark 3.0 and later) for what the other fields do not cover; they
    win over it. Checked as a Kubernetes pod template."""
    cores: int | None = Field(default=None, ge=1)
    core_limit: str | None = None
    core_request: str | None = None
    memory: str | None = None
    memory_overhead: str | None = None
    gpu: GPUSpec | None = None
    image: str | None = None
    config_maps: list[NamePath] | None = None
    secrets: list[SecretInfo] | None = None
    env: list[EnvVar] | None = None
    env_vars: dict[str, str] | None = None
    """Deprecated upstream: use ``env``."""
    env_from: list[JSON] | None = None
    env_secret_key_refs: dict[str, NameKey] | None = None
    """Deprecated upstream: use ``env`` with ``valueFrom.secretKeyRef``."""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    volume_mounts: list[JSON] | None = None
    affinity: JSON | None = None
    tolerations: list[JSON] | None = None
    pod_security_context: JSON | None = None
    security_context: JSON | None = None
    scheduler_name: str | None = None
    sidecars: list[Container] | None = None
    init_containers: list[Container] | None = None
    host_network: bool | None = None
    node_selector: dict[str, str] | None = None
    dns_config: JSON | None = None
    termination_grace_period_seconds: int | None = Field(default=None, ge=0)
    service_account: str | None = None
    host_aliases: list[JSON] | None = None
    share_process_namespace: bool | None = None
    runtime_class_name: str | None = None
    java_options: str | None = None
    lifecycle: JSON | None = None
    ports: list[SparkPort] | None = None
    priority_class_name: str | None = None

    @field_validator("template")
    @classmethod
    def _a_pod_template(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            # Raises at the field's path with the pod template's own field errors.
            PodTemplateSpec.model_validate(value)
        return value

    @field_validator("memory", "memory_overhead")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        return _check_memory(value)

    @field_validator("core_limit", "core_request")
    @classmethod
    def _cpu(cls, value: str | None) -> str | None:
        return _check_cpu(value)


class DriverSpec(SparkPodSpec):
    """The driver's pod."""

    pod_name: str | None = None
    """Refused: the name of a driver pod the user created, for in-cluster-client mode."""
    kubernetes_master: str | None = None
    """The API server URL the driver creates its executors through."""
    service_annotations: dict[str, str] | None = None
    service_labels: dict[str, str] | None = None
    """Of the headless driver service the executors reach the driver by."""

    @field_validator("pod_name")
    @classmethod
    def _no_pod_name(cls, value: str | None) -> str | None:
        if value is not None:
            raise refused(
                "not supported: it names a driver pod created by hand, for in-cluster-client "
                "mode, which kubemill does not run",
                "remove podName; kubemill creates the driver pod, named <app>-driver",
            )
        return value


class ExecutorSpec(SparkPodSpec):
    """The executors' pods (the driver creates them)."""

    instances: int | None = Field(default=None, ge=1, le=10_000)
    delete_on_termination: bool | None = None


class PrometheusSpec(KubeModel):
    """The JMX exporter's jar, port and configuration."""

    jmx_exporter_jar: str
    port: int | None = Field(default=None, ge=1024, le=49151)
    port_name: str | None = None
    config_file: str | None = None
    configuration: str | None = None


class MonitoringSpec(KubeModel):
    """Prometheus JMX exporter settings (refused as a whole: see :class:`SparkApplicationSpec`)."""

    expose_driver_metrics: bool = False
    expose_executor_metrics: bool = False
    metrics_properties: str | None = None
    metrics_properties_file: str | None = None
    prometheus: PrometheusSpec | None = None


BATCH_SCHEDULERS = {"volcano": "volcano", "kube-scheduler": "scheduler-plugins"}
"""Upstream's batch scheduler names kubemill honours -> kubemill's gang scheduler (upstream's
``kube-scheduler`` plugin creates scheduler-plugins' coscheduling PodGroups)."""


class BatchSchedulerConfiguration(KubeModel):
    """The PodGroup's queue, priority and minimum resources."""

    queue: str | None = None
    priority_class_name: str | None = None
    resources: dict[str, str | int] | None = None


ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]


class SparkUIConfiguration(KubeModel):
    """The Spark UI service (``<app>-ui-svc``)."""

    service_port: int | None = Field(default=None, ge=1, le=65535)
    service_port_name: str | None = None
    service_type: ServiceType | None = None
    service_annotations: dict[str, str] | None = None
    service_labels: dict[str, str] | None = None
    ingress_annotations: dict[str, str] | None = None
    ingress_tls: list[JSON] | None = Field(default=None, alias="ingressTLS")

    @field_validator("ingress_annotations", "ingress_tls")
    @classmethod
    def _no_ingress(cls, value: Any) -> Any:
        if value is not None:
            raise refused(
                "not supported: kubemill creates no Ingress for the Spark UI",
                "remove it; reach the UI through the <app>-ui-svc service "
                "(sparkUIOptions.serviceType: NodePort or LoadBalancer, or kubectl port-forward)",
            )
        return value


class DriverIngressConfiguration(KubeModel):
    """A service and an Ingress for a port of the driver (refused: no Ingress)."""

    service_port: int | None = Field(default=None, ge=1, le=65535)
    service_port_name: str | None = None
    service_type: ServiceType | None = None
    service_annotations: dict[str, str] | None = None
    service_labels: dict[str, str] | None = None
    ingress_url_format: str | None = Field(default=None, alias="ingressURLFormat")
    ingress_annotations: dict[str, str] | None = None
    ingress_tls: list[JSON] | None = Field(default=None, alias="ingressTLS")


class DynamicAllocation(KubeModel):
    """Spark's dynamic allocation: executors between min and max as the work asks."""

    enabled: bool = False
    initial_executors: int | None = Field(default=None, ge=0)
    min_executors: int | None = Field(default=None, ge=0)
    max_executors: int | None = Field(default=None, ge=1)
    shuffle_tracking_enabled: bool | None = None
    """Defaults to true when dynamic allocation is on (upstream)."""
    shuffle_tracking_timeout: int | None = Field(default=None, ge=0)


DENIED_SPARK_CONF = {
    "spark.master": "kubemill sets the master",
    "spark.kubernetes.driver.master": "use spec.driver.kubernetesMaster",
    "spark.kubernetes.container.image": "use spec.image",
    "spark.kubernetes.driver.container.image": "use spec.driver.image",
    "spark.kubernetes.executor.container.image": "use spec.executor.image",
    "spark.kubernetes.authenticate.driver.serviceAccountName": "use spec.driver.serviceAccount",
    "spark.kubernetes.authenticate.executor.serviceAccountName": (
        "use spec.executor.serviceAccount"
    ),
    **dict.fromkeys(
        (
            f"spark.kubernetes.authenticate.{who}{what}"
            for who in ("", "driver.", "executor.")
            for what in ("oauthToken", "oauthTokenFile")
        ),
        "credentials come from the pods' service accounts, not from the manifest",
    ),
}
"""sparkConf keys upstream's webhook refuses (each has a field, or kubemill owns it) -> hint."""


class SparkApplicationSpec(KubeModel):
    """What a SparkApplication asks for: everything a spark-submit command line says."""

    type: SparkApplicationType | None = None
    """Required (upstream's CRD requires it)."""
    spark_version: str | None = None
    """Required (upstream's CRD requires it); pod templates need 3.0.0 or later."""
    mode: DeployMode = DeployMode.CLUSTER
    proxy_user: str | None = None
    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    image_pull_secrets: list[str] | None = None
    main_class: str | None = None
    main_application_file: str | None = None
    """Required: the jar, Python or R file (``local://`` is a path inside the image)."""
    arguments: list[str] | None = None
    spark_conf: dict[str, str] | None = None
    hadoop_conf: dict[str, str] | None = None
    """Passed as ``spark.hadoop.<key>``."""
    spark_config_map: str | None = None
    hadoop_config_map: str | None = None
    volumes: list[JSON] | None = None
    driver: DriverSpec = Field(default_factory=DriverSpec)
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    deps: Dependencies | None = None
    restart_policy: SparkRestartPolicy = Field(default_factory=SparkRestartPolicy)
    node_selector: dict[str, str] | None = None
    failure_retries: int | None = None
    retry_interval: int | None = None
    python_version: Literal["2", "3"] | None = None
    memory_overhead_factor: str | None = None
    monitoring: MonitoringSpec | None = None
    batch_scheduler: str | None = None
    time_to_live_seconds: int | None = Field(default=None, ge=0)
    batch_scheduler_options: BatchSchedulerConfiguration | None = None
    spark_ui_options: SparkUIConfiguration | None = Field(default=None, alias="sparkUIOptions")
    driver_ingress_options: list[DriverIngressConfiguration] | None = None
    dynamic_allocation: DynamicAllocation | None = None
    suspend: bool | None = None

    @field_validator("mode")
    @classmethod
    def _cluster_mode(cls, value: DeployMode) -> DeployMode:
        if value is not DeployMode.CLUSTER:
            raise refused(
                f"not supported: {value.value} mode runs the driver outside the pods kubemill "
                "creates",
                "use mode: cluster (the spark-operator's only mode too); to run the driver "
                "here, use kubemill spark-submit --master 'local[N]'",
            )
        return value

    @field_validator("python_version", mode="before")
    @classmethod
    def _python_version_as_text(cls, raw: Any) -> Any:
        return _number_as_text(raw)

    @field_validator("memory_overhead_factor")
    @classmethod
    def _factor(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            factor = float(value)
        except ValueError:
            factor = -1.0
        if not factor > 0:
            raise invalid(
                f"{value!r} is not a positive number",
                'the share of the memory added as overhead, e.g. "0.2" '
                "(Spark's default: 0.1 for JVM applications, 0.4 for Python and R)",
            )
        return value

    @field_validator("failure_retries", "retry_interval")
    @classmethod
    def _legacy_retries(cls, value: int | None) -> int | None:
        if value is not None:
            raise refused(
                "not supported: a v1beta1 field that the spark-operator's v1beta2 controller "
                "ignores",
                "use restartPolicy: {type: OnFailure, onFailureRetries: N, "
                "onFailureRetryInterval: SECONDS}",
            )
        return value

    @field_validator("monitoring")
    @classmethod
    def _no_monitoring(cls, value: MonitoringSpec | None) -> MonitoringSpec | None:
        if value is not None:
            raise refused(
                "not supported yet: kubemill does not set up the Prometheus JMX exporter",
                "remove monitoring; Spark 3 serves Prometheus metrics itself with "
                'sparkConf spark.ui.prometheus.enabled: "true" (and '
                "spark.metrics.conf.*.sink.prometheusServlet.*)",
            )
        return value

    @field_validator("driver_ingress_options")
    @classmethod
    def _no_driver_ingress(cls, value: Any) -> Any:
        if value is not None:
            raise refused(
                "not supported: kubemill creates no Ingress for the driver's ports",
                "remove driverIngressOptions; reach the driver through its service "
                "(kubectl port-forward), or declare a Service and an Ingress yourself",
            )
        return value

    @field_validator("batch_scheduler")
    @classmethod
    def _known_scheduler(cls, value: str | None) -> str | None:
        if value is None or value in BATCH_SCHEDULERS:
            return value
        if value == "yunikorn":
            raise refused(
                "not supported: kubemill gang-schedules with volcano or scheduler-plugins, "
                "not YuniKorn",
                "use batchScheduler: volcano or kube-scheduler (scheduler-plugins' "
                "coscheduling), or remove it",
            )
        raise invalid(
            f"unknown batch scheduler {value!r}",
            did_you_mean(value, BATCH_SCHEDULERS) or "use volcano or kube-scheduler",
        )


def conf_int(conf: Mapping[str, str] | None, key: str) -> int | None:
    """An integer sparkConf value (None when absent or not a number: validation says so)."""
    text = (conf or {}).get(key)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def default_spark_spec(spec: SparkApplicationSpec) -> None:
    """Fill the spark-operator's defaults in place: mode cluster, restartPolicy Never (the
    retry intervals 5 s under OnFailure/Always), 1 core and 1g for the driver and the
    executors and 1 executor unless sparkConf says otherwise (no instance count under
    dynamic allocation, whose shuffle tracking then defaults to on)."""
    policy = spec.restart_policy
    if policy.type is None:
        policy.type = SparkRestartPolicyType.NEVER
    if policy.type is not SparkRestartPolicyType.NEVER:
        if policy.on_failure_retry_interval is None:
            policy.on_failure_retry_interval = DEFAULT_RETRY_INTERVAL
        if policy.on_submission_failure_retry_interval is None:
            policy.on_submission_failure_retry_interval = DEFAULT_RETRY_INTERVAL
    conf = spec.spark_conf or {}
    for role, name in ((spec.driver, "driver"), (spec.executor, "executor")):
        if role.cores is None and f"spark.{name}.cores" not in conf:
            role.cores = DEFAULT_CORES
        if role.memory is None and f"spark.{name}.memory" not in conf:
            role.memory = DEFAULT_MEMORY
    alloc = spec.dynamic_allocation
    dynamic = (
        alloc.enabled
        if alloc is not None
        else (conf.get("spark.dynamicAllocation.enabled", "").strip().lower() == "true")
    )
    if spec.executor.instances is None and not conf.get("spark.executor.instances") and not dynamic:
        spec.executor.instances = DEFAULT_EXECUTOR_INSTANCES
    if alloc is not None and alloc.enabled and alloc.shuffle_tracking_enabled is None:
        alloc.shuffle_tracking_enabled = True
