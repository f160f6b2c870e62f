"""`kubemill spark-submit --master k8s://URL`: Spark's own cluster mode, with no JVM.

The driver pod, its headless service, NetworkPolicy and ConfigMap are built as Spark's
client builds them (:mod:`kubemill.engines.spark.framework.cluster_mode`) and sent to the master's
API server (:mod:`kubemill.substrates.kubernetes.client.spark_submit`): no operator, no
application object. The API server is the master's URL, with the kubeconfig's credentials
when there is a kubeconfig (its cluster must be that server), else without any, all
through the transport's one client
(:func:`~kubemill.substrates.kubernetes.client.connection.connect_to`). The namespace is
``spark.kubernetes.namespace``, else kubemill's ``--namespace``, else ``default`` (as
Spark: not the kubeconfig context's).

``--kill`` and ``--status`` take Spark's submission ids, ``[NAMESPACE:]DRIVER-POD`` (a glob
such as ``spark-pi-*`` allowed): they delete the matching driver pods, or print their state.
``--dry-run`` prints the four objects (the dependents get their owner, the driver pod, when
submitted) and sends nothing. As Spark's client, it then waits for the driver to end
(printing its phase as it changes, exit 1 if it failed) unless
``spark.kubernetes.submission.waitAppCompletion=false``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

from kubemill.cli.spark_args import GRACE_CONF, WAIT_CONF, in_namespace
from kubemill.engines.spark.api.argv import SparkSubmitError, SubmitArguments, parse_spark_master
from kubemill.engines.spark.api.submit import cluster_mode_of
from kubemill.engines.spark.framework.cluster_mode import (
    SPARK_VERSION,
    ClusterModeError,
    driver_objects,
)
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.client import spark_submit as client
from kubemill.substrates.kubernetes.client.connection import Http, connect_to

if TYPE_CHECKING:
    from kubemill.cli.settings import Settings
    from kubemill.substrates.kubernetes.observe import PodSnapshot

INTERVAL_CONF = "spark.kubernetes.report.interval"


class Where:
    """The global options this code reads (a :class:`~kubemill.cli.settings.Settings` has
    them too): the console script's way in passes this, without the settings module."""

    __slots__ = ("context", "kubeconfig", "namespace")

    def __init__(
        self,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.kubeconfig = kubeconfig
        self.context = context


def submit_cluster(
    settings: Settings | Where,
    args: SubmitArguments,
    properties: Mapping[str, str] | None,
    *,
    dry_run: bool,
) -> int:
    """Build the driver's objects and create them (or print them with ``dry_run``)."""
    args = in_namespace(args, properties, settings.namespace)
    try:
        mode = cluster_mode_of(args, properties=properties)
        for warning in mode.warnings:
            _warn(f"warning: {warning}", style="yellow")
        if mode.verbose:
            _warn(f"master: kubernetes ({mode.server}), cluster mode")
        objects = driver_objects(mode, client.generated(spark_version=SPARK_VERSION))
    except (SparkSubmitError, ClusterModeError) as exc:
        _fail(str(exc))
    if dry_run:
        from kubemill.cli.manifests import print_yaml

        print_yaml([objects.pod, objects.service, objects.network_policy, objects.config_map])
        return 0
    try:
        http = _http(settings, mode.server)
        try:
            submitted = client.submit(http, objects)
        finally:
            http.connection.api_client.close()
    except SubstrateError as exc:
        _fail(str(exc))
    name = mode.conf.get("spark.app.name", "")
    _say(
        f"Deployed Spark application {name} with application ID {submitted.app_id} and "
        f"submission ID {submitted.submission_id} into Kubernetes\n"
        f"  its state: kubemill spark-submit --master k8s://{mode.server} "
        f"--status {submitted.submission_id}\n"
    )
    if mode.conf.get(WAIT_CONF, "true").strip().lower() == "false":
        return 0
    return follow_driver(settings, mode.server, mode.conf, submitted)


def follow_driver(
    settings: Settings | Where, server: str, conf: Mapping[str, str], submitted: client.Submitted
) -> int:
    """Follow the driver until it ends, as Spark's client does by default; exit 1 if it
    failed. Interrupting stops the waiting, not the application."""
    try:
        interval = report_interval(conf.get(INTERVAL_CONF, "1s"))
    except ValueError:
        _fail(f"--conf {INTERVAL_CONF}: {conf[INTERVAL_CONF]!r} is not a time (1s, 500ms)")
    _say(f"  waiting for the driver to end (--conf {WAIT_CONF}=false returns at once)\n")

    def said(pod: PodSnapshot) -> None:
        _say(f"Application status for {submitted.app_id} (phase: {pod.phase})\n")

    try:
        pod = client.wait_for_driver(
            _http(settings, server), submitted, interval=interval, on_phase=said
        )
    except KeyboardInterrupt:
        _warn(
            f"stopped waiting; {submitted.submission_id} keeps running "
            f"(--kill {submitted.submission_id} stops it)"
        )
        return 130
    except SubstrateError as exc:
        _fail(f"while waiting for the driver: {exc}")
    code, reason = client.driver_exit(pod)
    phase = pod.phase
    _say(
        f"Application {conf.get('spark.app.name', '')} with application ID {submitted.app_id} "
        f"and submission ID {submitted.submission_id} finished: {phase}"
        + (f" (exit code {code}{', ' + reason if reason else ''})" if code is not None else "")
        + "\n"
    )
    return 0 if phase == "Succeeded" else 1


def report_interval(text: str) -> float:
    """``spark.kubernetes.report.interval`` in seconds: ``1s``, ``500ms``, ``2m``; a bare
    number is milliseconds, as Spark reads it."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*", text.lower())
    if match is None:
        raise ValueError(text)
    value = float(match.group(1))
    scale = {None: 0.001, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0}[match.group(2)]
    seconds = value * scale
    if seconds <= 0:
        raise ValueError(text)
    return seconds


def kill_or_status(
    settings: Settings | Where, args: SubmitArguments, properties: Mapping[str, str] | None
) -> int:
    """``--kill`` or ``--status`` of the matching driver pods."""
    args = in_namespace(args, properties, settings.namespace)
    option, target = ("--kill", args.kill) if args.kill is not None else ("--status", args.status)
    assert target is not None
    conf = {**(properties or {}), **args.conf}
    try:
        if args.kill is not None and args.status is not None:
            raise SparkSubmitError("--kill", "and --status together", "give one of them")
        given = args.master or conf.get("spark.master")
        master = parse_spark_master(given) if given else None
        if master is None or master.server is None:
            raise SparkSubmitError(
                "--master",
                f"{option} asks a Kubernetes API server",
                "add --master k8s://https://HOST:PORT",
            )
        default_namespace = conf.get("spark.kubernetes.namespace") or "default"
        try:
            namespace, pattern = client.parse_submission_id(
                target, default_namespace=default_namespace
            )
        except ValueError as exc:
            raise SparkSubmitError(option, str(exc), "e.g. default:spark-pi-*") from None
        grace = conf.get(GRACE_CONF)
        if grace is not None and not grace.isdigit():
            raise SparkSubmitError(f"--conf {GRACE_CONF}", f"{grace!r} is not whole seconds")
        http = _http(settings, master.server)
        if args.kill is not None:
            deleted = client.kill(
                http, namespace, pattern, grace=None if grace is None else int(grace)
            )
            if not deleted:
                _fail(f"no driver pod matches {namespace}:{pattern}")
            _say("".join(f"Deleting driver pod: {namespace}:{name}\n" for name in deleted))
            return 0
        pods = client.find_drivers(http, namespace, pattern)
    except (SparkSubmitError, SubstrateError) as exc:
        _fail(str(exc))
    if not pods:
        _fail(f"no driver pod matches {namespace}:{pattern}")
    lines = []
    for pod in pods:
        lines.append("Application status (driver):")
        lines += [f"\t {key}: {value}" for key, value in client.driver_state(pod)]
    _say("".join(f"{line}\n" for line in lines))
    return 0


def _http(settings: Settings | Where, server: str) -> Http:
    return Http(connect_to(server, kubeconfig=settings.kubeconfig, context=settings.context))


def _say(text: str) -> None:
    """``text`` on stdout, at once."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Nobody reads the output any more: not an error (later flushes go nowhere).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _warn(text: str, *, style: str | None = None) -> None:
    """A line on stderr (rich loads only now)."""
    from kubemill.cli.errors import stderr_console

    stderr_console().print(text, style=style)


def _fail(message: str) -> NoReturn:
    """The CLI's one red line (rich loads only now), and exit 1."""
    from kubemill.cli.errors import EXIT_FAILURE, fail

    fail(message)
    raise SystemExit(EXIT_FAILURE)  # not reached: fail() exits
