"""spark-submit's command line, read as Spark reads it: options, the properties file, the master.

:func:`parse_submit_arguments` reads the argv of ``spark-submit`` (options, then the
application file, then the application's own arguments, untouched) the way Spark's
``SparkSubmitArguments`` does: ``--opt value`` or ``--opt=value``, ``--conf k=v`` (``-c``
too) repeatable, the first word that is not an option is the application. Options of other
cluster managers (``--total-executor-cores``, ``--queue``, ``--supervise``) are refused with
what to use instead, rather than ignored. :func:`parse_spark_properties` reads a
``--properties-file``'s text (the caller reads the file), :func:`parse_spark_master` the
master. What a submission becomes is :mod:`kubemill.engines.spark.api.submit`'s to say.

Pure and model-free (no pydantic): ``kubemill spark-submit``'s fast path imports it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kubemill.api.errors import did_you_mean

DEFAULT_MASTER = "local[*]"
"""Spark's master when neither ``--master`` nor ``spark.master`` names one."""


class SparkSubmitError(ValueError):
    """A spark-submit argument kubemill cannot take: which one, what is wrong, what to do."""

    def __init__(self, argument: str, message: str, hint: str = "") -> None:
        self.argument = argument
        self.message = message
        self.hint = hint
        text = f"{argument}: {message}" if argument else message
        super().__init__(f"{text} ({hint})" if hint else text)


SUBMIT_USAGE = """\
Usage: kubemill spark-submit [kubemill flags] [spark-submit options] APP [APP ARGS]...

  Submit a Spark application with spark-submit's own arguments.

kubemill flags:
  --dry-run                 Print what would be created (YAML; a SparkApplication is
                            named as given, without the submission's -<id>); submit nothing.
  --operator                With k8s://: a SparkApplication for kubemill's operator
                            (retries, status), instead of Spark's own cluster mode.
  -h, --help                Show this message.

spark-submit options:
  --master MASTER           k8s://https://HOST:PORT, local, local[N] or local[*] (default).
                            k8s:// creates the driver pod, its service, NetworkPolicy and
                            ConfigMap as Spark's cluster mode does (no JVM, no operator).
  --deploy-mode MODE        cluster (with k8s://; the default here), or client with local.
  --kill [NS:]DRIVER-POD    Delete the driver pods of a k8s:// submission (a glob allowed).
  --status [NS:]DRIVER-POD  Print the state of those driver pods.
  --name NAME               The application's name. Each submission is a job of its own,
                            named NAME-<id> (cleaned; printed), so a re-run never
                            touches an earlier one.
  --class CLASS             The main class of a jar application.
  --conf, -c KEY=VALUE      A Spark property (repeatable).
  --properties-file FILE    Spark properties to load (--conf wins over them).
  --jars, --files, --py-files, --archives LIST      Comma-separated dependencies.
  --packages, --exclude-packages, --repositories LIST   Maven dependencies.
  --driver-memory MEM, --driver-cores N
  --executor-memory MEM, --executor-cores N, --num-executors N
  --proxy-user NAME, --principal NAME, --keytab FILE
  --driver-java-options, --driver-library-path, --driver-class-path
  --verbose, -v             Print what was parsed.

APP is the application's jar (with --class), .py or .R file; local:// is a path in the
image. Everything after it goes to the application.
"""
"""``kubemill spark-submit --help``: kubemill's own flags (read by the CLI), then the
options this module reads."""


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
