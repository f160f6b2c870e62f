"""The ScheduledSparkApplication kind: a SparkApplication ``template`` run on a cron
``schedule`` (``kubemill.dev/v1``, field for field as the spark-operator's
``sparkoperator.k8s.io/v1beta2``), its status and :data:`SCHEDULEDSPARKAPPLICATION`.

It runs no pods of its own: each run is a SparkApplication
(:meth:`ScheduledSparkApplication.run`). Its time zone is checked by syntax here (the API
layer reads no files; the zone database is the substrate's to consult). What it does when
is the core's (:mod:`kubemill.engines.spark.schedule`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from kubemill.api.base import KubeModel, invalid
from kubemill.api.common import API_VERSION, CleanPodPolicy, Job, JobStatus, ReplicaSpec, RunPolicy
from kubemill.api.crd import INT_OR_STRING
from kubemill.api.cron import CronError, CronSchedule, check_time_zone, parse_cron
from kubemill.api.errors import FieldError
from kubemill.api.kinds import AGE_COLUMN, KindApi, PrinterColumn
from kubemill.engines.spark.api.application import SparkApplication
from kubemill.engines.spark.api.names import MAX_NAME, UI_SERVICE_SUFFIX
from kubemill.engines.spark.api.spec import (
    UPSTREAM_API_VERSION,
    SparkApplicationSpec,
    default_spark_spec,
)
from kubemill.engines.spark.api.validation import name_errors, restart_policy_refusals, spec_errors

RUN_NAME_DIGITS = 19
"""A scheduled run is named ``<name>-<unix nanoseconds>``: 19 digits until the year 2286."""


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
            raise invalid(f"{value!r} is not a schedule: {exc}", exc.hint) from None
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            return check_time_zone(value)
        except ValueError:
            raise invalid(
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
        return errors + name_errors(
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
