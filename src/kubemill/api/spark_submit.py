"""spark-submit's command line, read as Spark reads it, into a SparkApplication manifest.

:func:`parse_submit_arguments` reads the argv of ``spark-submit`` (options, then the application
file, then the application's own arguments, untouched) the way Spark's
``SparkSubmitArguments`` does: ``--opt value`` or ``--opt=value``, ``--conf k=v``
(``-c`` too) repeatable, the first word that is not an option is the application.
:func:`submission_of` turns the result into a ``kubemill.dev/v1`` SparkApplication
(a plain dict that loads with :data:`kubemill.api.SPARKAPPLICATION`) and the master.

Pure: the caller reads a ``--properties-file`` and hands its text to
:func:`parse_spark_properties`; nothing here touches the environment or files.

Where kubemill differs from Spark, and why:

- no ``--deploy-mode`` with a ``k8s://`` master means cluster mode (Spark's default is
  client mode, which runs the driver in the submitting process: kubemill creates the
  driver in the cluster, so cluster mode is the only mode it submits);
- options of other cluster managers (``--total-executor-cores``, ``--queue``,
  ``--supervise``) are refused with what to use instead, rather than ignored.

:func:`cluster_mode_of` reads the same arguments as Spark's own cluster-mode submission
does: the Spark configuration the driver gets (options folded into their confs as
SparkSubmit folds them), the application file, its class and arguments. The driver's
objects are built from that by :mod:`kubemill.frameworks.spark_cluster_mode`.
``--kill`` and ``--status`` (``[NAMESPACE:]DRIVER-POD``, a glob allowed) are read here and
carried out by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kubemill.api.errors import did_you_mean
from kubemill.api.spark_names import MAX_NAME, UI_SERVICE_SUFFIX

DEFAULT_MASTER = "local[*]"
"""Spark's master when neither ``--master`` nor ``spark.master`` names one."""
DEFAULT_SPARK_VERSION = "4.0.0"
"""``spec.sparkVersion`` when the image's tag names no version (spark-submit never says)."""


class SparkSubmitError(ValueError):
    """A spark-submit argument kubemill cannot take: which one, what is wrong, what to do."""

    def __init__(self, argument: str, message: str, hint: str = "") -> None:
        self.argument = argument
        self.message = message
        self.hint = hint
        text = f"{argument}: {message}" if argument else message
        super().__init__(f"{text} ({hint})" if hint else text)


# --- the options -------------------------------------------------------------------------------

_VALUE_OPTIONS = {
    "--master": "master",
    "--deploy-mode": "deploy_mode",
    "--name": "name",
    "--class": "main_class",
    "--properties-file": "properties_file",
    "--jars": "jars",
    "--files": "files",
    "--py-files": "py_files",
    "--archives": "archives",
    "--packages": "packages",
    "--exclude-packages": "exclude_packages",
    "--repositories": "repositories",
    "--driver-memory": "driver_memory",
    "--driver-cores": "driver_cores",
    "--executor-memory": "executor_memory",
    "--executor-cores": "executor_cores",
    "--num-executors": "num_executors",
    "--proxy-user": "proxy_user",
    "--principal": "principal",
    "--keytab": "keytab",
    "--driver-java-options": "driver_java_options",
    "--driver-library-path": "driver_library_path",
    "--driver-class-path": "driver_class_path",
    "--kill": "kill",
    "--status": "status",
}
"""Options that take a value -> the :class:`SubmitArguments` field it sets."""

_CONF_OPTIONS = ("--conf", "-c")
_VERBOSE_OPTIONS = ("--verbose", "-v")

_REFUSED_VALUE_OPTIONS = {
    "--total-executor-cores": (
        "not supported: it is for Spark's standalone cluster manager",
        "on Kubernetes give --num-executors N and --executor-cores C",
    ),
    "--queue": (
        "not supported: YARN's queue",
        "kubemill gang-schedules a SparkApplication with spec.batchScheduler (volcano)",
    ),
}
"""Options (with a value) kubemill refuses -> (why, what to do instead)."""

_REFUSED_FLAGS = {
    "--supervise": (
        "not supported: it restarts a standalone driver",
        "to re-run a failed application, write the manifest with --dry-run, set "
        "spec.restartPolicy {type: OnFailure, onFailureRetries: N} and `kubemill run` it",
    ),
    "--version": ("kubemill is not Spark", "`kubemill version` prints kubemill's version"),
}

_ALL_OPTIONS = (
    *_VALUE_OPTIONS,
    *_CONF_OPTIONS,
    *_VERBOSE_OPTIONS,
    *_REFUSED_VALUE_OPTIONS,
    *_REFUSED_FLAGS,
)


@dataclass
class SubmitArguments:
    """What a spark-submit command line says, before any of it is interpreted."""

    master: str | None = None
    deploy_mode: str | None = None
    name: str | None = None
    main_class: str | None = None
    properties_file: str | None = None
    jars: str | None = None
    files: str | None = None
    py_files: str | None = None
    archives: str | None = None
    packages: str | None = None
    exclude_packages: str | None = None
    repositories: str | None = None
    driver_memory: str | None = None
    driver_cores: str | None = None
    executor_memory: str | None = None
    executor_cores: str | None = None
    num_executors: str | None = None
    proxy_user: str | None = None
    principal: str | None = None
    keytab: str | None = None
    driver_java_options: str | None = None
    driver_library_path: str | None = None
    driver_class_path: str | None = None
    kill: str | None = None
    """``--kill [NAMESPACE:]DRIVER-POD`` (a glob allowed): delete the driver pods."""
    status: str | None = None
    """``--status [NAMESPACE:]DRIVER-POD`` (a glob allowed): print the driver pods' state."""
    conf: dict[str, str] = field(default_factory=dict)
    """``--conf`` pairs, the last of a key winning (as in Spark)."""
    verbose: bool = False
    primary_resource: str | None = None
    app_args: list[str] = field(default_factory=list)
    own_flags: set[str] = field(default_factory=set)
    """The caller's own flags (``--dry-run``) found among the options."""


def parse_submit_arguments(
    argv: Sequence[str], *, own_flags: Collection[str] = ()
) -> SubmitArguments:
    """spark-submit's ``argv`` (without the program name), read as Spark reads it.

    ``own_flags`` are the caller's flags (no value) that may stand among the options;
    after the application file every word is the application's.
    """
    out = SubmitArguments()
    index = 0
    while index < len(argv):
        word = argv[index]
        if not word.startswith("-") or word == "-":
            out.primary_resource = word
            out.app_args = list(argv[index + 1 :])
            return out
        if word == "--":
            # Spark reads "--" as the end of its options: the application file follows.
            if index + 1 < len(argv):
                out.primary_resource = argv[index + 1]
                out.app_args = list(argv[index + 2 :])
            return out
        option, eq, inline = word.partition("=")
        if option in own_flags and not eq:
            out.own_flags.add(option)
            index += 1
            continue
        if option in _VERBOSE_OPTIONS and not eq:
            out.verbose = True
            index += 1
            continue
        if option in _REFUSED_FLAGS:
            raise SparkSubmitError(option, *_REFUSED_FLAGS[option])
        if option in ("-h", "--help"):
            raise SparkSubmitError(option, "asks for help", "run `kubemill spark-submit --help`")
        takes_value = option in _VALUE_OPTIONS or option in _CONF_OPTIONS
        if not takes_value and option not in _REFUSED_VALUE_OPTIONS:
            hint = did_you_mean(option, [*_ALL_OPTIONS, *own_flags])
            raise SparkSubmitError(
                option,
                "unknown option",
                hint or "see `kubemill spark-submit --help` for the options kubemill takes",
            )
        if eq:
            value = inline
            index += 1
        elif index + 1 < len(argv):
            value = argv[index + 1]
            index += 2
        else:
            raise SparkSubmitError(option, "needs a value", f"write {option} VALUE")
        if option in _REFUSED_VALUE_OPTIONS:
            raise SparkSubmitError(option, *_REFUSED_VALUE_OPTIONS[option])
        if option in _CONF_OPTIONS:
            key, has_eq, conf_value = value.partition("=")
            if not has_eq or not key:
                raise SparkSubmitError(
                    option,
                    f"{value!r} is not KEY=VALUE",
                    f"write {option} {value or 'spark.some.key'}=VALUE as one argument "
                    "(Spark takes no separate value)",
                )
            out.conf[key] = conf_value
        else:
            setattr(out, _VALUE_OPTIONS[option], value)
    return out


def parse_spark_properties(text: str) -> dict[str, str]:
    """A Java properties file's pairs (``key=value``, ``key: value`` or ``key value``),
    as ``--properties-file`` and ``spark-defaults.conf`` are written; ``#`` and ``!``
    start comments, a trailing backslash continues a line."""
    pairs: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"^((?:\\.|[^=:\s\\])+)\s*[=:\s]?\s*(.*)$", logical)
        logical = ""
        if match is None:
            continue
        pairs[_unescape(match.group(1))] = _unescape(match.group(2).strip())
    return pairs


def _unescape(text: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(1)), text)


# --- the master --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparkMaster:
    """Where the application runs: a Kubernetes API server, or this machine."""

    substrate: Literal["kubernetes", "local"]
    server: str | None = None
    """The API server's URL (``https://`` unless the master says ``http://``)."""
    threads: int | None = None
    """``local[N]``'s N; None for ``local[*]`` (every core); 1 for ``local``."""
    text: str = ""
    """The master as given."""


_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*(\d+))?\])?$")


def parse_spark_master(text: str) -> SparkMaster:
    """``k8s://https://HOST:PORT`` (``k8s://HOST:PORT`` means https), ``local``,
    ``local[N]``, ``local[*]`` or ``local[N,F]``; anything else is refused."""
    value = text.strip()
    if value.startswith("k8s://"):
        rest = value[len("k8s://") :]
        if not rest or rest.startswith("/"):
            raise SparkSubmitError(
                "--master",
                f"{text!r} names no API server",
                "write k8s://https://HOST:PORT (the server of `kubectl cluster-info`)",
            )
        server = rest if re.match(r"^https?://", rest) else f"https://{rest}"
        return SparkMaster("kubernetes", server=server.rstrip("/"), text=text)
    match = _LOCAL.match(value)
    if match is not None:
        count = match.group(1)
        threads = 1 if count is None else (None if count == "*" else int(count))
        if threads == 0:
            raise SparkSubmitError("--master", f"{text!r} runs no threads", "use local[1] or more")
        return SparkMaster("local", threads=threads, text=text)
    raise SparkSubmitError(
        "--master",
        f"{text!r} is not supported: kubemill runs k8s:// and local",
        "use --master k8s://https://HOST:PORT, or local, local[N], local[*]",
    )


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
        "kind": "SparkApplication",
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
