"""``kubemill spark-submit --master k8s://URL`` (Spark's own cluster mode) without typer, rich,
the job models or the ``kubernetes`` package.

A submission took 0.4 s, nearly all of it imports: the ``kubernetes`` package (0.12 s),
the job models (pydantic), the client package, typer and rich; the work itself -- read the
arguments, build four objects, send four requests -- takes milliseconds. Here the console
script reads ``kubemill [-n NS] spark-submit ARGS...`` itself, builds the driver's objects
with the very functions the full command uses
(:func:`~kubemill.engines.spark.api.submit.cluster_mode_of`,
:func:`~kubemill.engines.spark.framework.cluster_mode.driver_objects`), and sends them with
:func:`kubemill.substrates.kubernetes.client.spark_submit.submit` through the transport's
:class:`~kubemill.substrates.kubernetes.transport.PlainClient` (the requests the
``kubernetes`` client would send, over a socket of its own). It prints what the full
command prints, and waits for the driver, when asked, with the full command's code
(imported once the objects exist, so the submission is not slowed by it).

``--kill`` and ``--status`` of such submissions are answered here too (``--status`` loads
the pod observation, and with it the job models, to describe the driver).

Anything else returns ``None`` before a request is sent, and the full command runs and
answers exactly as it always did: ``--help``, ``--dry-run``, ``--operator``,
``--verbose``, a local master, any argument error (the full command says it), a warning to
print, any global option but ``-n``/``--namespace``, a kubeconfig (its credentials need
the client), a proxy in the environment, an engine plugin to load, a server that cannot be
reached (nothing was sent; the full command retries and says why). An error the API server
answers is printed as the full command prints it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

from kubemill.cli.spark_args import (
    GRACE_CONF,
    NAMESPACE_CONF,
    OWN_FLAGS,
    WAIT_CONF,
    cluster_mode_wanted,
    in_namespace,
    properties_text,
)
from kubemill.engines.spark.api.argv import (
    SparkSubmitError,
    SubmitArguments,
    parse_spark_master,
    parse_spark_properties,
    parse_submit_arguments,
)
from kubemill.engines.spark.api.submit import cluster_mode_of
from kubemill.engines.spark.framework.cluster_mode import (
    SPARK_VERSION,
    ClusterModeError,
    driver_objects,
)
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.client import spark_submit as client
from kubemill.substrates.kubernetes.client.connection import Http, plain_connection
from kubemill.substrates.kubernetes.transport import PlainClient

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SUBSTRATES = ("local", "kubernetes")


def quick_spark_submit(argv: Sequence[str]) -> int | None:
    """Submit in cluster mode and return the exit code, or ``None`` if the full command
    must answer (nothing has been sent then)."""
    found = _split(argv)
    if found is None or os.environ.get("KUBEMILL_ENGINES"):
        return None
    substrate = os.environ.get("KUBEMILL_SUBSTRATE")
    if substrate is not None and substrate.lower() not in _SUBSTRATES:
        return None  # typer refuses it, with its own words
    namespace, rest = found
    try:
        args = parse_submit_arguments(rest, own_flags=OWN_FLAGS)
        if not rest or args.own_flags:
            return None
        properties = None
        if args.properties_file is not None:
            properties = parse_spark_properties(properties_text(args.properties_file))
        if args.kill is not None or args.status is not None:
            return _kill_or_status(in_namespace(args, properties, namespace), properties)
        if not cluster_mode_wanted(args, properties):
            return None
        mode = cluster_mode_of(in_namespace(args, properties, namespace), properties=properties)
        if mode.warnings or mode.verbose:
            return None
        connection = plain_connection(mode.server)
        if connection is None:
            return None
        objects = driver_objects(mode, client.generated(spark_version=SPARK_VERSION))
    except (SparkSubmitError, ClusterModeError, OSError):
        return None
    plain = connection.api_client
    assert isinstance(plain, PlainClient)
    try:
        submitted = client.submit(Http(connection), objects)
    except SubstrateError as exc:
        if not plain.sent:
            return None  # the server saw nothing: the full command tries, and says why
        _fail(str(exc))
    finally:
        plain.close()
    name = mode.conf.get("spark.app.name", "")
    _say(
        f"Deployed Spark application {name} with application ID {submitted.app_id} and "
        f"submission ID {submitted.submission_id} into Kubernetes\n"
        f"  its state: kubemill spark-submit --master k8s://{mode.server} "
        f"--status {submitted.submission_id}\n"
    )
    if mode.conf.get(WAIT_CONF, "true").strip().lower() == "false":
        return 0
    # Following the driver takes as long as the application: the full command's code
    # does it (typer and rich load now, after the submission).
    from kubemill.cli.settings import Settings
    from kubemill.cli.spark_cluster import follow_driver

    return follow_driver(Settings(namespace=namespace), mode.server, mode.conf, submitted)


def _kill_or_status(args: SubmitArguments, properties: Mapping[str, str] | None) -> int | None:
    """``--kill`` or ``--status`` as :func:`kubemill.cli.spark_cluster.kill_or_status` does
    them, or ``None`` (nothing sent) for what it would refuse."""
    conf = {**(properties or {}), **args.conf}
    given = args.master or conf.get("spark.master")
    grace = conf.get(GRACE_CONF)
    if (args.kill is None) == (args.status is None) or not given:
        return None
    if grace is not None and not grace.isdigit():
        return None
    master = parse_spark_master(given)
    target = args.kill if args.kill is not None else args.status
    if master.server is None or target is None:
        return None
    default_namespace = conf.get(NAMESPACE_CONF) or "default"
    try:
        namespace, pattern = client.parse_submission_id(target, default_namespace=default_namespace)
    except ValueError:
        return None
    connection = plain_connection(master.server)
    if connection is None:
        return None
    plain = connection.api_client
    assert isinstance(plain, PlainClient)
    http = Http(connection)
    lines = []
    try:
        if args.kill is not None:
            deleted = client.kill(
                http, namespace, pattern, grace=None if grace is None else int(grace)
            )
            lines = [f"Deleting driver pod: {namespace}:{name}" for name in deleted]
        else:
            for pod in client.find_drivers(http, namespace, pattern):
                lines.append("Application status (driver):")
                lines += [f"\t {key}: {value}" for key, value in client.driver_state(pod)]
    except SubstrateError as exc:
        if not plain.sent:
            return None  # the server saw nothing: the full command tries, and says why
        _fail(str(exc))
    finally:
        plain.close()
    if not lines:
        _fail(f"no driver pod matches {namespace}:{pattern}")
    _say("".join(f"{line}\n" for line in lines))
    return 0


def _fail(message: str) -> NoReturn:
    """The full command's one red line (rich loads only now), and exit 1."""
    from kubemill.cli.errors import EXIT_FAILURE, fail

    fail(message)
    raise SystemExit(EXIT_FAILURE)  # not reached: fail() exits


def _split(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """``[-n NS | --namespace NS | --namespace=NS] spark-submit ARGS...`` -> (NS, ARGS)."""
    words = list(argv)
    namespace = None
    while words and words[0] != "spark-submit":
        option, eq, value = words.pop(0).partition("=")
        if option not in ("-n", "--namespace") or (eq and option == "-n"):
            return None  # (click reads "-n=NS" as the namespace "=NS")
        if not eq:
            if not words:
                return None
            value = words.pop(0)
        if not _DNS_LABEL.match(value):
            return None  # the full command takes it as it is; say nothing new here
        namespace = value
    if not words:
        return None
    return namespace, words[1:]


def _say(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Nobody reads the output any more: not an error (later flushes go nowhere).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


__all__ = ["quick_spark_submit"]
