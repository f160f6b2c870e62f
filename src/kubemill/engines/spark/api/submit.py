"""What a spark-submit command line becomes: a SparkApplication manifest, or Spark's own
cluster-mode submission.

The arguments are read as Spark reads them by :mod:`kubemill.engines.spark.api.argv`.
:func:`submission_of` turns them into a ``kubemill.dev/v1`` SparkApplication
(a plain dict that loads with :data:`kubemill.api.SPARKAPPLICATION`) and the master.

Pure: the caller reads a ``--properties-file`` and hands its text to
:func:`~kubemill.engines.spark.api.argv.parse_spark_properties`; nothing here touches the
environment or files.

Where kubemill differs from Spark, and why:

- no ``--deploy-mode`` with a ``k8s://`` master means cluster mode (Spark's default is
  client mode, which runs the driver in the submitting process: kubemill creates the
  driver in the cluster, so cluster mode is the only mode it submits);
- options of other cluster managers are refused (:mod:`kubemill.engines.spark.api.argv`).

:func:`cluster_mode_of` reads the same arguments as Spark's own cluster-mode submission
does: the Spark configuration the driver gets (options folded into their confs as
SparkSubmit folds them), the application file, its class and arguments. The driver's
objects are built from that by :mod:`kubemill.engines.spark.framework.cluster_mode`.
``--kill`` and ``--status`` (``[NAMESPACE:]DRIVER-POD``, a glob allowed) are read here and
carried out by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubemill.api.errors import did_you_mean
from kubemill.engines.spark.api.argv import (
    DEFAULT_MASTER,
    SparkMaster,
    SparkSubmitError,
    SubmitArguments,
    parse_spark_master,
    parse_submit_arguments,
)
from kubemill.engines.spark.api.names import APPLICATION_KIND, MAX_NAME, UI_SERVICE_SUFFIX

DEFAULT_SPARK_VERSION = "4.0.0"
"""``spec.sparkVersion`` when the image's tag names no version (spark-submit never says)."""


# --- the SparkApplication ----------------------------------------------------------------------


@dataclass(frozen=True)
class SparkSubmit:
    """The SparkApplication a command line stands for, where it goes, and what was ignored."""

    manifest: dict[str, Any]
    master: SparkMaster
    verbose: bool = False
    warnings: tuple[str, ...] = ()


_IMAGE_CONFS = {
    "spark.kubernetes.container.image": ("image",),
    "spark.kubernetes.driver.container.image": ("driver", "image"),
    "spark.kubernetes.executor.container.image": ("executor", "image"),
    "spark.kubernetes.authenticate.driver.serviceAccountName": ("driver", "serviceAccount"),
    "spark.kubernetes.authenticate.executor.serviceAccountName": ("executor", "serviceAccount"),
    "spark.kubernetes.container.image.pullPolicy": ("imagePullPolicy",),
}
"""Confs that are fields of the SparkApplication (sparkConf may not hold them) -> field."""

_ROLE_CONFS = {
    "spark.driver.memory": ("driver", "memory", "--driver-memory"),
    "spark.driver.cores": ("driver", "cores", "--driver-cores"),
    "spark.executor.memory": ("executor", "memory", "--executor-memory"),
    "spark.executor.cores": ("executor", "cores", "--executor-cores"),
    "spark.executor.instances": ("executor", "instances", "--num-executors"),
}
"""Confs that become driver/executor fields -> (role, field, the option that sets it too)."""

_OPTION_CONFS = {
    "driver_java_options": "spark.driver.extraJavaOptions",
    "driver_library_path": "spark.driver.extraLibraryPath",
    "driver_class_path": "spark.driver.extraClassPath",
    "principal": "spark.kerberos.principal",
    "keytab": "spark.kerberos.keytab",
}
"""Options Spark turns into confs (kubemill does the same)."""

_DEPS = {
    "jars": "jars",
    "files": "files",
    "py_files": "pyFiles",
    "archives": "archives",
    "packages": "packages",
    "exclude_packages": "excludePackages",
    "repositories": "repositories",
}
"""Comma-separated options -> their ``spec.deps`` list."""

_CREDENTIAL_CONF = re.compile(r"^spark\.kubernetes\.authenticate\.(driver\.|executor\.)?oauthToken")


def submission_of(
    args: SubmitArguments,
    *,
    properties: Mapping[str, str] | None = None,
    spark_version: str | None = None,
) -> SparkSubmit:
    """The SparkApplication ``args`` stand for. ``properties``: the ``--properties-file``'s
    pairs (``--conf`` wins over them, an option over both, as in Spark)."""
    _refuse_kill_and_status(args)
    conf, warnings = _merged_conf(args, properties)
    master = parse_spark_master(args.master or conf.pop("spark.master", None) or DEFAULT_MASTER)
    conf.pop("spark.master", None)
    _check_deploy_mode(args.deploy_mode or conf.pop("spark.submit.deployMode", None), master)
    conf.pop("spark.submit.deployMode", None)

    for key in conf:
        if _CREDENTIAL_CONF.match(key):
            raise SparkSubmitError(
                f"--conf {key}",
                "not supported: credentials would be written into the SparkApplication",
                "the driver and executors use their service accounts: "
                "--conf spark.kubernetes.authenticate.driver.serviceAccountName=NAME",
            )

    spec: dict[str, Any] = {}
    driver: dict[str, Any] = {}
    executor: dict[str, Any] = {}
    roles = {"driver": driver, "executor": executor}
    for key, path in _IMAGE_CONFS.items():
        if key in conf:
            value = conf.pop(key)
            (roles[path[0]] if len(path) == 2 else spec)[path[-1]] = value
    for key, (role, name, option) in _ROLE_CONFS.items():
        given = getattr(args, option.removeprefix("--").replace("-", "_"))
        text = given if given is not None else conf.pop(key, None)
        conf.pop(key, None)
        if text is None:
            continue
        where = option if given is not None else f"--conf {key}"
        roles[role][name] = _role_value(name, text, where)

    resource = args.primary_resource
    if not resource:
        raise SparkSubmitError(
            "",
            "no application file",
            "give the jar, .py or .R file after the options, then its arguments",
        )
    spec["type"], main_class = _app_type(resource, args.main_class)
    if main_class:
        spec["mainClass"] = main_class
    spec["mainApplicationFile"] = resource
    if args.app_args:
        spec["arguments"] = list(args.app_args)
    spec["sparkVersion"] = spark_version or _version_of(spec.get("image")) or DEFAULT_SPARK_VERSION
    spec["mode"] = "cluster"
    if "image" not in spec and not ("image" in driver and "image" in executor):
        if master.substrate == "kubernetes":
            raise SparkSubmitError(
                "--conf spark.kubernetes.container.image",
                "required with a k8s:// master: the image the driver and executors run",
                "add --conf spark.kubernetes.container.image=IMAGE (e.g. spark:4.0.0)",
            )
        # Locally no image is pulled; the manifest still names one so that it loads
        # (and runs on a cluster unchanged): the official image of that Spark version.
        spec["image"] = f"spark:{spec['sparkVersion']}"
    if args.proxy_user:
        spec["proxyUser"] = args.proxy_user
    deps = {
        key: _comma_list(getattr(args, attribute))
        for attribute, key in _DEPS.items()
        if getattr(args, attribute)
    }
    if deps:
        spec["deps"] = deps
    metadata: dict[str, Any] = {}
    conf_name = conf.pop("spark.app.name", None)
    app_name = args.name or conf_name or _default_name(resource, main_class)
    metadata["name"] = _kube_name(app_name)
    if metadata["name"] != app_name:
        # The Kubernetes name is a cleaned copy; Spark still shows the name as given.
        conf["spark.app.name"] = app_name
    namespace = conf.pop("spark.kubernetes.namespace", None)
    if namespace:
        metadata["namespace"] = namespace
    if driver:
        spec["driver"] = driver
    if executor:
        spec["executor"] = executor
    if conf:
        spec["sparkConf"] = dict(sorted(conf.items()))
    # Here, not at the top: cluster mode's fast path imports this module without the models.
    from kubemill.api.common import API_VERSION

    manifest = {
        "apiVersion": API_VERSION,
        "kind": APPLICATION_KIND,
        "metadata": metadata,
        "spec": spec,
    }
    return SparkSubmit(manifest, master, verbose=args.verbose, warnings=tuple(warnings))


def _merged_conf(
    args: SubmitArguments, properties: Mapping[str, str] | None
) -> tuple[dict[str, str], list[str]]:
    """The spark.* pairs of the properties file, then ``--conf``, then the options Spark
    turns into confs (later ones win); warnings for keys that are not Spark's."""
    warnings: list[str] = []
    conf: dict[str, str] = {}
    for source, pairs in (("--properties-file", properties or {}), ("--conf", args.conf)):
        for key, value in pairs.items():
            if not key.startswith("spark."):
                # As Spark: only spark.* keys are Spark's configuration.
                warnings.append(f"{source}: ignoring {key!r}, which is not a spark.* property")
                continue
            conf[key] = value
    for attribute, key in _OPTION_CONFS.items():
        value = getattr(args, attribute)
        if value is not None:
            conf[key] = value
    return conf, warnings


def _refuse_kill_and_status(args: SubmitArguments) -> None:
    for option, value in (("--kill", args.kill), ("--status", args.status)):
        if value is not None:
            raise SparkSubmitError(
                option,
                "asks about a submission already made, so it submits nothing",
                f"run it without an application: {option} [NAMESPACE:]DRIVER-POD "
                "--master k8s://https://HOST:PORT",
            )


def parse_spark_submit(
    argv: Sequence[str],
    *,
    properties: Mapping[str, str] | None = None,
    spark_version: str | None = None,
) -> SparkSubmit:
    """:func:`parse_submit_arguments`, then :func:`submission_of` (no own flags)."""
    return submission_of(
        parse_submit_arguments(argv), properties=properties, spark_version=spark_version
    )


def _check_deploy_mode(mode: str | None, master: SparkMaster) -> None:
    if mode is None or mode == "cluster" or (mode == "client" and master.substrate == "local"):
        return
    if mode == "client":
        raise SparkSubmitError(
            "--deploy-mode",
            "client mode runs the driver in this process, outside the cluster: kubemill "
            "creates the driver in the cluster",
            "use --deploy-mode cluster, or --master 'local[N]' to run the application here",
        )
    raise SparkSubmitError(
        "--deploy-mode",
        f"{mode!r} is not a deploy mode",
        "use cluster" + (f" ({did_you_mean(mode, ['cluster', 'client'])})" if mode else ""),
    )


def _role_value(name: str, text: str, where: str) -> str | int:
    if name == "memory":
        if not re.match(r"^\s*\d+\s*[kmgtp]?b?\s*$", text, re.IGNORECASE):
            raise SparkSubmitError(
                where,
                f"{text!r} is not a memory size",
                "a number with an optional unit k, m, g, t or p (512m, 2g)",
            )
        return text.strip()
    if not text.strip().isdigit() or int(text) < 1:
        what = "executors" if name == "instances" else "cores"
        raise SparkSubmitError(
            where, f"{text!r} is not a whole number of {what}", "give 1 or more, e.g. 2"
        )
    return int(text)


def _app_type(resource: str, main_class: str | None) -> tuple[str, str | None]:
    """The application's type and main class, from its file's name (as Spark tells them)."""
    lowered = resource.lower()
    kind = "Python" if lowered.endswith(".py") else "R" if lowered.endswith(".r") else None
    if kind is not None:
        if main_class:
            raise SparkSubmitError(
                "--class",
                f"a {kind} application has no main class: {resource} is its main",
                "remove --class",
            )
        return kind, None
    if not main_class:
        raise SparkSubmitError(
            "--class",
            f"required for the jar {resource} (kubemill does not read the jar's manifest)",
            "add --class with the application's main class, e.g. org.apache.spark.examples.SparkPi",
        )
    # Scala and Java run alike; Scala is the spark-operator's default.
    return "Scala", main_class


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _version_of(image: str | None) -> str | None:
    """The Spark version an image's tag names (``spark:4.0.0``, ``apache/spark:v3.5.1``)."""
    if not image:
        return None
    tag = image.rsplit("/", 1)[-1].partition(":")[2].partition("@")[0]
    match = re.match(r"^v?(\d+\.\d+\.\d+)", tag)
    return match.group(1) if match else None


def _default_name(resource: str, main_class: str | None) -> str:
    """Spark's default: the main class, else the application file's name."""
    if main_class:
        return main_class.rsplit(".", 1)[-1]
    return resource.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]


def _kube_name(name: str) -> str:
    """``name`` as a Kubernetes object name, short enough for its ``-ui-svc`` service."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    cleaned = cleaned[: MAX_NAME - len(UI_SERVICE_SUFFIX)].strip("-")
    if not cleaned or not cleaned[0].isalpha():
        cleaned = f"spark-{cleaned}".strip("-")[: MAX_NAME - len(UI_SERVICE_SUFFIX)].strip("-")
    return cleaned


# --- Spark's own cluster mode ------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterMode:
    """A cluster-mode submission as Spark's SparkSubmit hands it to its Kubernetes client:
    the driver's Spark configuration (options folded into confs), the application file,
    its type, class and arguments, and the API server it goes to."""

    server: str
    """The API server's URL (``spark.master`` is ``k8s://`` and this)."""
    conf: Mapping[str, str]
    """Every ``spark.*`` property the driver gets, before Spark's client adds its own
    (ids, names, ports, the driver's host)."""
    resource: str
    app_type: Literal["Scala", "Python", "R"]
    main_class: str | None
    """A JVM application's main class (None for Python and R: Spark runs its runner)."""
    app_args: tuple[str, ...] = ()
    verbose: bool = False
    warnings: tuple[str, ...] = ()


_CLUSTER_OPTION_CONFS = {
    "driver_memory": "spark.driver.memory",
    "driver_cores": "spark.driver.cores",
    "executor_memory": "spark.executor.memory",
    "executor_cores": "spark.executor.cores",
    "num_executors": "spark.executor.instances",
    "files": "spark.files",
    "archives": "spark.archives",
    "packages": "spark.jars.packages",
    "exclude_packages": "spark.jars.excludes",
    "repositories": "spark.jars.repositories",
}
"""Options SparkSubmit turns into the driver's confs (an option wins over its conf)."""

_UPLOADED = ("spark.jars", "spark.files", "spark.submit.pyFiles", "spark.archives")
"""Confs listing files: Spark's client uploads those on this machine, kubemill does not."""

_SUBMISSION_AUTH = "spark.kubernetes.authenticate.submission."


def cluster_mode_of(
    args: SubmitArguments, *, properties: Mapping[str, str] | None = None
) -> ClusterMode:
    """``args`` read as Spark's cluster mode reads them for a ``k8s://`` master.

    Refused, with what to do: another master or client mode, ``--proxy-user``, credentials
    in confs, no image, and files on this machine (Spark's client would upload them to
    ``spark.kubernetes.file.upload.path``; kubemill names files in the image, ``local://``,
    or remote URLs only).
    """
    _refuse_kill_and_status(args)
    conf, warnings = _merged_conf(args, properties)
    master = parse_spark_master(args.master or conf.get("spark.master") or DEFAULT_MASTER)
    if master.server is None:
        raise SparkSubmitError(
            "--master",
            f"{master.text!r} is not a Kubernetes API server: cluster mode submits to k8s://",
            "use --master k8s://https://HOST:PORT",
        )
    mode = args.deploy_mode or conf.get("spark.submit.deployMode")
    _check_deploy_mode(mode, master)
    if args.proxy_user:
        raise SparkSubmitError(
            "--proxy-user",
            "not supported by kubemill's cluster-mode submission",
            "submit with --operator (spec.proxyUser), or without --proxy-user",
        )
    for key in conf:
        if _CREDENTIAL_CONF.match(key) or key.startswith(_SUBMISSION_AUTH):
            raise SparkSubmitError(
                f"--conf {key}",
                "not supported: kubemill submits with the kubeconfig's credentials, and "
                "the driver's confs are stored in a ConfigMap",
                "choose the cluster and user with --kubeconfig/--context; the driver uses its "
                "service account (spark.kubernetes.authenticate.driver.serviceAccountName)",
            )
    resource = args.primary_resource
    if not resource:
        raise SparkSubmitError(
            "", "no application file", "give the jar, .py or .R file after the options"
        )
    app_type, main_class = _app_type(resource, args.main_class)
    conf["spark.master"] = f"k8s://{master.server}"
    conf["spark.submit.deployMode"] = "cluster"
    conf["spark.app.name"] = (
        args.name or conf.get("spark.app.name") or main_class or resource.rsplit("/", 1)[-1]
    )
    for attribute, key in _CLUSTER_OPTION_CONFS.items():
        value = getattr(args, attribute)
        if value is not None:
            conf[key] = value
    for key, name in (
        ("spark.driver.memory", "memory"),
        ("spark.executor.memory", "memory"),
        ("spark.driver.cores", "cores"),
        ("spark.executor.cores", "cores"),
        ("spark.executor.instances", "instances"),
    ):
        if key in conf:
            _role_value(name, conf[key], f"--conf {key}")
    # The application's own jar is one of the driver's jars, after those given.
    jars = _comma_list(args.jars if args.jars is not None else conf.get("spark.jars", ""))
    if main_class is not None:
        jars.append(resource)
    if jars:
        conf["spark.jars"] = ",".join(jars)
    # Spark's client always names the Python files, even none.
    conf["spark.submit.pyFiles"] = (
        args.py_files if args.py_files is not None else conf.get("spark.submit.pyFiles", "")
    )
    for key in ("spark.kubernetes.container.image", "spark.kubernetes.driver.container.image"):
        if conf.get(key):
            break
    else:
        raise SparkSubmitError(
            "--conf spark.kubernetes.container.image",
            "required with a k8s:// master: the image the driver and executors run",
            "add --conf spark.kubernetes.container.image=IMAGE (e.g. spark:4.0.0)",
        )
    _refuse_local_files(resource, conf)
    return ClusterMode(
        server=master.server,
        conf=conf,
        resource=resource,
        app_type="Scala" if app_type == "Scala" else "Python" if app_type == "Python" else "R",
        main_class=main_class,
        app_args=tuple(args.app_args),
        verbose=args.verbose,
        warnings=tuple(warnings),
    )


def _refuse_local_files(resource: str, conf: Mapping[str, str]) -> None:
    listed = [("the application file", resource)] + [
        (f"--conf {key}", item) for key in _UPLOADED for item in _comma_list(conf.get(key, ""))
    ]
    for where, item in listed:
        scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*):", item)
        if scheme is None or scheme.group(1).lower() == "file":
            raise SparkSubmitError(
                where,
                f"{item} is a file on this machine: Spark's cluster mode would upload it to "
                "spark.kubernetes.file.upload.path, which kubemill does not do",
                f"put it in the image and write local://{item.removeprefix('file://')}, or "
                "give a URL the driver can fetch (https://, s3a://, hdfs://)",
            )
