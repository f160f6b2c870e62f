"""A SparkApplication's driver pod, as Spark's own ``spark-submit --deploy-mode cluster``
builds it (the spark-operator runs Spark's submission, so its driver pod is Spark's): the
names Spark and the spark-operator give the application's objects, ``spark.properties``
(:func:`properties`), the driver's arguments, labels, env, resources and local directory
(:func:`driver_template`, :func:`driver_env`), and the executors' pod template file.
The builders shared with Spark's cluster mode are :mod:`kubemill.engines.spark.framework.wire`'s;
the Plan around the driver is :mod:`kubemill.engines.spark.framework.planner`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from kubemill.api import ContainerPort, EnvVar, PodTemplateSpec
from kubemill.engines.spark.api.application import SparkApplication
from kubemill.engines.spark.api.names import (
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    MAX_NAME,
    UI_SERVICE_SUFFIX,
)
from kubemill.engines.spark.api.pods import memory_overhead_factor
from kubemill.engines.spark.api.spec import SparkApplicationType
from kubemill.engines.spark.framework.wire import (
    BLOCK_MANAGER_PORT,
    CONF_MOUNT_PATH,
    DRIVER_PORT,
    DRIVER_SECURITY_CONTEXT,
    LABEL_APP_NAME,
    LABEL_APP_SELECTOR,
    LABEL_ROLE,
    LABEL_VERSION,
    LOCAL_DIR_VOLUME,
    PYTHON_RUNNER,
    R_RUNNER,
    UI_PORT,
    DriverPodConf,
    SparkConfError,
    driver_pod_conf,
    driver_ports,
    local_dir,
)
from kubemill.engines.spark.framework.wire import container_ports as spark_container_ports
from kubemill.engines.spark.framework.wire import driver_args as spark_driver_args
from kubemill.engines.spark.framework.wire import driver_env as spark_driver_env
from kubemill.engines.spark.framework.wire import driver_memory_mib as spark_driver_memory_mib
from kubemill.frameworks._common import PlanError
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_REPLICA_TYPE,
    Network,
    replica_name,
)

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


def driver_template(app: SparkApplication, network: Network) -> PodTemplateSpec:
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
