"""``kubemill spark-submit``: spark-submit's own command line, as a Spark application.

The arguments reach this module untouched (the command takes no options of its own
through typer) and are read by :mod:`kubemill.engines.spark.api.argv`, as Spark reads them.
kubemill's own flags stand among the options, before the application file:
``--dry-run`` prints the application's manifest as YAML and submits nothing.

Otherwise the application goes where ``--master`` says. ``k8s://`` (cluster mode) creates
the driver's objects as Spark's own client does, with no JVM and no operator
(:mod:`kubemill.cli.spark_cluster`, which also serves ``--kill`` and ``--status``);
with ``--operator`` it is an application object for the operator instead, on the Kubernetes
substrate (the kubeconfig's cluster must be that server). ``local[...]`` runs it here and
now, as spark-submit does: in the foreground (its output as it comes, Ctrl-C stops it),
exiting with the application's verdict; the master as given is kept in the annotation
``kubemill.dev/spark-local-master`` (the driver runs pyspark's spark-submit with it), and a
relative application file is from the current directory.

**Every submission is a job of its own**, named ``<name>-<id>`` (:func:`per_submission`),
locally and with ``--operator``: spark-submit never refuses a re-run of the same command
(on Kubernetes each submission gets a fresh driver pod ``<name>-<id>-driver``), and two
submissions of one name may run at once. So a re-run never replaces, stops or waits for an
earlier application of that name, running or finished; the name is printed before anything
runs, and ``kubemill get``/``logs``/``delete`` take it. ``<id>`` is Spark's own
``uniqueID`` (16 hex: 3 random bytes, then the time), the id in the Kubernetes names of
Spark's cluster mode; Spark itself (its UI, its logs, ``spark.app.name``) still calls the
application by the name given. ``--dry-run`` prints the manifest with the name as given:
nothing is submitted, so there is no submission to name.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import typer

from kubemill.api import Job
from kubemill.cli import spark_cluster
from kubemill.cli.errors import fail, stderr_console
from kubemill.cli.settings import Settings, Substrate
from kubemill.cli.spark_args import (
    DRY_RUN,
    HELP,
    OPERATOR,
    OWN_FLAGS,
    cluster_mode_wanted,
    read_properties_file,
)
from kubemill.engines.spark.api.argv import (
    SUBMIT_USAGE,
    SparkSubmitError,
    parse_spark_properties,
    parse_submit_arguments,
)
from kubemill.engines.spark.api.names import APPLICATION_KIND, MAX_NAME, UI_SERVICE_SUFFIX
from kubemill.engines.spark.api.submit import SparkSubmit, submission_of

NOT_REGISTERED = (
    f"the {APPLICATION_KIND} kind is not registered in this kubemill yet; --dry-run shows the "
    "manifest"
)


def spark_submit(settings: Settings, argv: list[str]) -> int:
    """Parse ``argv`` (spark-submit's arguments), then print or submit. Returns the exit code."""
    try:
        args = parse_submit_arguments(argv, own_flags=OWN_FLAGS)
        if not argv or args.own_flags & set(HELP):
            typer.echo(SUBMIT_USAGE, nl=False)
            return 0
        properties = None
        if args.properties_file is not None:
            properties = parse_spark_properties(read_properties_file(args.properties_file))
        if args.kill is not None or args.status is not None:
            return spark_cluster.kill_or_status(settings, args, properties)
        if cluster_mode_wanted(args, properties):
            return spark_cluster.submit_cluster(
                settings, args, properties, dry_run=DRY_RUN in args.own_flags
            )
        submission = submission_of(args, properties=properties)
        if OPERATOR in args.own_flags and submission.master.substrate != "kubernetes":
            raise SparkSubmitError(
                OPERATOR, "submits to kubemill's operator on a cluster", "add --master k8s://URL"
            )
    except SparkSubmitError as exc:
        fail(str(exc))
        return 1  # not reached: fail() exits
    for warning in submission.warnings:
        stderr_console().print(f"warning: {warning}", style="yellow")
    if submission.verbose:
        _verbose(submission)
    if submission.master.substrate == "local":
        submission = _keep_local_master(submission)
    if DRY_RUN in args.own_flags:
        from kubemill.cli.manifests import print_yaml

        print_yaml([submission.manifest])
        return 0
    return _submit(settings, submission)


def _keep_local_master(submission: SparkSubmit) -> SparkSubmit:
    """The manifest with ``local[...]`` as given in its annotation (the application's kind
    has no field for it; locally it otherwise runs local[instances x cores])."""
    from kubemill.engines.spark.local import LOCAL_MASTER_ANNOTATION

    manifest = copy.deepcopy(submission.manifest)
    annotations = manifest.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[LOCAL_MASTER_ANNOTATION] = submission.master.text.strip()
    return replace(submission, manifest=manifest)


SUBMISSION_ID_LENGTH = 16
"""Spark's ``uniqueID``: 16 hex digits."""
MAX_SUBMITTED_NAME = MAX_NAME - len(UI_SERVICE_SUFFIX)
"""An application's name leaves room for its ``<name>-ui-svc`` service."""


def per_submission(submission: SparkSubmit, unique_id: str) -> SparkSubmit:
    """The submission as a job of its own: named ``<name>-<unique_id>`` (the name cut so
    that the whole fits, as Spark cuts its resource prefix), ``spark.app.name`` keeping the
    name Spark shows. See the module doc for why."""
    manifest = copy.deepcopy(submission.manifest)
    metadata = manifest.setdefault("metadata", {})
    spec = manifest.setdefault("spec", {})
    name = str(metadata["name"])
    conf = spec.setdefault("sparkConf", {})
    conf.setdefault("spark.app.name", name)
    room = MAX_SUBMITTED_NAME - len(unique_id) - 1
    metadata["name"] = f"{name[:room].rstrip('-')}-{unique_id}"
    return replace(submission, manifest=manifest)


def _unique_id() -> str:
    """A fresh submission id, as Spark's cluster mode draws one."""
    import time

    from kubemill.substrates.kubernetes.client.spark_submit import unique_id

    return unique_id(time.time_ns() // 1_000_000)


def _verbose(submission: SparkSubmit) -> None:
    master = submission.master
    where = master.server if master.substrate == "kubernetes" else master.text
    stderr_console().print(f"master: {master.substrate} ({where})")


def _submit(settings: Settings, submission: SparkSubmit) -> int:
    from kubemill.kinds import UnknownKind, engine_for, load_one

    try:
        engine_for(APPLICATION_KIND)
    except UnknownKind:
        fail(NOT_REGISTERED)
    submission = per_submission(submission, _unique_id())
    job = load_one(submission.manifest)
    master = submission.master
    chosen = Settings(
        substrate=Substrate.KUBERNETES if master.substrate == "kubernetes" else Substrate.LOCAL,
        kubeconfig=settings.kubeconfig,
        context=settings.context,
        namespace=settings.namespace,
        state_dir=settings.state_dir,
        replay_flags=list(settings.replay_flags),
    )
    if master.substrate == "local":
        # Before anything runs: the name to give `kubemill get`, `logs` and `delete`.
        stderr_console().print(
            f"{job.KIND} {job.name}: this submission's name, for "
            f"`{chosen.next_command('get', job.name)}`, `logs` and `delete`",
        )
        return _run_here(chosen, job)
    if master.server is not None:
        _check_server(chosen, master.server)
    view = chosen.client().submit(job, detach=True, namespace=chosen.namespace)
    typer.echo(f"{view.kind} {view.name} submitted ({master.substrate})")
    typer.echo(f"  follow it: {chosen.next_command('get', view.name)}")
    return 0


def _run_here(settings: Settings, job: Job) -> int:
    """Run the application in the foreground, as ``kubemill run`` does (files relative to
    the current directory, as spark-submit takes them)."""
    from kubemill.cli.console import stdout_console
    from kubemill.cli.run import Follower

    follower = Follower(settings.client(exclusive=True), stdout_console(), settings)
    return follower.run(job, base_dir=str(Path.cwd()))


def _check_server(settings: Settings, server: str) -> None:
    """The kubeconfig's cluster must be the master's server: kubemill talks to the API
    server with the kubeconfig's credentials, which belong to that cluster only."""
    from kubemill.substrates.kubernetes.client.connection import connect

    connection = connect(kubeconfig=settings.kubeconfig, context=settings.context)
    if connection.server.rstrip("/") != server:
        fail(
            f"--master k8s://{server}: the kubeconfig's cluster is {connection.server}; "
            "choose the context of that server with `kubemill --context NAME spark-submit ...`"
        )
