"""Spark's registry records: the SparkApplication engine (a driver that creates its own
executors, run again as a whole on failure: the re-run lifecycle; locally by pyspark's
``spark-submit``) and the ScheduledSparkApplication controller, which creates
SparkApplications on a cron schedule by the rules of :mod:`kubemill.engines.spark.schedule`."""

from kubemill.core import RERUN
from kubemill.engines.base import Controller, Engine, LocalSupport, OperatorGrant
from kubemill.engines.spark.api.application import SPARKAPPLICATION
from kubemill.engines.spark.api.scheduled import SCHEDULEDSPARKAPPLICATION
from kubemill.engines.spark.framework.planner import DRIVER_RESOURCES, DRIVER_VERBS, Spark
from kubemill.engines.spark.local import LOCAL_ENV, local_plan, refusals
from kubemill.engines.spark.schedule import SCHEDULED_SPARK

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
)

SCHEDULE = Controller(
    SCHEDULEDSPARKAPPLICATION,
    "SparkApplication",
    "Spark on a cron schedule: a SparkApplication per run, under a concurrency policy "
    "and history limits (the spark-operator's ScheduledSparkApplication)",
    SCHEDULED_SPARK,
    # Locally a detached loop asks the same core and submits its runs as local jobs.
    local=LocalSupport(),
)

__all__ = ["ENGINE", "SCHEDULE"]
