"""The SparkApplication kind (``kubemill.dev/v1``, field for field as the spark-operator's
``sparkoperator.k8s.io/v1beta2``, which loads unchanged): the job model, its status and
:data:`SPARKAPPLICATION`, the kind's API description. Its spec is
:mod:`kubemill.engines.spark.api.spec`, its checks :mod:`kubemill.engines.spark.api.validation`, the
pod templates it stands for :mod:`kubemill.engines.spark.api.pods`; the ScheduledSparkApplication is
:mod:`kubemill.engines.spark.api.scheduled`.

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
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from kubemill.api.base import KubeModel
from kubemill.api.common import (
    CleanPodPolicy,
    Job,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
)
from kubemill.api.crd import INT_OR_STRING
from kubemill.api.errors import FieldError
from kubemill.api.kinds import AGE_COLUMN, KindApi, PrinterColumn
from kubemill.api.runstates import TERMINAL_STATES, ApplicationStateType
from kubemill.engines.spark.api.names import (
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    MAX_NAME,
    UI_SERVICE_SUFFIX,
)
from kubemill.engines.spark.api.pods import pod_memory_mib, pod_template
from kubemill.engines.spark.api.spec import (
    DEFAULT_EXECUTOR_INSTANCES,
    DEFAULT_MEMORY,
    SPARK_REPLICA_TYPES,
    UPSTREAM_API_VERSION,
    BatchSchedulerConfiguration,
    SparkApplicationSpec,
    SparkApplicationType,
    SparkPodSpec,
    conf_int,
    default_spark_spec,
)
from kubemill.engines.spark.api.validation import name_errors, restart_policy_refusals, spec_errors

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
            instances = conf_int(self.spec.spark_conf, "spark.executor.instances")
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
        return spec_errors(self.spec, "spec", namespace=self.namespace) + self.name_errors()

    def refused_fields(self) -> list[FieldError]:
        """Retry counts that the restart policy's type never reads."""
        return restart_policy_refusals(self.spec.restart_policy, "spec.restartPolicy")

    def name_errors(self) -> list[FieldError]:
        return name_errors(self.metadata.name or "", MAX_NAME - len(UI_SERVICE_SUFFIX), "")

    def _allocation_bounds(self) -> tuple[int | None, int | None, int | None]:
        """(min, max, initial) executors: the dynamicAllocation field's when enabled there,
        else sparkConf's (the field wins key by key, as upstream merges them)."""
        conf = self.spec.spark_conf
        low = conf_int(conf, "spark.dynamicAllocation.minExecutors")
        high = conf_int(conf, "spark.dynamicAllocation.maxExecutors")
        initial = conf_int(conf, "spark.dynamicAllocation.initialExecutors")
        alloc = self.spec.dynamic_allocation
        if alloc is not None and alloc.enabled:
            low = alloc.min_executors if alloc.min_executors is not None else low
            high = alloc.max_executors if alloc.max_executors is not None else high
            initial = alloc.initial_executors if alloc.initial_executors is not None else initial
        return low, high, initial


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
