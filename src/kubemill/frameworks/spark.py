"""Spark: a SparkApplication becomes a driver pod that creates its own executors.

What Spark's own ``spark-submit --deploy-mode cluster`` sends to an API server (measured in
``shared/notes/spark-submit-on-kubernetes.md``), built here from the spec, with no JVM:

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
  (:mod:`kubemill.frameworks.spark_wire`). The memory request (heap plus overhead) comes
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
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, Literal

from kubemill.api import (
    ApplicationState,
    ApplicationStateType,
    ConditionType,
    ContainerPort,
    DriverInfo,
    EnvVar,
    ExecutorState,
    Job,
    JobStatus,
    PodTemplateSpec,
    RestartPolicy,
    SparkApplication,
    SparkApplicationType,
)
from kubemill.api.spark import SparkApplicationStatus
from kubemill.api.spark_names import (
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    MAX_NAME,
    UI_SERVICE_SUFFIX,
)
from kubemill.api.spark_pods import memory_overhead_factor
from kubemill.api.spark_spec import SparkRestartPolicyType
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
from kubemill.frameworks.spark_wire import (
    BLOCK_MANAGER_PORT,
    CONF_MOUNT_PATH,
    CONNECT_APP_PROTOCOL,
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
    UI_PORT_NAME,
    DriverPodConf,
    SparkConfError,
    driver_pod_conf,
    driver_ports,
    local_dir,
    properties_text,
)
from kubemill.frameworks.spark_wire import (
    container_ports as spark_container_ports,
)
from kubemill.frameworks.spark_wire import driver_args as spark_driver_args
from kubemill.frameworks.spark_wire import driver_env as spark_driver_env
from kubemill.frameworks.spark_wire import driver_memory_mib as spark_driver_memory_mib

DRIVER = "Driver"
EXECUTOR = "Executor"
EXECUTOR_TEMPLATE = "executor-pod-template.yaml"
"""The executors' pod template (JSON, which YAML reads): what the executor spec asks of
their pods beyond Spark's confs (volumes, tolerations, affinity ...), Spark 3.0 and later."""
OPERATOR_USER = "spark"
"""``SPARK_USER`` of an application without ``proxyUser``: the spark-operator's image runs
spark-submit as ``spark`` (uid 185, Spark's images' user), whose name Spark's client
passes on; with ``proxyUser`` it submits as that user."""
DEFAULT_MASTER = "k8s://https://kubernetes.default.svc"
"""The API server as a pod reaches it (the spark-operator's default too)."""

DRIVER_PORTS = dict(driver_ports())
"""The driver's named ports, as Spark's cluster mode declares them (Spark Connect's too)."""
TERMINATION_MESSAGE_POLICY = "FallbackToLogsOnError"

LABEL_OPERATOR_APP_NAME = "sparkoperator.k8s.io/app-name"
"""The spark-operator's own label on the pods of an application."""
LABEL_LAUNCHED_BY_OPERATOR = "sparkoperator.k8s.io/launched-by-spark-operator"
"""The spark-operator's label (``"true"``) on the driver and executors it launched, which
tools select Spark pods by."""

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


def conf_name(app: SparkApplication) -> str:
    """The ConfigMap with ``spark.properties``."""
    return f"{app.name}-spark-conf"


def ui_service_name(app: SparkApplication) -> str:
    """``<app>-ui-svc`` (the spark-operator's name; the API keeps the name short enough)."""
    return f"{app.name}{UI_SERVICE_SUFFIX}"


def driver_account_name(app: SparkApplication) -> str:
    """The driver's ServiceAccount, Role and RoleBinding."""
    return f"{app.name}-driver"


def application_id(app: SparkApplication) -> str:
    """``spark-<32 hex>``, as Spark's ids look: from the object's uid when it has one (one
    id per object), else from its namespace and name (``render`` of a file)."""
    uid = (app.metadata.uid or "").replace("-", "").lower()
    if len(uid) == 32 and all(c in "0123456789abcdef" for c in uid):
        return f"spark-{uid}"
    digest = hashlib.sha256(f"{app.namespace}/{app.name}".encode()).hexdigest()
    return f"spark-{digest[:32]}"


def driver_service_name(app: SparkApplication) -> str:
    """``<app>-driver-svc``; a name too long for a Service falls back to the application
    id's, as Spark falls back to a generated one."""
    name = f"{app.name}-driver-svc"
    if len(name) <= MAX_NAME:
        return name
    return f"spark-{application_id(app)[6:22]}-driver-svc"


def main_class(app: SparkApplication) -> str:
    """The class Spark runs: the spec's, or Spark's runner for Python and R."""
    if app.app_type is SparkApplicationType.PYTHON:
        return PYTHON_RUNNER
    if app.app_type is SparkApplicationType.R:
        return R_RUNNER
    if not app.spec.main_class:
        raise PlanError(
            f"SparkApplication {app.name}: a {app.app_type.value} application needs "
            "spec.mainClass; run `kubemill validate`"
        )
    return app.spec.main_class


def driver_args(app: SparkApplication, network: Network) -> list[str]:
    """Spark's driver entrypoint, as cluster mode calls it."""
    conf_dir = network.files_path(conf_name(app), CONF_MOUNT_PATH)
    if not app.spec.main_application_file:
        raise PlanError(
            f"SparkApplication {app.name}: spec.mainApplicationFile is required; "
            "run `kubemill validate`"
        )
    return spark_driver_args(
        main_class(app), app.spec.main_application_file, app.spec.arguments or [], conf_dir
    )


def driver_local_dir(app: SparkApplication) -> str:
    """``/var/data/spark-<uuid>`` as Spark names it, the UUID being the application id's
    hex (Spark draws one per submission; the core is pure, and one per object will do)."""
    hex32 = application_id(app).removeprefix("spark-")
    uuid = "-".join((hex32[:8], hex32[8:12], hex32[12:16], hex32[16:20], hex32[20:]))
    return local_dir(uuid)


def spark_labels(app: SparkApplication, role: str) -> dict[str, str]:
    """The labels Spark gives its pods (the driver's select it in the driver service)."""
    return {
        LABEL_APP_SELECTOR: application_id(app),
        LABEL_ROLE: role,
        LABEL_APP_NAME: app.name,
        LABEL_VERSION: app.spec.spark_version or "",
        LABEL_OPERATOR_APP_NAME: app.name,
        LABEL_LAUNCHED_BY_OPERATOR: "true",
    }


def driver_host(app: SparkApplication, network: Network) -> str:
    """The driver's DNS name under its headless service: the executors connect there."""
    return network.host_name(DRIVER, 0, subdomain=driver_service_name(app))


def _join(items: Iterable[str]) -> str:
    return ",".join(items)


def properties(app: SparkApplication, network: Network, driver_pod: str) -> dict[str, str]:
    """Every Spark conf of the application, as ``spark.properties`` holds it.

    kubemill's own keys come last and win over ``sparkConf`` (the API refuses the keys a
    field owns, e.g. ``spark.kubernetes.container.image``).
    """
    spec = app.spec
    out = dict(spec.spark_conf or {})
    out.update({f"spark.hadoop.{k}": v for k, v in (spec.hadoop_conf or {}).items()})
    out.update(
        {
            "spark.app.name": app.name,
            "spark.app.id": application_id(app),
            "spark.master": (
                f"k8s://{spec.driver.kubernetes_master}"
                if spec.driver.kubernetes_master
                and not spec.driver.kubernetes_master.startswith("k8s://")
                else spec.driver.kubernetes_master or DEFAULT_MASTER
            ),
            "spark.submit.deployMode": "cluster",
            "spark.kubernetes.submitInDriver": "true",
            "spark.kubernetes.namespace": app.namespace,
            "spark.kubernetes.driver.pod.name": driver_pod,
            "spark.driver.host": driver_host(app, network),
            "spark.driver.port": str(DRIVER_PORT),
            "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
            "spark.ui.port": str(UI_PORT),
            "spark.kubernetes.resource.type": (
                "java" if app.app_type.jvm else app.app_type.value.lower()
            ),
            "spark.kubernetes.memoryOverheadFactor": str(memory_overhead_factor(spec)),
            "spark.kubernetes.executor.podNamePrefix": app.name,
            "spark.kubernetes.executor.podTemplateFile": (
                f"{network.files_path(conf_name(app), CONF_MOUNT_PATH)}/{EXECUTOR_TEMPLATE}"
            ),
            "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        }
    )
    image = spec.executor.image or spec.image
    if image:
        out["spark.kubernetes.executor.container.image"] = image
        out["spark.kubernetes.container.image"] = spec.image or image
    if spec.image_pull_policy:
        out["spark.kubernetes.container.image.pullPolicy"] = spec.image_pull_policy
    if spec.image_pull_secrets:
        out["spark.kubernetes.container.image.pullSecrets"] = _join(spec.image_pull_secrets)
    for role, name in ((spec.driver, "driver"), (spec.executor, "executor")):
        if role.cores is not None:
            out[f"spark.{name}.cores"] = str(role.cores)
        if role.memory is not None:
            out[f"spark.{name}.memory"] = role.memory
        if role.memory_overhead is not None:
            out[f"spark.{name}.memoryOverhead"] = role.memory_overhead
        if role.java_options:
            out[f"spark.{name}.extraJavaOptions"] = role.java_options
    if spec.python_version is not None:
        # Spark 2.4's switch between Python 2 and 3 (later Sparks run Python 3 only).
        out["spark.kubernetes.pyspark.pythonVersion"] = spec.python_version
    executor = spec.executor
    if not app.dynamic_allocation_enabled:
        out["spark.executor.instances"] = str(app.executor_instances)
    if executor.core_request is not None:
        out["spark.kubernetes.executor.request.cores"] = executor.core_request
    if executor.core_limit is not None:
        out["spark.kubernetes.executor.limit.cores"] = executor.core_limit
    if executor.service_account:
        out["spark.kubernetes.authenticate.executor.serviceAccountName"] = executor.service_account
    if spec.driver.service_account:
        # As the spark-operator passes it (kubemill's own driver account is no conf: Spark's
        # client never named it).
        out["spark.kubernetes.authenticate.driver.serviceAccountName"] = spec.driver.service_account
    if executor.delete_on_termination is not None:
        out["spark.kubernetes.executor.deleteOnTermination"] = str(
            executor.delete_on_termination
        ).lower()
    for key, value in sorted((executor.labels or {}).items()):
        out[f"spark.kubernetes.executor.label.{key}"] = value
    # The operator watches pods labelled with their job's name only (a server-side
    # selector): the executors carry it, and their type, to be seen and counted.
    out[f"spark.kubernetes.executor.label.{LABEL_JOB_NAME}"] = app.name
    out[f"spark.kubernetes.executor.label.{LABEL_REPLICA_TYPE}"] = EXECUTOR.lower()
    # As the spark-operator labels the executors it launches.
    out[f"spark.kubernetes.executor.label.{LABEL_OPERATOR_APP_NAME}"] = app.name
    out[f"spark.kubernetes.executor.label.{LABEL_LAUNCHED_BY_OPERATOR}"] = "true"
    for key, value in sorted((executor.annotations or {}).items()):
        out[f"spark.kubernetes.executor.annotation.{key}"] = value
    for key, value in sorted((executor.node_selector or spec.node_selector or {}).items()):
        out[f"spark.kubernetes.executor.node.selector.{key}"] = value
    for variable in executor.env or []:
        if variable.value is not None and variable.value_from is None:
            out[f"spark.executorEnv.{variable.name}"] = variable.value
    for key, value in sorted((executor.env_vars or {}).items()):
        out[f"spark.executorEnv.{key}"] = value
    alloc = spec.dynamic_allocation
    if alloc is not None and alloc.enabled:
        out["spark.dynamicAllocation.enabled"] = "true"
        bounds: tuple[tuple[str, int | bool | None], ...] = (
            ("initialExecutors", alloc.initial_executors),
            ("minExecutors", alloc.min_executors),
            ("maxExecutors", alloc.max_executors),
            ("shuffleTracking.enabled", alloc.shuffle_tracking_enabled),
            ("shuffleTracking.timeout", alloc.shuffle_tracking_timeout),
        )
        for field, bound in bounds:
            if bound is not None:
                text = str(bound).lower() if isinstance(bound, bool) else str(bound)
                out[f"spark.dynamicAllocation.{field}"] = text
    deps = spec.deps
    jars = list(deps.jars or []) if deps is not None else []
    if app.app_type.jvm and spec.main_application_file:
        jars.append(spec.main_application_file)
    if jars:
        out["spark.jars"] = _join(jars)
    if deps is not None:
        for key, values in (
            ("spark.files", deps.files),
            ("spark.submit.pyFiles", deps.py_files),
            ("spark.jars.packages", deps.packages),
            ("spark.jars.excludes", deps.exclude_packages),
            ("spark.jars.repositories", deps.repositories),
            ("spark.archives", deps.archives),
        ):
            if values:
                out[key] = _join(values)
    # Spark's submission always names the Python files, even none.
    out.setdefault("spark.submit.pyFiles", "")
    return out


def executor_template_text(app: SparkApplication) -> str:
    """The executors' derived pod template, as the file Spark reads (sorted JSON)."""
    template = app.replica_specs[EXECUTOR].template.to_wire()
    return json.dumps(template, sort_keys=True, indent=1) + "\n"


def driver_shape(app: SparkApplication, network: Network) -> DriverPodConf:
    """What Spark's client makes of the application's confs in the driver pod: the
    spark-operator hands ``sparkConf`` (and its fields, as confs) to spark-submit, so
    ``spark.kubernetes.driver.label.*``, ``driverEnv.*``, node selectors, core requests
    and limits, pull secrets and the like shape its driver pod."""
    return driver_pod_conf(properties(app, network, replica_name(app.name, DRIVER, 0)))


def driver_memory(app: SparkApplication, network: Network) -> str:
    """The driver pod's memory as Spark's client requests it, from the application's confs."""
    conf = properties(app, network, replica_name(app.name, DRIVER, 0))
    try:
        mib = spark_driver_memory_mib(conf, default_factor=str(memory_overhead_factor(app.spec)))
    except SparkConfError as exc:
        raise PlanError(
            f"SparkApplication {app.name}: spec.sparkConf.{exc.key}: {exc.message}"
        ) from None
    return f"{mib}Mi"


def _driver_template(app: SparkApplication, network: Network) -> PodTemplateSpec:
    """The derived driver template with what Spark's cluster mode adds (the spark-operator
    runs it, so its driver pod is Spark's): args, labels, annotations, ports, resources, the
    pull policy and secrets, node selector, security context, a local directory; and the
    log's tail as the message of a failed run. What the spec's fields say wins over
    ``sparkConf``, as the spark-operator's confs from fields follow the user's."""
    template = app.replica_specs[DRIVER].template.model_copy(deep=True)
    shape = driver_shape(app, network)
    pod = template.spec
    container = next(c for c in pod.containers if c.name == DRIVER_CONTAINER)
    container.args = driver_args(app, network)
    # A failed driver's last log lines (the exception) become its terminated.message, which
    # the core puts in the failure (applicationState.errorMessage).
    container.termination_message_policy = container.termination_message_policy or (
        TERMINATION_MESSAGE_POLICY
    )
    container.image_pull_policy = container.image_pull_policy or shape.pull_policy
    if container.security_context is None:
        # Spark's default; a context the spec gives is left as it is (it may be privileged,
        # which refuses allowPrivilegeEscalation: false).
        container.security_context = dict(DRIVER_SECURITY_CONTEXT)
    resources = dict(container.resources or {})
    requests = dict(resources.get("requests") or {})
    limits = dict(resources.get("limits") or {})
    requests["cpu"] = app.spec.driver.core_request or shape.cpu_request
    cpu_limit = app.spec.driver.core_limit or shape.cpu_limit
    if cpu_limit:
        limits["cpu"] = cpu_limit
    requests["memory"] = limits["memory"] = driver_memory(app, network)
    container.resources = {**resources, "requests": requests, "limits": limits}
    have = {p.name for p in container.ports or []}
    container.ports = list(container.ports or []) + [
        ContainerPort.model_validate(port)
        for port in spark_container_ports(DRIVER_PORTS.items())
        if port["name"] not in have
    ]
    container.volume_mounts = [
        *(container.volume_mounts or []),
        {"name": LOCAL_DIR_VOLUME, "mountPath": driver_local_dir(app)},
    ]
    local_dirs: dict[str, Any] = {"medium": "Memory"} if shape.memory_local_dirs else {}
    pod.volumes = [*(pod.volumes or []), {"name": LOCAL_DIR_VOLUME, "emptyDir": local_dirs}]
    if not pod.image_pull_secrets and shape.pull_secrets:
        pod.image_pull_secrets = [{"name": name} for name in shape.pull_secrets]
    if shape.node_selector:
        pod.node_selector = {**shape.node_selector, **(pod.node_selector or {})}
    pod.service_account_name = pod.service_account_name or shape.service_account
    template.metadata.labels = {
        **shape.labels,
        **template.metadata.labels,
        **spark_labels(app, "driver"),
    }
    template.metadata.annotations = {**shape.annotations, **template.metadata.annotations}
    return template


def driver_env(app: SparkApplication, network: Network, template: PodTemplateSpec) -> list[EnvVar]:
    """What Spark's cluster mode sets in the driver container (what the user set stays):
    its own variables and ``spark.kubernetes.driverEnv.*``."""
    container = next(c for c in template.spec.containers if c.name == DRIVER_CONTAINER)
    have = {e.name for e in container.env or []}
    out = spark_driver_env(
        user=app.spec.proxy_user or OPERATOR_USER,
        app_id=application_id(app),
        local_dirs=driver_local_dir(app),
        conf_dir=network.files_path(conf_name(app), CONF_MOUNT_PATH),
        extra=driver_shape(app, network).env,
    )
    return [EnvVar.model_validate(e) for e in out if e["name"] not in have]


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
        template = _driver_template(job, network)
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
    "BLOCK_MANAGER_PORT",
    "CONF_MOUNT_PATH",
    "DRIVER",
    "DRIVER_CONTAINER",
    "DRIVER_PORT",
    "DRIVER_RESOURCES",
    "DRIVER_VERBS",
    "EXECUTOR",
    "EXECUTOR_CONTAINER",
    "EXECUTOR_TEMPLATE",
    "LABEL_APP_NAME",
    "LABEL_APP_SELECTOR",
    "LABEL_ROLE",
    "LABEL_VERSION",
    "LOCAL_DIR_VOLUME",
    "PROPERTIES",
    "PYTHON_RUNNER",
    "R_RUNNER",
    "UI_PORT",
    "UI_PORT_NAME",
    "Spark",
    "application_id",
    "conf_name",
    "driver_access",
    "driver_account_name",
    "driver_args",
    "driver_host",
    "driver_service_name",
    "executor_template_text",
    "network_policy",
    "properties",
    "properties_text",
    "recorded_run",
    "reruns",
    "spark_labels",
    "spark_status",
    "spec_digest",
    "ui_service",
    "ui_service_name",
]
