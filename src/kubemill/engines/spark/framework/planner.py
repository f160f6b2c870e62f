"""Spark: a SparkApplication becomes a driver pod that creates its own executors.

What Spark's own ``spark-submit --deploy-mode cluster`` sends to an API server (measured in
``docs/notes/spark-submit-on-kubernetes.md``), built from the spec, with no JVM: the
driver pod and ``spark.properties`` by :mod:`kubemill.engines.spark.framework.driver`, the Plan
around them (services, access, network policy, re-runs, status) here.

- **The driver**: one replica, ``Driver``, in container ``spark-kubernetes-driver``, running
  Spark's entrypoint as cluster mode does: ``driver --properties-file <conf>/spark.properties
  --class <main class> <main application file> <arguments...>`` (a Python or R application's
  class is Spark's runner for it). Spark's labels (``spark-app-selector``, ``spark-role``,
  ``spark-app-name``, ``spark-version``), its ports (``driver-rpc-port`` 7078,
  ``blockmanager`` 7079, ``spark-ui`` 4040, ``spark-connect`` 15002), its env
  (``SPARK_USER``, ``SPARK_APPLICATION_ID``, ``SPARK_DRIVER_BIND_ADDRESS`` from the pod's
  IP, ``SPARK_LOCAL_DIRS`` on an emptyDir, ``SPARK_CONF_DIR``), its pull policy and security
  context: the spark-operator runs Spark's own submission, so its driver pod is Spark's,
  and these come from the builders Spark's cluster mode here uses too
  (:mod:`kubemill.engines.spark.framework.wire`). The memory request (heap plus overhead) comes
  from the API's derived pod template.
- **The configuration**: FileSet ``<app>-spark-conf`` with ``spark.properties``: the user's
  ``sparkConf`` and ``hadoopConf``, and everything the driver needs to create the executors
  (namespace, its own pod name, ``spark.driver.host``, the executors' image, instances,
  cores, memory, labels, env, pod-name prefix ...). ``spark.driver.host`` is the driver's
  name under its headless service ``<app>-driver-svc``, from the :class:`Network`.
- **Executors** are foreign pods (:class:`ForeignPods`): the driver creates them, owned by
  its pod, labelled with the job's name and their type (``spark.kubernetes.executor.label.*``:
  the operator watches labelled pods only); the core counts them and never deletes them.
  The driver runs as ServiceAccount ``<app>-driver`` (unless the spec names one), whose
  Role lets it manage pods, services and ConfigMaps as Spark's documentation asks.
- **Outcome**: the driver decides (:func:`decided_by`), and the application runs again as a
  whole (:func:`reruns`: ``restartPolicy`` Never, OnFailure with its retries and intervals,
  Always; ``timeToLiveSeconds`` after the termination; a digest of the spec, so that a
  changed spec re-runs it). The core decides every state of the spark-operator's machine
  (:mod:`kubemill.core.application`).
- **The NetworkPolicy** ``<app>-policy``: the executors take connections from the
  application's pods only (``spark-app-selector``), as Spark's cluster mode sets it.
- **The UI**: ClusterIP service ``<app>-ui-svc`` on port 4040, as the spark-operator creates.
- **Status** (:func:`spark_status`): the core's decision named in the spark-operator's
  fields (``applicationState{state, errorMessage}``, ``submissionID``, the attempts, the
  submission and termination times), ``driverInfo`` (``webUIAddress`` is the UI service's
  cluster IP and port once the API server allocated the IP, as the spark-operator sets it),
  ``executorState`` per executor pod, ``sparkApplicationId``; :func:`recorded_run` reads
  them back for the next pass.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from kubemill.api import ApplicationStateType, ConditionType, Job, JobStatus, RestartPolicy
from kubemill.engines.spark.api.application import (
    ApplicationState,
    DriverInfo,
    ExecutorState,
    SparkApplication,
    SparkApplicationStatus,
)
from kubemill.engines.spark.api.names import DRIVER_CONTAINER
from kubemill.engines.spark.api.spec import SparkRestartPolicyType
from kubemill.engines.spark.framework.driver import (
    DRIVER,
    DRIVER_PORTS,
    EXECUTOR,
    EXECUTOR_TEMPLATE,
    application_id,
    conf_name,
    driver_account_name,
    driver_env,
    driver_host,
    driver_service_name,
    driver_template,
    executor_template_text,
    properties,
    ui_service_name,
)
from kubemill.engines.spark.framework.wire import (
    CONF_MOUNT_PATH,
    CONNECT_APP_PROTOCOL,
    CONNECT_PORT_NAME,
    LABEL_APP_SELECTOR,
    LABEL_ROLE,
    PROPERTIES,
    UI_PORT,
    UI_PORT_NAME,
    properties_text,
)
from kubemill.frameworks._common import PlanError, container_ports
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    AccessPlan,
    AccessRule,
    ExposedService,
    FilePlan,
    FileSet,
    ForeignPods,
    Network,
    NetworkPolicyPlan,
    Plan,
    ReplicaPlan,
    RerunPolicy,
    RunRecord,
    ServicePort,
    StatusView,
    decided_by,
    replica_name,
    submitted_spec,
)

DRIVER_VERBS = ("create", "get", "list", "watch", "delete", "deletecollection")
"""What Spark's documentation asks for the driver's account: it creates, watches and
deletes its executors, and a ConfigMap (and, with some confs, services) for them."""
DRIVER_RESOURCES = ("pods", "services", "configmaps")

_EXECUTOR_STATES = {
    "Pending": ExecutorState.PENDING,
    "Running": ExecutorState.RUNNING,
    "Succeeded": ExecutorState.COMPLETED,
    "Failed": ExecutorState.FAILED,
}


def driver_access(app: SparkApplication) -> AccessPlan:
    """The driver creates, watches and deletes its executors (and their ConfigMap)."""
    return AccessPlan(
        driver_account_name(app),
        (AccessRule(("",), DRIVER_RESOURCES, DRIVER_VERBS),),
        replica_types=(DRIVER,),
    )


def network_policy(app: SparkApplication) -> NetworkPolicyPlan:
    """``<app>-policy``, as Spark's cluster mode creates it: the application's executors
    take connections from the application's own pods only."""
    selector = application_id(app)
    return NetworkPolicyPlan(
        f"{app.name}-policy",
        pod_labels={LABEL_ROLE: "executor", LABEL_APP_SELECTOR: selector},
        from_labels={LABEL_APP_SELECTOR: selector},
    )


def ui_service(app: SparkApplication) -> ExposedService:
    """``<app>-ui-svc`` in front of the driver's UI: ClusterIP on 4040 unless
    ``sparkUIOptions`` says another type, port or port name."""
    options = app.spec.spark_ui_options
    port = UI_PORT
    name = UI_PORT_NAME
    kind: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    if options is not None:
        port = options.service_port or port
        name = options.service_port_name or name
        kind = options.service_type or kind
    return ExposedService(
        ui_service_name(app), DRIVER, ports=(ServicePort(name, port, UI_PORT),), type=kind
    )


SPEC_DIGEST_IGNORES = ("suspend", "timeToLiveSeconds")
"""Spec fields whose change does not re-run the application: suspending is its own
transition, and the time to live only says when the ended application goes."""


def spec_digest(app: SparkApplication) -> str:
    """A digest of what a run is made of: the spec (defaults filled in), but for
    :data:`SPEC_DIGEST_IGNORES`."""
    wire = {k: v for k, v in app.spec.to_wire().items() if k not in SPEC_DIGEST_IGNORES}
    text = json.dumps(wire, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def recorded_run(status: JobStatus) -> RunRecord:
    """The core's record of the application, from the status fields it was named in."""
    if not isinstance(status, SparkApplicationStatus):
        return RunRecord()
    return RunRecord(
        state=status.application_state.state,
        error=status.application_state.error_message or "",
        submission_attempts=status.submission_attempts,
        execution_attempts=status.execution_attempts,
        last_submission=status.last_submission_attempt_time,
        terminated=status.termination_time,
        submission_id=status.submission_id or "",
        # The submission ID carries the spec it was submitted with: no field of our own,
        # which the spark-operator's own CRD would prune.
        spec_digest=submitted_spec(status.submission_id or ""),
    )


def reruns(app: SparkApplication) -> RerunPolicy:
    """When the application runs again, from ``restartPolicy`` and ``timeToLiveSeconds``.

    Never: no re-run. OnFailure: ``onFailureRetries`` re-runs after failed runs (none when
    unset, as upstream reads it) and ``onSubmissionFailureRetries`` new submissions after
    refused ones. Always: both without limit, and after a success too. The intervals are
    the API's (5 s unless given).
    """
    policy = app.spec.restart_policy
    kind = policy.type or SparkRestartPolicyType.NEVER
    on_failure: int | None = 0
    on_submission: int | None = 0
    if kind is SparkRestartPolicyType.ALWAYS:
        on_failure = on_submission = None
    elif kind is SparkRestartPolicyType.ON_FAILURE:
        on_failure = policy.on_failure_retries or 0
        on_submission = policy.on_submission_failure_retries or 0
    ttl = app.spec.time_to_live_seconds
    return RerunPolicy(
        recorded=recorded_run,
        on_failure_retries=on_failure,
        on_failure_interval=timedelta(seconds=policy.on_failure_retry_interval or 0),
        on_submission_failure_retries=on_submission,
        on_submission_failure_interval=timedelta(
            seconds=policy.on_submission_failure_retry_interval or 0
        ),
        after_success=kind is SparkRestartPolicyType.ALWAYS,
        time_to_live=timedelta(seconds=ttl) if ttl is not None else None,
        spec_digest=spec_digest(app),
    )


def _verdict_state(status: JobStatus, driver_phase: str) -> ApplicationState:
    """The state from the common conditions, for a pass that decided no run record (a
    Plan without reruns)."""
    failed = status.condition(ConditionType.FAILED)
    if status.is_true(ConditionType.SUCCEEDED):
        return ApplicationState(state=ApplicationStateType.COMPLETED)
    if failed is not None and failed.status == "True":
        return ApplicationState(
            state=ApplicationStateType.FAILED, error_message=failed.message or None
        )
    if status.is_true(ConditionType.SUSPENDED):
        return ApplicationState(state=ApplicationStateType.SUSPENDED)
    if driver_phase == "Running":
        return ApplicationState(state=ApplicationStateType.RUNNING)
    return ApplicationState(state=ApplicationStateType.SUBMITTED)


def spark_status(view: StatusView) -> Mapping[str, object]:
    """The spark-operator's status fields, from what the core decided this pass.

    The core's run record (``view.run``) is named as it is: the state and its error, the
    submission ID, the attempts, the submission and termination times. Executors keep
    their last state once their pods are gone, as the spark-operator keeps it, until a
    new submission starts a new list.
    """
    job = view.job
    if not isinstance(job, SparkApplication):
        return {}
    drivers = {rep.name for rep in view.plan.of_type(DRIVER)}
    driver_pod = next(iter(sorted(drivers)), "")
    run = view.run
    fresh = run is not None and run.submission_id != (job.status.submission_id or "")
    executors: dict[str, ExecutorState] = {} if fresh else dict(job.status.executor_state)
    driver_phase = ""
    for pod in view.pods:
        if pod.owner and pod.owner in drivers:
            executors[pod.name] = _EXECUTOR_STATES.get(pod.phase, ExecutorState.UNKNOWN)
        elif pod.name in drivers:
            driver_phase = pod.phase
    ui = ui_service(job)
    ui_port = ui.ports[0].port
    # As the spark-operator: the UI service's cluster IP and port, once the API server gave
    # the service an IP (there is none locally, where the local planner says the address).
    ui_ip = dict(view.cluster_ips).get(ui.name)
    fields: dict[str, object] = {
        "spark_application_id": application_id(job),
        "driver_info": DriverInfo(
            pod_name=driver_pod,
            web_ui_service_name=ui.name,
            web_ui_port=ui_port,
            web_ui_address=f"{ui_ip}:{ui_port}" if ui_ip else None,
        ),
        "executor_state": executors,
    }
    if run is None:
        fields["application_state"] = _verdict_state(view.status, driver_phase)
        return fields
    fields.update(
        application_state=ApplicationState(state=run.state, error_message=run.error or None),
        submission_id=run.submission_id or None,
        submission_attempts=run.submission_attempts,
        execution_attempts=run.execution_attempts,
        last_submission_attempt_time=run.last_submission,
        termination_time=run.terminated,
    )
    return fields


class Spark:
    """The SparkApplication framework."""

    kind = SparkApplication.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of a SparkApplication: its driver and what it needs; see the module doc."""
        if not isinstance(job, SparkApplication):
            raise PlanError(f"the Spark framework plans SparkApplications, not {job.KIND}")
        template = driver_template(job, network)
        container = next(c for c in template.spec.containers if c.name == DRIVER_CONTAINER)
        driver = ReplicaPlan(
            replica_type=DRIVER,
            index=0,
            name=replica_name(job.name, DRIVER, 0),
            template=template,
            container=DRIVER_CONTAINER,
            env=tuple(driver_env(job, network, template)),
            ports=container_ports(container),
            restart_policy=RestartPolicy.NEVER,
            labels={
                LABEL_JOB_NAME: job.name,
                LABEL_REPLICA_TYPE: DRIVER.lower(),
                LABEL_REPLICA_INDEX: "0",
                LABEL_JOB_ROLE: "master",
            },
            host=driver_host(job, network),
        )
        conf = FileSet(
            conf_name(job),
            (
                FilePlan(PROPERTIES, properties_text(properties(job, network, driver.name))),
                FilePlan(EXECUTOR_TEMPLATE, executor_template_text(job)),
            ),
            mount_path=CONF_MOUNT_PATH,
            replica_types=(DRIVER,),
        )
        service_ports = tuple(
            ServicePort(
                name,
                port,
                port,
                app_protocol=CONNECT_APP_PROTOCOL if name == CONNECT_PORT_NAME else None,
            )
            for name, port in DRIVER_PORTS.items()
        )
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=(driver,),
            outcome=decided_by(DRIVER),
            files=(conf,),
            services=False,
            exposed=(
                ExposedService(
                    driver_service_name(job), DRIVER, ports=service_ports, type="Headless"
                ),
                ui_service(job),
            ),
            subdomain=driver_service_name(job),
            access=driver_access(job),
            network_policies=(network_policy(job),),
            foreign=(ForeignPods(EXECUTOR, owner_type=DRIVER),),
            status_extension=spark_status,
            reruns=reruns(job),
        )


__all__ = [
    "DRIVER_RESOURCES",
    "DRIVER_VERBS",
    "SPEC_DIGEST_IGNORES",
    "Spark",
    "driver_access",
    "network_policy",
    "recorded_run",
    "reruns",
    "spark_status",
    "spec_digest",
    "ui_service",
]
