"""Spark on one machine: a SparkApplication's Plan as the local substrate runs it.

On Kubernetes the driver pod runs the image's entrypoint (``driver --properties-file ...``)
and creates its executors as pods (:mod:`kubemill.engines.spark.framework.planner`). Locally there
are no images and no API server, so :func:`local_plan` (the engine's ``LocalSupport.replan``)
makes the driver replica run pyspark's own ``spark-submit``, from the Python environment
the image stands for, in client mode:

- **Master.** ``--master local[N]`` by default, N = executor instances x executor cores:
  the executors' cores become threads of the driver's JVM. ``kubemill spark-submit
  --master local[...]`` keeps the master it was given in the annotation
  :data:`LOCAL_MASTER_ANNOTATION`, which wins.
- **Standalone** (annotation ``kubemill.dev/spark-local-mode: standalone``): a standalone
  cluster of the job's own. Replica ``Master`` runs ``spark-class
  org.apache.spark.deploy.master.Master``, then one ``Worker`` per executor runs
  ``...deploy.worker.Worker`` with the executor's cores and memory and a work directory
  under the job's, then the driver, with ``--master spark://127.0.0.1:PORT`` and
  ``spark.cores.max`` = instances x cores. The executors are JVMs of their own that the
  workers start; they are processes of the workers' replicas, so they end with the job.
  (The pyspark wheel has ``spark-class`` but no ``start-master.sh``.)
- **Ports.** Every port (the driver's RPC, block manager and UI; the master's and the
  workers' RPC and UI) is the one the local :class:`Network` reserved for that replica, so
  two applications never clash on 4040; the UI's address goes into
  ``status.driverInfo.webUIAddress`` (``kubemill run`` and ``describe`` print it).
- **Configuration.** A ``spark.properties`` of the application's own (FileSet
  ``<app>-spark-conf``, ``--properties-file``, so no ``spark-defaults.conf`` of the machine
  leaks in): sparkConf, hadoopConf, deps, the driver's and executors' cores, memory and
  Java options, executor env, the addresses above, ``spark.ui.showConsoleProgress=false``
  (a progress bar is noise in a log file) and ``spark.log.level=WARN`` unless sparkConf
  sets it: Spark's INFO lines would bury the application's output, and a failed driver's
  last log lines are its failure message (``terminationMessagePolicy:
  FallbackToLogsOnError``, which the driver's container carries on both substrates).
- **Memory.** With ``local[N]`` the executors' work runs in the driver's process tree,
  so the driver's memory limit (heap plus overhead, watched locally as on a node) becomes
  the driver's and the executors' pods' memory together; standalone workers have no limit
  of their own (their ``--memory`` is what their executors may take).
- **Environment** (``LocalSupport.env``, every replica): ``SPARK_LOCAL_IP=127.0.0.1``;
  ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` ``python3``, which is the chosen
  environment's (its ``bin/`` is first on every replica's PATH, the executors' and Python
  workers' included). Each replica's ``SPARK_LOCAL_DIRS`` is a directory of the job's.
- **Files.** ``mainApplicationFile`` and the deps' jars, files, pyFiles and archives:
  ``local://PATH`` (a path in the image, in a pod) is PATH on this machine, ``file://``
  too; a relative path is from the manifest's directory (the driver's working directory),
  as the TF and PyTorch examples' scripts are; other schemes (``http``, ``s3a``, ...) are
  Spark's to fetch. :func:`refusals` names those this machine does not have, at their
  field paths, before anything starts (the seed's SparkPi jar: the wheel has no examples).

Pure, as every framework: paths and ports come from the :class:`Network`; whether a file
exists is asked of the substrate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace

from kubemill.api import Container, ContainerPort, FieldError, Job, PodTemplateSpec, RestartPolicy
from kubemill.engines.spark.api.application import DriverInfo, SparkApplication
from kubemill.engines.spark.api.names import DRIVER_CONTAINER, EXECUTOR_CONTAINER
from kubemill.engines.spark.api.spec import DEFAULT_CORES, DEFAULT_MEMORY, SparkPodSpec
from kubemill.engines.spark.framework.driver import (
    DRIVER,
    EXECUTOR,
    conf_name,
    main_class,
    properties,
)
from kubemill.engines.spark.framework.wire import (
    BLOCK_MANAGER_PORT,
    CONF_MOUNT_PATH,
    DRIVER_PORT,
    PROPERTIES,
    UI_PORT,
    properties_text,
)
from kubemill.frameworks._common import env
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    FilePlan,
    FileSet,
    Network,
    Plan,
    ReplicaPlan,
    StatusExtension,
    StatusView,
    replica_name,
)

LOCAL_MODE_ANNOTATION = "kubemill.dev/spark-local-mode"
"""``local`` (the default: ``local[N]``) or ``standalone`` (a Master and Workers)."""
LOCAL_MODES = ("local", "standalone")
LOCAL_MASTER_ANNOTATION = "kubemill.dev/spark-local-master"
"""The ``local[...]`` master to run with (``kubemill spark-submit --master local[2]``)."""
LOCAL_HOST = "127.0.0.1"
SPARK_SUBMIT = "spark-submit"
SPARK_CLASS = "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

MASTER = "Master"
WORKER = "Worker"
MASTER_PORTS = {"spark-master": 7077, "master-ui": 8080}
WORKER_PORTS = {"spark-worker": 7078, "worker-ui": 8081}
"""Container ports of the standalone daemons: names for the ports the Network reserves."""

LOCAL_ENV = {
    # Spark binds and advertises this machine's first interface otherwise.
    "SPARK_LOCAL_IP": LOCAL_HOST,
    # The environment's interpreter for the driver and the executors' Python workers,
    # whatever the calling shell sets (a notebook's PYSPARK_DRIVER_PYTHON=jupyter).
    "PYSPARK_PYTHON": "python3",
    "PYSPARK_DRIVER_PYTHON": "python3",
}
"""What every local replica of a SparkApplication gets (``LocalSupport.env``)."""

QUIET_LOG_LEVEL = "WARN"
EXAMPLES_NOTE = (
    "the pyspark wheel has no Scala examples jar (Spark's /opt/spark/examples is in the "
    "spark image only); examples/spark-pi.yaml is a Python SparkApplication that runs here"
)

_K8S_ONLY = (
    "spark.master",
    "spark.submit.deployMode",
    "spark.app.id",
    "spark.driver.host",
    "spark.driver.port",
    "spark.driver.blockManager.port",
    "spark.ui.port",
    "spark.jars",
    "spark.files",
    "spark.submit.pyFiles",
    "spark.archives",
)
"""Confs of the cluster-mode properties that are Kubernetes' or are set again here."""
_LOCAL_MASTER = re.compile(r"^local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?$")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")


def local_mode(job: SparkApplication) -> str:
    """``local`` or ``standalone``, from :data:`LOCAL_MODE_ANNOTATION`."""
    return job.metadata.annotations.get(LOCAL_MODE_ANNOTATION, "local").strip() or "local"


def _conf_int(job: SparkApplication, key: str) -> int | None:
    text = (job.spec.spark_conf or {}).get(key, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def executor_cores(job: SparkApplication) -> int:
    """Cores per executor: the field, else sparkConf's, else Spark's default."""
    cores = job.spec.executor.cores or _conf_int(job, "spark.executor.cores")
    return cores or DEFAULT_CORES


def executor_memory(job: SparkApplication) -> str:
    """Heap per executor (``1g``): the field, else sparkConf's, else Spark's default."""
    conf = (job.spec.spark_conf or {}).get("spark.executor.memory")
    return job.spec.executor.memory or conf or DEFAULT_MEMORY


def executors(job: SparkApplication) -> int:
    """Executors to start locally: the application's instances, at least one."""
    return max(1, job.executor_instances)


def local_master(job: SparkApplication) -> str:
    """``local[N]``: the annotation's master, else N = executor instances x cores."""
    given = job.metadata.annotations.get(LOCAL_MASTER_ANNOTATION, "").strip()
    if given:
        return given
    return f"local[{executors(job) * executor_cores(job)}]"


def local_path(uri: str) -> str | None:
    """The path on this machine a file URI names, or None for a remote one (Spark fetches
    it). ``local://`` and ``file://`` are paths here; an ``#alias`` suffix is dropped."""
    text = uri.partition("#")[0]
    for prefix in ("local://", "file://", "local:", "file:"):
        if text.startswith(prefix):
            return text[len(prefix) :]
    if _SCHEME.match(text):
        return None
    return text


def _on_machine(uri: str) -> str:
    """``uri`` as spark-submit takes it here: a local:// URI becomes its path."""
    if uri.startswith("local:"):
        path = local_path(uri) or uri
        alias = uri.partition("#")[2]
        return f"{path}#{alias}" if alias else path
    return uri


def _job_dir(network: Network, name: str) -> str:
    """A directory of the job's own for ``name`` (locally under the job's directory)."""
    return network.files_path(name, f"/var/data/{name}")


def local_properties(job: SparkApplication, network: Network, *, master: str) -> dict[str, str]:
    """``spark.properties`` as the local driver reads it (see the module's docstring)."""
    driver = replica_name(job.name, DRIVER, 0)
    out = {
        key: value
        for key, value in properties(job, network, driver).items()
        if key not in _K8S_ONLY and not key.startswith("spark.kubernetes.")
    }
    conf = job.spec.spark_conf or {}
    out["spark.app.name"] = conf.get("spark.app.name", job.name)
    out["spark.master"] = master
    out["spark.submit.deployMode"] = "client"
    out["spark.driver.host"] = LOCAL_HOST
    out["spark.driver.bindAddress"] = LOCAL_HOST
    out["spark.driver.port"] = str(network.endpoint(DRIVER, 0, DRIVER_PORT).port)
    out["spark.driver.blockManager.port"] = str(
        network.endpoint(DRIVER, 0, BLOCK_MANAGER_PORT).port
    )
    out["spark.ui.port"] = str(network.endpoint(DRIVER, 0, UI_PORT).port)
    out["spark.ui.showConsoleProgress"] = conf.get("spark.ui.showConsoleProgress", "false")
    out["spark.log.level"] = conf.get("spark.log.level", QUIET_LOG_LEVEL)
    if master.startswith("spark://"):
        out["spark.executor.cores"] = str(executor_cores(job))
        out["spark.executor.memory"] = executor_memory(job)
        out.setdefault("spark.cores.max", str(executors(job) * executor_cores(job)))
    deps = job.spec.deps
    if deps is not None:
        for key, values in (
            ("spark.jars", deps.jars),
            ("spark.files", deps.files),
            ("spark.submit.pyFiles", deps.py_files),
            ("spark.archives", deps.archives),
        ):
            if values:
                out[key] = ",".join(_on_machine(v) for v in values)
    return out


def submit_args(job: SparkApplication, network: Network, *, master: str) -> list[str]:
    """spark-submit's arguments: the master, the properties file, the class of a JVM
    application, the application file and its arguments."""
    conf_dir = network.files_path(conf_name(job), CONF_MOUNT_PATH)
    main = job.spec.main_application_file or ""
    return [
        "--master",
        master,
        "--deploy-mode",
        "client",
        "--properties-file",
        f"{conf_dir}/{PROPERTIES}",
        *(["--class", main_class(job)] if job.app_type.jvm else []),
        _on_machine(main),
        *(job.spec.arguments or []),
    ]


def ui_address(job: SparkApplication, network: Network) -> str | None:
    """``127.0.0.1:PORT`` of the driver's UI (None when sparkConf turns the UI off)."""
    if (job.spec.spark_conf or {}).get("spark.ui.enabled", "").strip().lower() == "false":
        return None
    return str(network.endpoint(DRIVER, 0, UI_PORT))


def with_ui_address(
    extension: StatusExtension | None, driver: str, address: str | None
) -> StatusExtension:
    """The kind's status extension, with the local UI's address in ``driverInfo`` (and no
    UI service name: there are no services locally)."""

    def status(view: StatusView) -> Mapping[str, object]:
        fields = dict(extension(view)) if extension is not None else {}
        info = fields.get("driver_info")
        if not isinstance(info, DriverInfo):
            info = DriverInfo(pod_name=driver)
        port = int(address.rpartition(":")[2]) if address else None
        fields["driver_info"] = info.model_copy(
            update={"web_ui_address": address, "web_ui_port": port, "web_ui_service_name": None}
        )
        return fields

    return status


def _daemon(
    job: SparkApplication,
    replica_type: str,
    index: int,
    *,
    ports: Mapping[str, int],
    argv: list[str],
    stage: int,
    local_dir: str,
) -> ReplicaPlan:
    """A standalone daemon's replica, from the executors' pod template (their image picks
    the environment; their env reaches the executors the worker starts). No resources:
    the worker's ``--cores``/``--memory`` are what its executors may use."""
    template: PodTemplateSpec = job.replica_specs[EXECUTOR].template.model_copy(deep=True)
    container = next(c for c in template.spec.containers if c.name == EXECUTOR_CONTAINER)
    container.command = [SPARK_CLASS]
    container.args = argv
    container.resources = None
    container.ports = [ContainerPort(name=n, container_port=p) for n, p in ports.items()]
    return ReplicaPlan(
        replica_type=replica_type,
        index=index,
        name=replica_name(job.name, replica_type, index),
        template=template,
        container=EXECUTOR_CONTAINER,
        env=(env("SPARK_LOCAL_DIRS", local_dir),),
        ports=dict(ports),
        restart_policy=RestartPolicy.NEVER,
        labels={
            LABEL_JOB_NAME: job.name,
            LABEL_REPLICA_TYPE: replica_type.lower(),
            LABEL_REPLICA_INDEX: str(index),
            LABEL_JOB_ROLE: "worker",
        },
        stage=stage,
        host=LOCAL_HOST,
    )


def standalone_cluster(job: SparkApplication, network: Network) -> tuple[str, list[ReplicaPlan]]:
    """The master's ``spark://`` URL, and the Master and Worker replicas."""
    port = network.endpoint(MASTER, 0, MASTER_PORTS["spark-master"]).port
    url = f"spark://{LOCAL_HOST}:{port}"
    master = _daemon(
        job,
        MASTER,
        0,
        ports=MASTER_PORTS,
        argv=[
            MASTER_CLASS,
            "--host",
            LOCAL_HOST,
            "--port",
            str(port),
            "--webui-port",
            str(network.endpoint(MASTER, 0, MASTER_PORTS["master-ui"]).port),
        ],
        stage=0,
        local_dir=_job_dir(network, "spark-master-0"),
    )
    workers = []
    for index in range(executors(job)):
        name = f"spark-worker-{index}"
        workers.append(
            _daemon(
                job,
                WORKER,
                index,
                ports=WORKER_PORTS,
                argv=[
                    WORKER_CLASS,
                    "--host",
                    LOCAL_HOST,
                    "--port",
                    str(network.endpoint(WORKER, index, WORKER_PORTS["spark-worker"]).port),
                    "--webui-port",
                    str(network.endpoint(WORKER, index, WORKER_PORTS["worker-ui"]).port),
                    "--cores",
                    str(executor_cores(job)),
                    "--memory",
                    executor_memory(job),
                    "--work-dir",
                    _job_dir(network, f"{name}-work"),
                    url,
                ],
                stage=1,
                local_dir=_job_dir(network, name),
            )
        )
    return url, [master, *workers]


def _with_executors_memory(job: SparkApplication, container: Container) -> None:
    """With local[N] the executors' work runs in the driver's process tree (its JVM's
    threads, their Python workers): its memory limit, if it has one, is the driver's and
    the executors' pods' together."""
    resources = dict(container.resources or {})
    limits = dict(resources.get("limits") or {})
    if "memory" not in limits:
        return
    executors_mib = executors(job) * job.pod_memory_mib(job.spec.executor)
    limits["memory"] = f"{job.pod_memory_mib(job.spec.driver) + executors_mib}Mi"
    container.resources = {**resources, "limits": limits}


def local_plan(job: Job, plan: Plan, network: Network) -> Plan:
    """The SparkApplication's Plan as this machine runs it (``LocalSupport.replan``)."""
    if not isinstance(job, SparkApplication):
        return plan
    driver = plan.of_type(DRIVER)[0]
    daemons: list[ReplicaPlan] = []
    if local_mode(job) == "standalone":
        master, daemons = standalone_cluster(job, network)
    else:
        master = local_master(job)
    template = driver.template.model_copy(deep=True)
    container = next(c for c in template.spec.containers if c.name == DRIVER_CONTAINER)
    container.command = [SPARK_SUBMIT]
    container.args = submit_args(job, network, master=master)
    if not daemons:
        _with_executors_memory(job, container)
    conf = FileSet(
        conf_name(job),
        (FilePlan(PROPERTIES, properties_text(local_properties(job, network, master=master))),),
        mount_path=CONF_MOUNT_PATH,
        replica_types=(DRIVER,),
    )
    local_driver = replace(
        driver,
        template=template,
        env=(env("SPARK_LOCAL_DIRS", _job_dir(network, "spark-driver-0")),),
        stage=2 if daemons else 0,
    )
    return replace(
        plan,
        replicas=(*daemons, local_driver),
        files=(conf,),
        status_extension=with_ui_address(
            plan.status_extension, driver.name, ui_address(job, network)
        ),
    )


def _missing(uri: str, field: str, image: str, exists: Callable[[str], bool]) -> FieldError | None:
    path = local_path(uri)
    if path is None or not path or exists(path):
        return None
    where = (
        f"; in a pod a local:// path is inside the image {image!r}, but locally an image only "
        "picks a Python environment"
        if uri.startswith("local:")
        else ""
    )
    note = f"; {EXAMPLES_NOTE}" if "/examples/" in path or "spark-examples" in path else ""
    return FieldError(
        field,
        f"{uri} is not on this machine{where}{note}",
        "put the file there, or name one on this machine (a relative path starts at the "
        "manifest's directory); or run the application on kubernetes",
    )


_NO_SOURCE = {
    "config_map_key_ref": ("configMapKeyRef", "ConfigMaps"),
    "secret_key_ref": ("secretKeyRef", "Secrets"),
    "resource_field_ref": ("resourceFieldRef", "resource limits"),
}


def _env_refusals(role: str, spec: SparkPodSpec) -> list[FieldError]:
    """Variables of a role whose values come from where nothing is locally, at the
    role's fields (the launch would find them in the derived pod template, by a path the
    user never wrote)."""
    errors = []
    hint = "set env[].value instead, or run on kubernetes"
    for i, variable in enumerate(spec.env or []):
        source = variable.value_from
        for attribute, (wire, what) in _NO_SOURCE.items():
            if source is not None and getattr(source, attribute) is not None:
                errors.append(
                    FieldError(
                        f"spec.{role}.env[{i}].valueFrom.{wire}",
                        f"{variable.name}: the local substrate has no {what} to read from",
                        hint,
                    )
                )
    if spec.env_from:
        errors.append(
            FieldError(
                f"spec.{role}.envFrom",
                "envFrom (ConfigMaps and Secrets) is not available on the local substrate",
                hint,
            )
        )
    if spec.env_secret_key_refs:
        errors.append(
            FieldError(
                f"spec.{role}.envSecretKeyRefs",
                "the local substrate has no Secrets to read from",
                hint,
            )
        )
    return errors


def refusals(job: Job, exists: Callable[[str], bool]) -> list[FieldError]:
    """Why a SparkApplication cannot run on this machine (``LocalSupport.refusals``): an
    annotation kubemill does not understand, or a file it names that is not here."""
    if not isinstance(job, SparkApplication):
        return []
    errors: list[FieldError] = []
    annotations = job.metadata.annotations
    mode = annotations.get(LOCAL_MODE_ANNOTATION)
    if mode is not None and mode.strip() not in LOCAL_MODES:
        errors.append(
            FieldError(
                f"metadata.annotations[{LOCAL_MODE_ANNOTATION}]",
                f"unknown local mode {mode!r}",
                "use local (local[N] threads, the default) or standalone (a Master and Workers)",
            )
        )
    master = annotations.get(LOCAL_MASTER_ANNOTATION)
    if master is not None and not _LOCAL_MASTER.match(master.strip()):
        errors.append(
            FieldError(
                f"metadata.annotations[{LOCAL_MASTER_ANNOTATION}]",
                f"{master!r} is not a local master",
                "use local, local[N], local[*] or local[N,F]",
            )
        )
    for role, spec in (("driver", job.spec.driver), ("executor", job.spec.executor)):
        errors += _env_refusals(role, spec)
    errors = [replace(e, path=job.source_path(e.path)) for e in errors]
    image = job.spec.image or ""
    candidates = [(job.spec.main_application_file or "", "spec.mainApplicationFile")]
    deps = job.spec.deps
    if deps is not None:
        for name, values in (
            ("jars", deps.jars),
            ("files", deps.files),
            ("pyFiles", deps.py_files),
            ("archives", deps.archives),
        ):
            candidates += [(v, f"spec.deps.{name}[{i}]") for i, v in enumerate(values or [])]
    for uri, field in candidates:
        problem = _missing(uri, job.source_path(field), image, exists)
        if problem is not None:
            errors.append(problem)
    return errors


__all__ = [
    "EXAMPLES_NOTE",
    "LOCAL_ENV",
    "LOCAL_MASTER_ANNOTATION",
    "LOCAL_MODES",
    "LOCAL_MODE_ANNOTATION",
    "MASTER",
    "WORKER",
    "executor_cores",
    "executor_memory",
    "local_master",
    "local_mode",
    "local_path",
    "local_plan",
    "local_properties",
    "refusals",
    "standalone_cluster",
    "submit_args",
    "ui_address",
    "with_ui_address",
]
