"""Job kinds as typed models: shared vocabulary, each kind's API, loading and validation.

Loading takes a kind table (:class:`KindTable`); :mod:`kubemill.kinds` binds it to the
registered kinds, so load manifests with ``kubemill.kinds.load``/``load_one``.

The public surface of the API layer; everything else in this package is private.

The names below load on first use, not when a submodule is imported: importing
``kubemill.api.spark_submit`` (as ``kubemill spark-submit``'s fast path does) does not
load the job models (pydantic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.api.common import (
        API_VERSION,
        GROUP,
        STOP_ANNOTATION,
        VERSION,
        CleanPodPolicy,
        Condition,
        ConditionType,
        Job,
        JobStatus,
        Metric,
        ReplicaSpec,
        ReplicaStatus,
        RestartPolicy,
        RunPolicy,
        SchedulingPolicy,
        TrainerStatus,
    )
    from kubemill.api.cron import CronError, CronSchedule, parse_cron
    from kubemill.api.errors import FieldError, ManifestError
    from kubemill.api.kinds import ApiVersion, ClusterOptions, KindApi, KindTable
    from kubemill.api.kube import (
        Container,
        ContainerPort,
        EnvVar,
        EnvVarSource,
        ObjectFieldSelector,
        ObjectMeta,
        PodSpec,
        PodTemplateSpec,
    )
    from kubemill.api.runstates import ApplicationStateType
    from kubemill.api.spark import (
        SPARKAPPLICATION,
        ApplicationState,
        DriverInfo,
        ExecutorState,
        SparkApplication,
        SparkApplicationStatus,
    )
    from kubemill.api.spark_argv import (
        SparkMaster,
        SparkSubmitError,
        SubmitArguments,
        parse_spark_master,
        parse_spark_properties,
        parse_submit_arguments,
    )
    from kubemill.api.spark_scheduled import (
        SCHEDULEDSPARKAPPLICATION,
        ConcurrencyPolicy,
        ScheduledSparkApplication,
        ScheduledSparkApplicationSpec,
        ScheduledSparkApplicationStatus,
        ScheduleState,
    )
    from kubemill.api.spark_spec import (
        SPARK_REPLICA_TYPES,
        DeployMode,
        DriverSpec,
        ExecutorSpec,
        SparkApplicationSpec,
        SparkApplicationType,
        SparkPodSpec,
        SparkRestartPolicy,
        SparkRestartPolicyType,
    )
    from kubemill.api.spark_submit import SparkSubmit, parse_spark_submit, submission_of

__all__ = [
    "API_VERSION",
    "GROUP",
    "SCHEDULEDSPARKAPPLICATION",
    "SPARKAPPLICATION",
    "SPARK_REPLICA_TYPES",
    "STOP_ANNOTATION",
    "VERSION",
    "ApiVersion",
    "ApplicationState",
    "ApplicationStateType",
    "CleanPodPolicy",
    "ClusterOptions",
    "ConcurrencyPolicy",
    "Condition",
    "ConditionType",
    "Container",
    "ContainerPort",
    "CronError",
    "CronSchedule",
    "DeployMode",
    "DriverInfo",
    "DriverSpec",
    "EnvVar",
    "EnvVarSource",
    "ExecutorSpec",
    "ExecutorState",
    "FieldError",
    "Job",
    "JobStatus",
    "KindApi",
    "KindTable",
    "ManifestError",
    "Metric",
    "ObjectFieldSelector",
    "ObjectMeta",
    "PodSpec",
    "PodTemplateSpec",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "ScheduleState",
    "ScheduledSparkApplication",
    "ScheduledSparkApplicationSpec",
    "ScheduledSparkApplicationStatus",
    "SchedulingPolicy",
    "SparkApplication",
    "SparkApplicationSpec",
    "SparkApplicationStatus",
    "SparkApplicationType",
    "SparkMaster",
    "SparkPodSpec",
    "SparkRestartPolicy",
    "SparkRestartPolicyType",
    "SparkSubmit",
    "SparkSubmitError",
    "SubmitArguments",
    "TrainerStatus",
    "parse_cron",
    "parse_spark_master",
    "parse_spark_properties",
    "parse_spark_submit",
    "parse_submit_arguments",
    "submission_of",
]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A public name, from the submodule that holds it (loaded now, once)."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.api import (
            common,
            cron,
            errors,
            kinds,
            kube,
            runstates,
            spark,
            spark_argv,
            spark_scheduled,
            spark_spec,
            spark_submit,
        )

        for module in (
            common,
            cron,
            errors,
            kinds,
            kube,
            runstates,
            spark,
            spark_argv,
            spark_scheduled,
            spark_spec,
            spark_submit,
        ):
            if hasattr(module, name):
                value = getattr(module, name)
                globals()[name] = value
                return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
