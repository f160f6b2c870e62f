"""The Spark kinds: :class:`SparkApplication` and :class:`ScheduledSparkApplication`
(``kubemill.dev/v1``, field for field as the spark-operator's ``sparkoperator.k8s.io/v1beta2``,
which loads unchanged), their status models, and :data:`SPARKAPPLICATION` /
:data:`SCHEDULEDSPARKAPPLICATION`, the kinds' API descriptions.

**No replica specs.** A SparkApplication describes a driver and its executors with two
``SparkPodSpec``s (cores, memory, labels, volume mounts ...), not pod templates, and Spark's
driver creates the executors itself. :attr:`SparkApplication.replica_specs` is a *derived,
read-only view* for the parts of kubemill that speak replica specs: ``Driver`` (1) and
``Executor`` (``executor.instances``), each with the pod template its ``SparkPodSpec``
stands for (what the user asked of the pod; the framework adds Spark's own arguments,
labels, ports and configuration). Edit ``spec.driver``/``spec.executor``, never the view.
The loader's replica-spec checks speak of fields such a kind does not have, so the kind
checks its own fields (:attr:`Job.DERIVED_REPLICA_SPECS`).

**Honoured, or refused.** Every field maps onto the driver pod, the executors' pod template
or Spark configuration, except these, which are refused with a hint:

- ``mode: client`` and ``in-cluster-client`` (and ``driver.podName``, which only the latter
  uses): kubemill submits in cluster mode, as the spark-operator does;
- ``monitoring``: the Prometheus JMX exporter needs files the spark-operator's images carry;
- ``driverIngressOptions`` and ``sparkUIOptions.ingressAnnotations``/``ingressTLS``: kubemill
  creates no Ingress;
- ``batchScheduler: yunikorn``: kubemill gang-schedules with volcano and scheduler-plugins
  (upstream's ``kube-scheduler``);
- ``failureRetries`` and ``retryInterval``: v1beta1 leftovers that upstream's controller
  ignores; ``restartPolicy`` says it;
- ``restartPolicy`` retry counts under a type that never reads them (Never, Always).

**ScheduledSparkApplication** runs no pods of its own: it creates a SparkApplication from
``spec.template`` on a cron ``schedule``. Its time zone is checked by syntax here (the API
layer reads no files; the zone database is the substrate's to consult).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from kubemill.api.base import KubeModel, refused
from kubemill.api.common import (
    API_VERSION,
    CleanPodPolicy,
    Job,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
)
from kubemill.api.crd import INT_OR_STRING
from kubemill.api.errors import FieldError, child_path, did_you_mean
from kubemill.api.kinds import AGE_COLUMN, KindApi, PrinterColumn
from kubemill.api.kube import (
    JSON,
    Container,
    ContainerPort,
    EnvVar,
    EnvVarSource,
    PodSpec,
    PodTemplateSpec,
    TemplateMeta,
)
from kubemill.api.runstates import TERMINAL_STATES, ApplicationStateType

# Re-exported: their home is the model-free spark_names (spark-submit's fast path).
from kubemill.api.spark_names import (
    DRIVER_CONTAINER as DRIVER_CONTAINER,
)
from kubemill.api.spark_names import (
    EXECUTOR_CONTAINER as EXECUTOR_CONTAINER,
)
from kubemill.api.spark_names import (
    JVM_OVERHEAD_FACTOR as JVM_OVERHEAD_FACTOR,
)
from kubemill.api.spark_names import (
    MAX_NAME as MAX_NAME,
)
from kubemill.api.spark_names import (
    MIN_MEMORY_OVERHEAD_MIB as MIN_MEMORY_OVERHEAD_MIB,
)
from kubemill.api.spark_names import (
    NON_JVM_OVERHEAD_FACTOR as NON_JVM_OVERHEAD_FACTOR,
)
from kubemill.api.spark_names import (
    SPARK_MEMORY as SPARK_MEMORY,
)
from kubemill.api.spark_names import (
    UI_SERVICE_SUFFIX as UI_SERVICE_SUFFIX,
)
from kubemill.api.spark_names import (
    spark_memory_mib as spark_memory_mib,
)

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
RUN_NAME_DIGITS = 19
"""A scheduled run is named ``<name>-<unix nanoseconds>``: 19 digits until the year 2286."""

_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _invalid(message: str, hint: str) -> PydanticCustomError:
    """A field error with our own final message and hint (see :func:`.base.refused`)."""
    return PydanticCustomError(
        "kubemill_invalid", message.replace("{", "{{").replace("}", "}}"), {"hint": hint}
    )


# --- value formats ------------------------------------------------------------------------------


def _check_memory(value: str | None) -> str | None:
    if value is None:
        return value
    try:
        size = spark_memory_mib(value)
    except ValueError:
        raise _invalid(
            f"{value!r} is not a Spark memory size",
            "a number with an optional unit k, m, g, t or p (512m, 2g); no unit means MiB",
        ) from None
    if size <= 0:
        raise _invalid(f"{value!r} is no memory", "give a positive size, e.g. 512m")
    return value


_QUANTITY = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+|[numkMGTPE]|[KMGTPE]i)?$")


def _check_cpu(value: str | None) -> str | None:
    if value is not None and not _QUANTITY.match(value):
        raise _invalid(
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
                raise _invalid(
                    f"{item!r} is not a Maven coordinate",
                    "write groupId:artifactId:version, e.g. org.apache.spark:spark-avro_2.13:4.0.0",
                )
        return value

    @field_validator("exclude_packages")
    @classmethod
    def _excluded(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            if not _EXCLUDED_PACKAGE.match(item):
                raise _invalid(
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
            raise _invalid(
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
        raise _invalid(
            f"unknown batch scheduler {value!r}",
            did_you_mean(value, BATCH_SCHEDULERS) or "use volcano or kube-scheduler",
        )


# --- status -------------------------------------------------------------------------------------


# ApplicationStateType and TERMINAL_STATES: kubemill.api.runstates (any re-run kind's).


class ExecutorState(StrEnum):
    """One executor pod's state."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


class ApplicationState(KubeModel):
    """The application's state, and why it failed when it did."""

    state: ApplicationStateType = ApplicationStateType.NEW
    error_message: str | None = None


class DriverInfo(KubeModel):
    """Where the driver is: its pod and its UI."""

    pod_name: str | None = None
    web_ui_service_name: str | None = Field(default=None, alias="webUIServiceName")
    web_ui_address: str | None = Field(default=None, alias="webUIAddress")
    web_ui_port: int | None = Field(default=None, alias="webUIPort")
    web_ui_ingress_name: str | None = Field(default=None, alias="webUIIngressName")
    web_ui_ingress_address: str | None = Field(default=None, alias="webUIIngressAddress")


class SparkApplicationStatus(JobStatus):
    """The spark-operator's status fields, beside kubemill's conditions and replica counts."""

    spark_application_id: str | None = None
    submission_id: str | None = Field(default=None, alias="submissionID")
    last_submission_attempt_time: datetime | None = None
    termination_time: datetime | None = None
    driver_info: DriverInfo = Field(default_factory=DriverInfo)
    application_state: ApplicationState = Field(default_factory=ApplicationState)
    executor_state: dict[str, ExecutorState] = Field(default_factory=dict)
    """Executor pod name -> state."""
    execution_attempts: int = Field(default=0, ge=0)
    """Runs the API accepted (reset by a spec change)."""
    submission_attempts: int = Field(default=0, ge=0)
    """Submissions of the current run: the first, and retries after the API refused one."""

    @property
    def state(self) -> ApplicationStateType:
        """The application's state (NEW until something happened)."""
        return self.application_state.state

    @property
    def finished(self) -> bool:
        """A terminal condition (Succeeded or Failed); without conditions (a schema that
        has none), COMPLETED or FAILED. The conditions decide when there are any: an
        application whose spec changed after it ended runs again, and the core withdraws
        the verdict in the conditions first."""
        if self.conditions:
            return super().finished
        return self.state in TERMINAL_STATES

    @property
    def run_outcome(self) -> Literal["active", "succeeded", "failed"]:
        """By the application state first (a schedule's runs, as upstream judges them),
        then, should a terminal condition come first, by that."""
        if self.state is ApplicationStateType.COMPLETED:
            return "succeeded"
        if self.state is ApplicationStateType.FAILED:
            return "failed"
        return super().run_outcome

    @property
    def phase(self) -> str:
        """The spark-operator's state, as ``kubectl get sparkapp`` shows it (NEW until
        submitted), unless the conditions say the job finished and the state has not."""
        if super().finished and self.state not in TERMINAL_STATES:
            return super().phase
        return self.state.value or "NEW"


# --- the SparkApplication kind ------------------------------------------------------------------


class SparkApplication(Job):
    """A Spark application: a driver that creates its executors, run under the
    spark-operator's state machine."""

    KIND: ClassVar[str] = "SparkApplication"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = SPARK_REPLICA_TYPES
    DEFAULT_CONTAINER: ClassVar[str] = ""
    """None by name: the driver's and the executors' containers are named differently."""
    DEFAULT_PORT_NAME: ClassVar[str] = ""
    DEFAULT_PORT: ClassVar[int] = 0
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    """Of the pods: a run is retried as a whole, by ``spec.restartPolicy``."""
    REPLICA_SPECS_FIELD: ClassVar[str] = ""
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True
    SUSPEND_FIELD: ClassVar[tuple[str, ...]] = ("suspend",)
    """The spark-operator's ``spec.suspend`` (the run policy is derived from it)."""

    kind: str = "SparkApplication"
    spec: SparkApplicationSpec = Field(default_factory=SparkApplicationSpec)
    status: SparkApplicationStatus = Field(default_factory=SparkApplicationStatus)

    @model_validator(mode="after")
    def _defaults(self) -> SparkApplication:
        default_spark_spec(self.spec)
        return self

    # --- what the rest of kubemill reads -------------------------------------------------------

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """Driver (1) and Executor (the executors Spark starts with), derived from the
        spec: a fresh view on every call, so edit ``spec``, not this."""
        return {
            "Driver": ReplicaSpec(
                replicas=1,
                template=pod_template(self.spec, self.spec.driver, DRIVER_CONTAINER),
                restart_policy=RestartPolicy.NEVER,
            ),
            "Executor": ReplicaSpec(
                replicas=self.executor_instances,
                template=pod_template(self.spec, self.spec.executor, EXECUTOR_CONTAINER),
                restart_policy=RestartPolicy.NEVER,
            ),
        }

    @property
    def run_policy(self) -> RunPolicy:
        """The common run policy the spec stands for (derived, like :attr:`replica_specs`):
        ``suspend``, ``timeToLiveSeconds`` as the TTL, the batch scheduler's PodGroup;
        pods are never restarted in place (the application is re-run instead) and the
        driver pod is kept, as upstream keeps it."""
        return RunPolicy(
            clean_pod_policy=CleanPodPolicy.NONE,
            ttl_seconds_after_finished=self.spec.time_to_live_seconds,
            backoff_limit=0,
            scheduling_policy=self.scheduling_policy,
            suspend=bool(self.spec.suspend),
        )

    @property
    def scheduling_policy(self) -> SchedulingPolicy | None:
        """The PodGroup ``batchScheduler`` asks for (None without one)."""
        if self.spec.batch_scheduler is None:
            return None
        options = self.spec.batch_scheduler_options or BatchSchedulerConfiguration()
        return SchedulingPolicy(
            queue=options.queue,
            priority_class=options.priority_class_name,
            min_resources=dict(options.resources) if options.resources else None,
        )

    @property
    def app_type(self) -> SparkApplicationType:
        """The application's type (Scala when unset, as upstream's defaulter says; the
        loader requires it)."""
        return self.spec.type or SparkApplicationType.SCALA

    @property
    def dynamic_allocation_enabled(self) -> bool:
        """Whether executors come and go with the work (the field, else sparkConf)."""
        if self.spec.dynamic_allocation is not None:
            return self.spec.dynamic_allocation.enabled
        text = (self.spec.spark_conf or {}).get("spark.dynamicAllocation.enabled", "")
        return text.strip().lower() == "true"

    @property
    def executor_instances(self) -> int:
        """How many executors Spark starts with: ``executor.instances``, else sparkConf's
        ``spark.executor.instances``; with dynamic allocation the largest of that,
        ``minExecutors`` and ``initialExecutors`` (as Spark computes it)."""
        instances = self.spec.executor.instances
        if instances is None:
            instances = _conf_int(self.spec.spark_conf, "spark.executor.instances")
        if not self.dynamic_allocation_enabled:
            return instances if instances is not None else DEFAULT_EXECUTOR_INSTANCES
        low, _high, initial = self._allocation_bounds()
        return max(v for v in (instances, low, initial, 0) if v is not None)

    def pod_memory_mib(self, role: SparkPodSpec) -> int:
        """A pod's memory as Spark requests it (see :func:`pod_memory_mib`)."""
        return pod_memory_mib(self.spec, role.memory or DEFAULT_MEMORY, role.memory_overhead)

    # --- validation ----------------------------------------------------------------------------

    def kind_errors(self) -> list[FieldError]:
        """The spark-operator's CRD and webhook checks, and kubemill's own."""
        return spec_errors(self.spec, "spec", namespace=self.namespace) + self._name_errors()

    def refused_fields(self) -> list[FieldError]:
        """Retry counts that the restart policy's type never reads."""
        return restart_policy_refusals(self.spec.restart_policy, "spec.restartPolicy")

    def _name_errors(self) -> list[FieldError]:
        return _name_errors(self.metadata.name or "", MAX_NAME - len(UI_SERVICE_SUFFIX), "")

    def _allocation_bounds(self) -> tuple[int | None, int | None, int | None]:
        """(min, max, initial) executors: the dynamicAllocation field's when enabled there,
        else sparkConf's (the field wins key by key, as upstream merges them)."""
        conf = self.spec.spark_conf
        low = _conf_int(conf, "spark.dynamicAllocation.minExecutors")
        high = _conf_int(conf, "spark.dynamicAllocation.maxExecutors")
        initial = _conf_int(conf, "spark.dynamicAllocation.initialExecutors")
        alloc = self.spec.dynamic_allocation
        if alloc is not None and alloc.enabled:
            low = alloc.min_executors if alloc.min_executors is not None else low
            high = alloc.max_executors if alloc.max_executors is not None else high
            initial = alloc.initial_executors if alloc.initial_executors is not None else initial
        return low, high, initial


def _conf_int(conf: Mapping[str, str] | None, key: str) -> int | None:
    """An integer sparkConf value (None when absent or not a number: validation says so)."""
    text = (conf or {}).get(key)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def memory_overhead_factor(spec: SparkApplicationSpec) -> float:
    """The overhead factor: the spec's, else Spark's for the application's type."""
    if spec.memory_overhead_factor is not None:
        return float(spec.memory_overhead_factor)
    jvm = (spec.type or SparkApplicationType.SCALA).jvm
    return JVM_OVERHEAD_FACTOR if jvm else NON_JVM_OVERHEAD_FACTOR


def pod_memory_mib(spec: SparkApplicationSpec, memory: str, overhead: str | None) -> int:
    """A pod's memory in MiB as Spark requests it: the heap plus the overhead (the one
    given, else the factor's share of the heap, at least 384 MiB)."""
    heap = spark_memory_mib(memory)
    extra = (
        spark_memory_mib(overhead)
        if overhead is not None
        else max(MIN_MEMORY_OVERHEAD_MIB, heap * memory_overhead_factor(spec))
    )
    return int(heap + extra)


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


# --- derived pod templates ----------------------------------------------------------------------


def pod_template(spec: SparkApplicationSpec, role: SparkPodSpec, container: str) -> PodTemplateSpec:
    """The pod template one role's fields stand for: the user's ``template`` (if any) with
    every field of the role on top, as Spark merges a pod template with its confs.

    The main container (named ``container``, or the template's first) gets the image,
    env, resources, mounts, security context, lifecycle and ports; ``sidecars`` follow
    it; the pod gets the volumes the role mounts, the scheduling fields, the service
    account, labels and annotations. Spark's own arguments, labels, ports and
    configuration are the framework's to add.
    """
    base = PodTemplateSpec.model_validate(role.template or {})
    pod = base.spec
    main = _main_container(pod, container)
    main.image = role.image or spec.image or main.image
    main.image_pull_policy = spec.image_pull_policy or main.image_pull_policy
    env = _role_env(role) + [
        EnvVar(name=variable, value=path)
        for _volume, path, variable in _config_volumes(spec, role)
        if variable
    ]
    main.env = (main.env or []) + env or None
    main.env_from = (main.env_from or []) + (role.env_from or []) or None
    main.resources = _resources(spec, role, main.resources)
    mounts = list(main.volume_mounts or []) + list(role.volume_mounts or [])
    mounts += [
        {"name": volume["name"], "mountPath": path, "readOnly": True}
        for volume, path, _env in _config_volumes(spec, role)
    ]
    main.volume_mounts = mounts or None
    main.security_context = role.security_context or main.security_context
    main.lifecycle = role.lifecycle or main.lifecycle
    if role.ports:
        main.ports = (main.ports or []) + _container_ports(role.ports)
    pod.containers += [c.model_copy(deep=True) for c in role.sidecars or []]
    if role.init_containers:
        pod.init_containers = (pod.init_containers or []) + [
            c.model_copy(deep=True) for c in role.init_containers
        ]
    pod.volumes = _volumes(spec, role, pod.volumes) or None
    if role.host_network:
        # As upstream: a pod on the host's network still resolves cluster names.
        pod.dns_policy = "ClusterFirstWithHostNet"
    pod.restart_policy = "Never"
    pod.service_account_name = role.service_account or pod.service_account_name
    pod.scheduler_name = role.scheduler_name or pod.scheduler_name
    selector = {**(pod.node_selector or {}), **(spec.node_selector or {})}
    selector.update(role.node_selector or {})
    pod.node_selector = selector or None
    pod.affinity = role.affinity or pod.affinity
    pod.tolerations = role.tolerations or pod.tolerations
    pod.security_context = role.pod_security_context or pod.security_context
    pod.host_network = role.host_network if role.host_network is not None else pod.host_network
    pod.dns_config = role.dns_config or pod.dns_config
    if role.termination_grace_period_seconds is not None:
        pod.termination_grace_period_seconds = role.termination_grace_period_seconds
    pod.host_aliases = role.host_aliases or pod.host_aliases
    if role.share_process_namespace is not None:
        pod.share_process_namespace = role.share_process_namespace
    pod.runtime_class_name = role.runtime_class_name or pod.runtime_class_name
    pod.priority_class_name = role.priority_class_name or pod.priority_class_name
    if spec.image_pull_secrets:
        pod.image_pull_secrets = [{"name": name} for name in spec.image_pull_secrets]
    meta = TemplateMeta(
        labels={**base.metadata.labels, **(role.labels or {})},
        annotations={**base.metadata.annotations, **(role.annotations or {})},
    )
    # A deep copy: the view must share no list or mapping with the spec it came from.
    return PodTemplateSpec(metadata=meta, spec=pod).model_copy(deep=True)


def _main_container(pod: PodSpec, name: str) -> Container:
    """The container Spark runs in: the template's one of that name, else its first
    (Spark's rule), else a new one."""
    for candidate in pod.containers:
        if candidate.name == name:
            return candidate
    if pod.containers:
        return pod.containers[0]
    pod.containers.append(Container(name=name))
    return pod.containers[0]


def _role_env(role: SparkPodSpec) -> list[EnvVar]:
    """``env``, then the deprecated ``envVars`` and ``envSecretKeyRefs`` (sorted), then the
    variables typed Secrets announce their files by."""
    out = [e.model_copy(deep=True) for e in role.env or []]
    out += [EnvVar(name=k, value=v) for k, v in sorted((role.env_vars or {}).items())]
    out += [
        EnvVar(
            name=k,
            value_from=EnvVarSource(secret_key_ref={"name": ref.name, "key": ref.key}),
        )
        for k, ref in sorted((role.env_secret_key_refs or {}).items())
    ]
    for secret in role.secrets or []:
        if secret.secret_type in SECRET_ENV:
            variable, file = SECRET_ENV[secret.secret_type]
            out.append(EnvVar(name=variable, value=f"{secret.path.rstrip('/')}/{file}"))
    return out


def _resources(
    spec: SparkApplicationSpec, role: SparkPodSpec, current: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Requests and limits as Spark sets them: ``coreRequest`` (else ``cores``) CPU
    requested, ``coreLimit`` the CPU limit, the heap plus overhead as the memory request
    and limit, GPUs as a limit."""
    requests: dict[str, Any] = dict((current or {}).get("requests") or {})
    limits: dict[str, Any] = dict((current or {}).get("limits") or {})
    conf = spec.spark_conf or {}
    if role.core_request is not None:
        requests["cpu"] = role.core_request
    elif role.cores is not None:
        requests["cpu"] = str(role.cores)
    if role.core_limit is not None:
        limits["cpu"] = role.core_limit
    name = "driver" if isinstance(role, DriverSpec) else "executor"
    memory = role.memory or conf.get(f"spark.{name}.memory")
    if memory is not None and SPARK_MEMORY.match(memory):
        size = pod_memory_mib(spec, memory, role.memory_overhead)
        requests["memory"] = limits["memory"] = f"{size}Mi"
    if role.gpu is not None:
        limits[role.gpu.name] = role.gpu.quantity
    out = {**(current or {})}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out or None


def _container_ports(ports: Iterable[SparkPort]) -> list[ContainerPort]:
    return [
        ContainerPort(name=p.name, container_port=p.container_port, protocol=p.protocol)
        for p in ports
    ]


def _volumes(
    spec: SparkApplicationSpec, role: SparkPodSpec, current: list[Any] | None
) -> list[Any]:
    """The template's volumes, the ones of ``spec.volumes`` this role mounts (as upstream
    adds only those), and one per ConfigMap and Secret of the role."""
    out = list(current or [])
    have = {v.get("name") for v in out if isinstance(v, Mapping)}
    mounted = {m.get("name") for m in role.volume_mounts or [] if isinstance(m, Mapping)}
    for volume in spec.volumes or []:
        name = volume.get("name") if isinstance(volume, Mapping) else None
        if name in mounted and name not in have:
            out.append(volume)
            have.add(name)
    return out + [volume for volume, _path, _env in _config_volumes(spec, role)]


SPARK_CONF_DIR = "/etc/spark/conf"
HADOOP_CONF_DIR = "/etc/hadoop/conf"
"""Where upstream mounts ``sparkConfigMap`` and ``hadoopConfigMap`` (and points
``SPARK_CONF_DIR``/``HADOOP_CONF_DIR`` at)."""


def _config_volumes(
    spec: SparkApplicationSpec, role: SparkPodSpec
) -> list[tuple[dict[str, Any], str, str]]:
    """(volume, mount path, variable naming the path or "") for the ConfigMaps and Secrets
    a role gets: ``sparkConfigMap`` and ``hadoopConfigMap`` (both roles), the role's
    ``configMaps`` and ``secrets`` (each a volume ``<name>-vol``, as upstream names them)."""
    out: list[tuple[dict[str, Any], str, str]] = []
    if spec.spark_config_map:
        volume = {"name": "spark-configmap-volume", "configMap": {"name": spec.spark_config_map}}
        out.append((volume, SPARK_CONF_DIR, "SPARK_CONF_DIR"))
    if spec.hadoop_config_map:
        volume = {"name": "hadoop-configmap-volume", "configMap": {"name": spec.hadoop_config_map}}
        out.append((volume, HADOOP_CONF_DIR, "HADOOP_CONF_DIR"))
    for config_map in role.config_maps or []:
        volume = {"name": _volume_name(config_map.name), "configMap": {"name": config_map.name}}
        out.append((volume, config_map.path, ""))
    for secret in role.secrets or []:
        volume = {"name": _volume_name(secret.name), "secret": {"secretName": secret.name}}
        out.append((volume, secret.path, ""))
    return out


def _volume_name(name: str) -> str:
    """``<name>-vol``, cut to the 63 characters a volume name may have (as upstream cuts it)."""
    return f"{name}-vol"[:MAX_NAME]


# --- validation shared by SparkApplication and a ScheduledSparkApplication's template -----------


def spec_errors(spec: SparkApplicationSpec, root: str, *, namespace: str) -> list[FieldError]:
    """Everything wrong with a SparkApplication spec at ``root`` (``spec`` or
    ``spec.template``), as upstream's CRD and webhook say it, plus kubemill's checks."""
    errors = _required_errors(spec, root)
    if spec.node_selector and (spec.driver.node_selector or spec.executor.node_selector):
        errors.append(
            FieldError(
                f"{root}.nodeSelector",
                "node selectors are given both for the application and in driver/executor",
                f"keep one: {root}.nodeSelector for both pods, or "
                f"{root}.driver.nodeSelector and {root}.executor.nodeSelector",
            )
        )
    errors += _template_errors(spec, root)
    errors += _spark_conf_errors(spec.spark_conf or {}, root, namespace)
    errors += _allocation_errors(spec, root)
    errors += _mount_errors(spec, root)
    return errors


def _required_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if spec.type is None:
        errors.append(
            FieldError(
                f"{root}.type",
                "required field is missing",
                "the application's language: Scala, Java, Python or R",
            )
        )
    if not spec.spark_version:
        errors.append(
            FieldError(
                f"{root}.sparkVersion",
                "required field is missing",
                'the Spark version of the image, e.g. "4.0.0"',
            )
        )
    if not spec.main_application_file:
        errors.append(
            FieldError(
                f"{root}.mainApplicationFile",
                "required field is missing",
                "the application's jar, Python or R file, e.g. "
                "local:///opt/spark/examples/src/main/python/pi.py",
            )
        )
    if not spec.image and not (spec.driver.image and spec.executor.image):
        missing = [r for r in ("driver", "executor") if not getattr(spec, r).image]
        errors.append(
            FieldError(
                f"{root}.image",
                f"required field is missing (the {' and '.join(missing)} would have no image)",
                f"name the Spark image here, or in both {root}.driver.image and "
                f"{root}.executor.image",
            )
        )
    return errors


def _version(text: str) -> tuple[int, ...] | None:
    match = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    if match is None:
        return None
    return tuple(int(part or 0) for part in match.groups())


def _template_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    """Pod templates need Spark 3.0.0 or later (upstream's webhook)."""
    version = _version(spec.spark_version or "")
    if version is None or version >= (3, 0, 0):
        return []
    return [
        FieldError(
            f"{root}.{role}.template",
            f"pod templates need Spark 3.0.0 or later; sparkVersion is {spec.spark_version!r}",
            "use the driver/executor fields instead, or a Spark 3 image",
        )
        for role in ("driver", "executor")
        if getattr(spec, role).template is not None
    ]


def _spark_conf_errors(conf: Mapping[str, str], root: str, namespace: str) -> list[FieldError]:
    errors: list[FieldError] = []
    field = f"{root}.sparkConf"
    for key, value in conf.items():
        if key in DENIED_SPARK_CONF:
            errors.append(
                FieldError(child_path(field, key), "not allowed here", DENIED_SPARK_CONF[key])
            )
        elif key == "spark.kubernetes.namespace" and value != namespace:
            errors.append(
                FieldError(
                    child_path(field, key),
                    f"{value!r} is not the application's namespace {namespace!r}",
                    "remove it: the application runs in its own namespace",
                )
            )
    return errors


_ALLOCATION_KEYS = {
    "min": "spark.dynamicAllocation.minExecutors",
    "max": "spark.dynamicAllocation.maxExecutors",
    "initial": "spark.dynamicAllocation.initialExecutors",
    "instances": "spark.executor.instances",
}


def _allocation_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    """Dynamic allocation's bounds, merged from the field and sparkConf as upstream's
    webhook merges them, each error at the field or sparkConf key that set the value."""
    conf = spec.spark_conf or {}
    conf_field = f"{root}.sparkConf"
    errors: list[FieldError] = []
    enabled_text = conf.get("spark.dynamicAllocation.enabled")
    conf_enabled = False
    if enabled_text is not None:
        if enabled_text.strip().lower() not in ("true", "false"):
            errors.append(
                FieldError(
                    child_path(conf_field, "spark.dynamicAllocation.enabled"),
                    f"{enabled_text!r} is not a boolean",
                    'write "true" or "false"',
                )
            )
        conf_enabled = enabled_text.strip().lower() == "true"
    alloc = spec.dynamic_allocation
    field_enabled = alloc is not None and alloc.enabled
    if not field_enabled and not conf_enabled:
        return errors
    values: dict[str, tuple[int | None, str]] = {}
    for name, key in _ALLOCATION_KEYS.items():
        path = child_path(conf_field, key)
        text = conf.get(key)
        number = _conf_int(conf, key)
        if text is not None and number is None:
            errors.append(FieldError(path, f"{text!r} is not a whole number", 'e.g. "2"'))
        values[name] = (number, path)
    if alloc is not None and field_enabled:
        for name, value in (
            ("min", alloc.min_executors),
            ("max", alloc.max_executors),
            ("initial", alloc.initial_executors),
        ):
            if value is not None:
                values[name] = (value, f"{root}.dynamicAllocation.{name}Executors")
    if spec.executor.instances is not None:
        values["instances"] = (spec.executor.instances, f"{root}.executor.instances")
    low, low_path = values["min"]
    high, high_path = values["max"]
    if low is not None and low < 0:
        errors.append(FieldError(low_path, f"must be >= 0, got {low}"))
        low = None
    if high is not None and high < 1:
        errors.append(FieldError(high_path, f"must be >= 1, got {high}"))
        return errors
    if high is None:
        return errors
    if low is not None and low > high:
        errors.append(
            FieldError(
                low_path,
                f"{low} is above the maximum {high} ({high_path})",
                "make minExecutors <= maxExecutors",
            )
        )
        return errors
    starts = [(v, p) for v, p in (values["min"], values["initial"], values["instances"]) if v]
    if starts:
        first, first_path = max(starts, key=lambda item: item[0])
        if first > high:
            errors.append(
                FieldError(
                    first_path,
                    f"Spark would start {first} executors, above the maximum {high} ({high_path})",
                    "the initial executors are the largest of minExecutors, initialExecutors "
                    "and executor.instances; keep it <= maxExecutors",
                )
            )
    return errors


def _mount_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    """A volume mount must name a volume of ``spec.volumes`` (or of the role's template):
    Kubernetes refuses the pod otherwise."""
    errors: list[FieldError] = []
    declared = {v.get("name") for v in spec.volumes or [] if isinstance(v, Mapping)}
    for role_name in ("driver", "executor"):
        role: SparkPodSpec = getattr(spec, role_name)
        template_volumes = ((role.template or {}).get("spec") or {}).get("volumes") or []
        names = declared | {v.get("name") for v in template_volumes if isinstance(v, Mapping)}
        for i, mount in enumerate(role.volume_mounts or []):
            name = mount.get("name") if isinstance(mount, Mapping) else None
            if name not in names:
                errors.append(
                    FieldError(
                        f"{root}.{role_name}.volumeMounts[{i}].name",
                        f"no volume named {name!r} in {root}.volumes",
                        did_you_mean(str(name), [str(n) for n in names if n])
                        or f"declare it in {root}.volumes",
                    )
                )
    return errors


def restart_policy_refusals(policy: SparkRestartPolicy, field: str) -> list[FieldError]:
    """Retry counts under a policy type that never reads them: Never re-runs nothing,
    Always re-runs without limit."""
    kind = policy.type or SparkRestartPolicyType.NEVER
    if kind is SparkRestartPolicyType.ON_FAILURE:
        return []
    ignored = ["onFailureRetries", "onSubmissionFailureRetries"]
    if kind is SparkRestartPolicyType.NEVER:
        ignored += ["onFailureRetryInterval", "onSubmissionFailureRetryInterval"]
    written = policy.model_dump(by_alias=True, exclude_none=True)
    what = "re-runs nothing" if kind is SparkRestartPolicyType.NEVER else "re-runs without limit"
    return [
        FieldError(
            f"{field}.{name}",
            f"would be ignored: restartPolicy {kind.value} {what}",
            "set type: OnFailure to limit the re-runs, or remove it",
        )
        for name in ignored
        if name in written
    ]


def _name_errors(name: str, longest: int, what: str) -> list[FieldError]:
    """``name`` must be a DNS-1035 label short enough for the services derived from it
    (upstream's webhook checks the label; the loader checks DNS-1123 and reports that)."""
    if not name or not _DNS_1123.match(name):
        return []
    if not _DNS_1035.match(name):
        return [
            FieldError(
                "metadata.name",
                f"{name!r} must start with a letter: it names the application's services",
                "start the name with a lowercase letter",
            )
        ]
    if len(name) > longest:
        return [
            FieldError(
                "metadata.name",
                f"{name!r} is {len(name)} characters, over the {longest} allowed{what}",
                f"shorten the name to at most {longest} characters",
            )
        ]
    return []


SPARKAPPLICATION = KindApi(
    model=SparkApplication,
    plural="sparkapplications",
    short_names=("sparkapp",),
    upstream=(UPSTREAM_API_VERSION,),
    printer_columns=(
        PrinterColumn("Status", ".status.applicationState.state"),
        PrinterColumn("Attempts", ".status.executionAttempts", type="integer"),
        PrinterColumn("Start", ".status.lastSubmissionAttemptTime"),
        PrinterColumn("Finish", ".status.terminationTime"),
        AGE_COLUMN,
    ),
    schema_overrides={
        "spec": {"required": ["type", "sparkVersion", "mainApplicationFile"]},
        # Users write `pythonVersion: 3`; the model turns it into the string "3".
        "spec.pythonVersion": {"type": None, "enum": None, INT_OR_STRING: True},
    },
)
"""The SparkApplication kind's API: versions and CRD."""


# --- cron schedules -----------------------------------------------------------------------------

CRON_SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The shortcuts upstream's cron library (and Kubernetes CronJobs) accept."""

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


MAX_CRON_YEARS = 8
"""The furthest :meth:`CronSchedule.next_after` looks: every date that exists comes back
within 8 years (29 February skips at most one leap year, 1900-style)."""
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class CronError(ValueError):
    """A schedule that is not a cron expression, with what to do about it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule: the values each of the five fields allows, or an interval.

    ``every_seconds`` is set for ``@every <duration>`` (upstream's cron library accepts it)
    and the field sets are then empty.
    """

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days_of_month: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    days_of_week: frozenset[int] = frozenset()
    day_of_month_any: bool = True
    day_of_week_any: bool = True
    """Cron's rule: with both day fields restricted, a day matches either of them."""
    every_seconds: float | None = None

    def matches(self, when: datetime) -> bool:
        """Whether the schedule fires at ``when``'s minute (in ``when``'s own zone)."""
        if self.every_seconds is not None:
            raise ValueError("an @every schedule fires by interval, not on minutes")
        if when.minute not in self.minutes or when.hour not in self.hours:
            return False
        if when.month not in self.months:
            return False
        return self._day_matches(when)

    def _day_matches(self, when: datetime) -> bool:
        dom = when.day in self.days_of_month
        dow = (when.isoweekday() % 7) in self.days_of_week
        if self.day_of_month_any or self.day_of_week_any:
            return dom and dow
        return dom or dow

    def next_after(self, when: datetime) -> datetime:
        """The first time after ``when`` that the schedule fires.

        Cron fields are wall-clock times in ``when``'s own zone (pass an aware datetime in
        the schedule's time zone); ``@every`` adds its interval. Skips whole months, days
        and hours that cannot match, so a yearly schedule costs a few dozen steps.
        """
        if self.every_seconds is not None:
            return when + timedelta(seconds=self.every_seconds)
        at = when.replace(second=0, microsecond=0) + timedelta(minutes=1)
        last_year = at.year + MAX_CRON_YEARS
        while at.year <= last_year:
            if at.month not in self.months:
                year, month = (at.year + 1, 1) if at.month == 12 else (at.year, at.month + 1)
                at = at.replace(year=year, month=month, day=1, hour=0, minute=0)
            elif not self._day_matches(at):
                at = at.replace(hour=0, minute=0) + timedelta(days=1)
            elif at.hour not in self.hours:
                at = at.replace(minute=0) + timedelta(hours=1)
            elif at.minute not in self.minutes:
                at += timedelta(minutes=1)
            else:
                return at
        raise ValueError(f"the schedule does not fire within {MAX_CRON_YEARS} years")


def parse_cron(text: str) -> CronSchedule:
    """Parse a five-field cron expression, a shortcut (``@hourly``) or ``@every 5m``.

    Raises :class:`CronError` saying which field is wrong and how.
    """
    stripped = text.strip()
    if not stripped:
        raise CronError("the schedule is empty", 'e.g. "0 2 * * *" (every day at 02:00)')
    if re.match(r"^(CRON_)?TZ=", stripped):
        raise CronError(
            "a time zone inside the schedule is not allowed",
            "remove the TZ= prefix and set spec.timeZone instead",
        )
    if stripped.startswith("@every"):
        return CronSchedule(every_seconds=_every(stripped[len("@every") :].strip()))
    if stripped.startswith("@"):
        if stripped not in CRON_SHORTCUTS:
            raise CronError(
                f"unknown shortcut {stripped!r}",
                did_you_mean(stripped, CRON_SHORTCUTS)
                or f"use one of {', '.join(CRON_SHORTCUTS)} or @every <duration>",
            )
        stripped = CRON_SHORTCUTS[stripped]
    fields = stripped.split()
    if len(fields) != len(_CRON_FIELDS):
        raise CronError(
            f"{len(fields)} fields, not 5",
            'minute hour day-of-month month day-of-week, e.g. "*/15 * * * *"; '
            "or a shortcut such as @hourly",
        )
    sets = [_cron_field(value, *spec) for value, spec in zip(fields, _CRON_FIELDS, strict=True)]
    if fields[4] in ("*", "?") and min(sets[2]) > max(_MONTH_DAYS[m - 1] for m in sets[3]):
        raise CronError(
            f"day {min(sets[2])} never comes in the months {fields[3]!r}",
            "the schedule would never run; choose a day every month chosen has",
        )
    return CronSchedule(
        minutes=sets[0],
        hours=sets[1],
        days_of_month=sets[2],
        months=sets[3],
        days_of_week=sets[4],
        day_of_month_any=fields[2] in ("*", "?"),
        day_of_week_any=fields[4] in ("*", "?"),
    )


def _every(text: str) -> float:
    if not _DURATION.match(text):
        raise CronError(
            f"@every needs a duration, got {text!r}",
            "a Go duration such as 30s, 5m or 1h30m",
        )
    seconds = sum(float(n) * _SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    if seconds < 1:
        raise CronError(f"@every {text} is under a second", "schedule runs at least 1s apart")
    return seconds


def _cron_field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _cron_item(item, name, low, high, names)
    return frozenset(values)


def _cron_item(item: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    where = f"the {name} field {item!r}"
    allowed = f"{name} runs {low}-{high}" + (
        f" (or {names and next(iter(names))}...)" if names else ""
    )
    base, _, step_text = item.partition("/")
    step = 1
    if step_text:
        if not step_text.isdigit() or int(step_text) < 1:
            raise CronError(f"{where}: the step must be a whole number >= 1", allowed)
        step = int(step_text)
    if base in ("*", "?"):
        if base == "?" and name not in ("day of month", "day of week"):
            raise CronError(f"{where}: '?' is only for the day fields", "use *")
        start, end = low, high
    else:
        first, dash, last = base.partition("-")
        start = _cron_value(first, where, low, high, names, allowed)
        end = _cron_value(last, where, low, high, names, allowed) if dash else start
        if dash and end < start:
            raise CronError(f"{where}: the range runs backwards", f"write {last}-{first}")
        if step_text and not dash:
            end = high  # "5/15": from 5 to the end in steps of 15
    return set(range(start, end + 1, step))


def _cron_value(
    text: str, where: str, low: int, high: int, names: dict[str, int], allowed: str
) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise CronError(f"{where}: {text!r} is not a number", allowed)
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{where}: {value} is out of range", allowed)
    return value


_TIME_ZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$")


def check_time_zone(name: str) -> str:
    """``name`` if it is spelt as an IANA zone (``Europe/Paris``, ``UTC``) or ``Local``.

    By syntax only: whether the zone exists is the zone database's to say, which the API
    layer does not read (the substrates check it with :mod:`zoneinfo` before scheduling).
    """
    if not _TIME_ZONE.match(name) or ".." in name or len(name) > 255:
        raise ValueError(name)
    return name


# --- the ScheduledSparkApplication kind ---------------------------------------------------------


class ConcurrencyPolicy(StrEnum):
    """What a due run does while an earlier one is still running."""

    ALLOW = "Allow"
    FORBID = "Forbid"
    """Skip the run."""
    REPLACE = "Replace"
    """Stop the running one and start the new one."""


class ScheduledSparkApplicationSpec(KubeModel):
    """A SparkApplication ``template`` run on a cron ``schedule``."""

    schedule: str
    time_zone: str | None = None
    """An IANA zone the schedule is read in; unset (or ``Local``), the operator's zone."""
    template: SparkApplicationSpec
    suspend: bool | None = None
    """No new runs while true; runs already started go on."""
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    successful_run_history_limit: int = Field(default=1, ge=0)
    failed_run_history_limit: int = Field(default=1, ge=0)

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        try:
            parse_cron(value)
        except CronError as exc:
            raise _invalid(f"{value!r} is not a schedule: {exc}", exc.hint) from None
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            return check_time_zone(value)
        except ValueError:
            raise _invalid(
                f"{value!r} is not a time zone name",
                "an IANA name such as UTC, Europe/Paris or America/New_York",
            ) from None


class ScheduleState(StrEnum):
    """Whether the schedule is in force (upstream's states; NEW is the empty string)."""

    NEW = ""
    VALIDATING = "Validating"
    SCHEDULED = "Scheduled"
    FAILED_VALIDATION = "FailedValidation"


class ScheduledSparkApplicationStatus(JobStatus):
    """The runs so far and the next one."""

    last_run: datetime | None = None
    next_run: datetime | None = None
    last_run_name: str | None = None
    past_successful_run_names: list[str] | None = None
    past_failed_run_names: list[str] | None = None
    schedule_state: ScheduleState = ScheduleState.NEW
    reason: str | None = None

    @property
    def phase(self) -> str:
        """The schedule's state (``Scheduled``), or New before the first pass."""
        return self.schedule_state.value or "New"


SCHEDULED_APP_LABEL = "sparkoperator.k8s.io/scheduled-app-name"
"""Upstream's label on every run, naming the ScheduledSparkApplication it came from."""


class ScheduledSparkApplication(Job):
    """A SparkApplication run on a schedule. It has no pods of its own: each run is a
    SparkApplication named ``<name>-<unix nanoseconds>`` (:meth:`run`)."""

    KIND: ClassVar[str] = "ScheduledSparkApplication"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = ()
    REPLICA_SPECS_FIELD: ClassVar[str] = ""
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True
    SUSPEND_FIELD: ClassVar[tuple[str, ...]] = ("suspend",)

    kind: str = "ScheduledSparkApplication"
    spec: ScheduledSparkApplicationSpec
    status: ScheduledSparkApplicationStatus = Field(default_factory=ScheduledSparkApplicationStatus)

    @model_validator(mode="after")
    def _defaults(self) -> ScheduledSparkApplication:
        default_spark_spec(self.spec.template)
        return self

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """None: the runs have them."""
        return {}

    @property
    def run_policy(self) -> RunPolicy:
        """Only ``suspend`` applies (to new runs)."""
        return RunPolicy(clean_pod_policy=CleanPodPolicy.NONE, suspend=bool(self.spec.suspend))

    @property
    def cron(self) -> CronSchedule:
        """The parsed schedule (validated on load)."""
        return parse_cron(self.spec.schedule)

    def run_name(self, unix_nanos: int) -> str:
        """The name of the run due at ``unix_nanos`` (upstream's: ``<name>-<nanos>``)."""
        return f"{self.name}-{unix_nanos}"

    def run(self, unix_nanos: int) -> SparkApplication:
        """The SparkApplication of the run due at ``unix_nanos``: the template, in this
        namespace, labelled with this application's name and owned by it."""
        meta: dict[str, Any] = {
            "name": self.run_name(unix_nanos),
            "namespace": self.namespace,
            "labels": {**self.metadata.labels, SCHEDULED_APP_LABEL: self.name},
        }
        if self.metadata.uid:
            meta["ownerReferences"] = [
                {
                    "apiVersion": API_VERSION,
                    "kind": self.KIND,
                    "name": self.name,
                    "uid": self.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        return SparkApplication.model_validate(
            {"metadata": meta, "spec": self.spec.template.model_dump(by_alias=True)}
        )

    def kind_errors(self) -> list[FieldError]:
        """The template's checks at ``spec.template``, and a name short enough for the
        runs' (and their UI services') names."""
        longest = MAX_NAME - len(UI_SERVICE_SUFFIX) - RUN_NAME_DIGITS - 1
        errors = spec_errors(self.spec.template, "spec.template", namespace=self.namespace)
        return errors + _name_errors(
            self.metadata.name or "",
            longest,
            f" (a run is named <name>-<{RUN_NAME_DIGITS} digits> and has a <run>"
            f"{UI_SERVICE_SUFFIX} service)",
        )

    def refused_fields(self) -> list[FieldError]:
        """As a SparkApplication's, in the template."""
        return restart_policy_refusals(
            self.spec.template.restart_policy, "spec.template.restartPolicy"
        )


SCHEDULEDSPARKAPPLICATION = KindApi(
    model=ScheduledSparkApplication,
    plural="scheduledsparkapplications",
    short_names=("scheduledsparkapp",),
    upstream=(UPSTREAM_API_VERSION,),
    printer_columns=(
        PrinterColumn("Schedule", ".spec.schedule"),
        PrinterColumn("TimeZone", ".spec.timeZone"),
        PrinterColumn("Suspend", ".spec.suspend", type="boolean"),
        PrinterColumn("Last Run", ".status.lastRun", type="date"),
        PrinterColumn("Last Run Name", ".status.lastRunName"),
        AGE_COLUMN,
    ),
    schema_overrides={
        "spec.template": {"required": ["type", "sparkVersion", "mainApplicationFile"]},
        "spec.template.pythonVersion": {"type": None, "enum": None, INT_OR_STRING: True},
    },
)
"""The ScheduledSparkApplication kind's API: versions and CRD."""
