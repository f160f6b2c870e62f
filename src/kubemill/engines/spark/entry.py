"""Spark's registry records: the SparkApplication engine (a driver that creates its own
executors, run again as a whole on failure: the re-run lifecycle; locally by pyspark's
``spark-submit``) and the ScheduledSparkApplication controller, which creates
SparkApplications on a cron schedule by the rules of :mod:`kubemill.engines.spark.schedule`."""

from datetime import datetime

from kubemill.api import Job
from kubemill.core import RERUN
from kubemill.engines.base import (
    ChildPods,
    Controller,
    ControllerListing,
    Engine,
    LocalSupport,
    OperatorGrant,
)
from kubemill.engines.spark.api.application import (
    SPARKAPPLICATION,
    SparkApplication,
    SparkApplicationStatus,
)
from kubemill.engines.spark.api.scheduled import (
    SCHEDULEDSPARKAPPLICATION,
    ScheduledSparkApplication,
)
from kubemill.engines.spark.framework.driver import application_id
from kubemill.engines.spark.framework.planner import DRIVER_RESOURCES, DRIVER_VERBS, Spark
from kubemill.engines.spark.framework.wire import LABEL_APP_SELECTOR, LABEL_ROLE
from kubemill.engines.spark.local import LOCAL_ENV, local_plan, refusals
from kubemill.engines.spark.schedule import SCHEDULED_SPARK


def _web_ui(job: Job) -> str:
    """The driver's UI, once the driver has said where it serves."""
    status = job.status
    if isinstance(status, SparkApplicationStatus):
        return status.driver_info.web_ui_address or ""
    return ""


def _executors(job: Job) -> str:
    """The executors the driver creates, labelled as Spark labels them."""
    if not isinstance(job, SparkApplication):
        raise TypeError(f"{job.kind} {job.name} is no SparkApplication")
    return f"{LABEL_APP_SELECTOR}={application_id(job)},{LABEL_ROLE}=executor"


EXECUTORS = ChildPods(
    "Executors",
    _executors,
    local=(
        "Locally the executors are threads of the driver's JVM (local[N]), or, in"
        " standalone mode, JVMs the Worker replicas start (their processes are the"
        " Workers' above)."
    ),
)


ENGINE = Engine(
    SPARKAPPLICATION,
    Spark(),
    "Spark: a Driver that creates its own Executors (cluster mode, the spark-operator's "
    "SparkApplication)",
    grants=(
        OperatorGrant(
            ("",),
            ("configmaps",),
            ("list", "watch", "create", "update"),
            "a Spark application gets its spark.properties in a ConfigMap",
        ),
        OperatorGrant(
            ("",),
            ("serviceaccounts",),
            ("list", "watch", "create", "delete"),
            "a Spark driver runs as an account of its own",
        ),
        OperatorGrant(
            ("rbac.authorization.k8s.io",),
            ("roles", "rolebindings"),
            ("list", "watch", "create", "delete"),
            "a Spark driver's Role lets it create and watch its executors",
        ),
        OperatorGrant(
            ("networking.k8s.io",),
            ("networkpolicies",),
            ("list", "watch", "create"),
            "a Spark application's executors take connections from its own pods only",
        ),
        # RBAC lets the operator grant only what it holds itself: the driver manages its
        # executors' pods, and the ConfigMaps (and services) Spark makes for them.
        *(
            OperatorGrant(
                ("",),
                (resource,),
                DRIVER_VERBS,
                f"a Spark driver's Role lets it manage its executors' {resource}",
                delegated=True,
            )
            for resource in DRIVER_RESOURCES
        ),
    ),
    lifecycle=RERUN,
    restarts=False,
    local=LocalSupport(env=LOCAL_ENV, replan=local_plan, refusals=refusals),
    web_ui=_web_ui,
    child_pods=EXECUTORS,
)


def _schedule(job: Job) -> ScheduledSparkApplication:
    if not isinstance(job, ScheduledSparkApplication):
        raise TypeError(f"{job.kind} {job.name} is no ScheduledSparkApplication")
    return job


def _state(job: Job) -> str:
    """``Suspended`` while ``spec.suspend`` keeps new runs from starting (upstream's state
    stays ``Scheduled`` then, with ``suspend`` in a column of its own, which the job list
    has not), else the schedule's state (``New`` before its first pass, ``Scheduled``,
    ``FailedValidation``)."""
    schedule = _schedule(job)
    word = schedule.status.phase
    return "Suspended" if schedule.spec.suspend and word in ("New", "Scheduled") else word


def _last_run(job: Job) -> tuple[str, datetime | None]:
    status = _schedule(job).status
    return status.last_run_name or "", status.last_run


def _columns(job: Job) -> tuple[tuple[str, str | datetime | None], ...]:
    """Upstream's printer columns."""
    schedule = _schedule(job)
    spec, status = schedule.spec, schedule.status
    zone = f" ({spec.time_zone})" if spec.time_zone else ""
    return (
        ("SCHEDULE", f"{spec.schedule}{zone}"),
        ("SUSPEND", "true" if spec.suspend else "false"),
        ("LAST RUN", status.last_run),
        ("LAST RUN NAME", status.last_run_name or "-"),
    )


SCHEDULE = Controller(
    SCHEDULEDSPARKAPPLICATION,
    "SparkApplication",
    "Spark on a cron schedule: a SparkApplication per run, under a concurrency policy "
    "and history limits (the spark-operator's ScheduledSparkApplication)",
    SCHEDULED_SPARK,
    # Locally a detached loop asks the same core and submits its runs as local jobs.
    local=LocalSupport(),
    listing=ControllerListing(state=_state, last_run=_last_run, columns=_columns),
)

__all__ = ["ENGINE", "SCHEDULE"]
