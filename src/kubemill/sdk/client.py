"""``JobClient``: submit, watch, read the logs of, and delete jobs, on any substrate.

The methods are the same whichever substrate serves them; only the constructor's
options differ (``state_dir`` for local, ``kubeconfig``/``context`` for a cluster)::

    from kubemill.sdk import JobClient

    client = JobClient()                                  # local substrate
    view = client.submit("examples/pytorch-ddp.yaml")     # detached: returns at once
    for line in client.logs(view.name, follow=True):
        print(line.replica, line.text)
    print(client.wait(view.name).phase)                   # Succeeded / Failed

A Python function runs as a distributed training job, as the Kubeflow SDK's
``TrainerClient.train(trainer=CustomTrainer(func=...))`` runs one: ``client.train(func,
num_nodes=2)`` sends the function's source through a training runtime (``torch-distributed``:
each node runs it under torchrun) and returns at once; :meth:`JobClient.wait` for its end.

Not every kind finishes. A schedule (a controller kind) starts a job at each due
time and never ends itself: :meth:`JobClient.wait` and :meth:`JobClient.run` refuse it
with :class:`NeverFinishes` (wait for one of its runs instead, named in its status'
``lastRunName``). A service cluster (an engine whose jobs never finish) serves until it
is stopped: ``wait`` returns once the core judges it Ready (or it ended), which is what a
program waits for before it connects; it has no suspend (:meth:`JobClient.suspend` refuses it).
"""

from __future__ import annotations

import builtins
import importlib.metadata
import inspect
import os
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubemill.api import ConditionType, FieldError, Job, ManifestError
from kubemill.kinds import UnknownKind, controller_for, entry_for, is_controller, load_one
from kubemill.sdk.backends import backend_for
from kubemill.sdk.manifests import load_path
from kubemill.substrates.base import Children, JobView, SubmitOptions, SubstrateError

if TYPE_CHECKING:
    from kubemill.substrates.history import JobRecord
    from kubemill.substrates.reads import (
        EventRecord,
        LogLine,
        ProgressPoint,
        ResourceReport,
    )

JobSource = Job | str | os.PathLike[str] | Mapping[str, Any]
"""A job model, a manifest file's path, YAML text, or a manifest as a dict."""

_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
SERVICE_POLL_SECONDS = 0.25
"""How often :meth:`JobClient.wait` looks at a service cluster until it is Ready."""


class MissingPackages(SubstrateError):
    """Packages a function's job needs that the local environment lacks; the local
    substrate installs none (no per-job virtualenv, no reinstall), so the message names
    them and says how to install them."""


def missing_packages(packages: Sequence[str]) -> builtins.list[str]:
    """The requirements of ``packages`` this interpreter's environment does not satisfy
    (not installed, or, where ``packaging`` is importable, at a version outside the
    requirement's)."""
    from kubemill.engines.trainer.api.function import requirement_name

    missing = []
    for requirement in packages:
        name = requirement_name(requirement)
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement)
            continue
        if requirement.strip() != name and not _satisfies(requirement, installed):
            missing.append(requirement)
    return missing


def _satisfies(requirement: str, installed: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(requirement).specifier.contains(installed, prereleases=True)
    except InvalidRequirement as exc:
        raise ValueError(f"packages: {requirement!r} is no pip requirement: {exc}") from None


class NeverFinishes(SubstrateError):
    """Waiting for a job of a kind that never finishes (a schedule); the message says
    what to wait for instead."""


def runs_of(kind: str) -> str | None:
    """The kind of the jobs a controller kind (a schedule) creates; None for other kinds."""
    return controller_for(kind).controls if is_controller(kind) else None


def is_service(kind: str) -> bool:
    """Whether jobs of ``kind`` serve until stopped (a service cluster), never finishing."""
    try:
        return getattr(entry_for(kind), "finishes", True) is False
    except UnknownKind:
        return False


def has_suspend(kind: str) -> bool:
    """Whether ``kind``'s spec has the field its suspend patch sets (``SUSPEND_FIELD``): a
    service cluster whose upstream can suspend it (its pods stop, the object stays) has
    one; one without it serves until stopped."""
    model: Any = entry_for(kind).api.model
    for wire in ("spec", *model.SUSPEND_FIELD):
        fields = getattr(model, "model_fields", {})
        found = next((f for n, f in fields.items() if wire in (n, f.alias)), None)
        if found is None:
            return False
        model = found.annotation
    return True


def _never_finishes(kind: str, name: str, *, runs: str) -> NeverFinishes:
    return NeverFinishes(
        f"{kind} {name} never finishes: it starts a {runs} at each due time. Wait for one "
        f"of its runs instead, e.g. client.wait(client.get({name!r}).job.status.lastRunName"
        " ...) once it has one (its runs are listed with client.list())"
    )


def load_source(source: JobSource) -> tuple[Job, str | None]:
    """The one job in ``source`` and, for a file, its directory (the default base dir).

    A ``str`` is a path when it is one line that names an existing file or ends in
    ``.yaml``/``.yml``/``.json``; otherwise it is YAML text.
    """
    if isinstance(source, Job):
        # A model built or changed in code skipped the checks a manifest gets (assignment
        # is not validated: metadata.name could be "../x"); its wire form gets them now.
        wire = source.to_wire()
        wire.pop("status", None)
        checked = load_one(wire, name=f"{type(source).__name__} object")
        # Errors found later (e.g. "not runnable locally") still point at the fields the
        # user wrote, e.g. in a converted v1alpha1 manifest.
        checked.set_source_paths(source.source_path)
        return checked, None
    if isinstance(source, Mapping):
        return load_one(source), None
    if isinstance(source, str) and ("\n" in source or not _looks_like_path(source)):
        return load_one(source), None
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            "a job is a Job model, a manifest file's path, YAML text or a manifest dict;"
            f" got {type(source).__name__} {source!r:.60}"
        )
    path = Path(source)
    jobs = load_path(path)
    if len(jobs) != 1:
        raise ManifestError(
            [
                FieldError(
                    "",
                    f"holds {len(jobs)} jobs; submit takes one",
                    "split the file, or load it with kubemill.kinds.load and submit each job",
                    source=str(path),
                )
            ]
        )
    return jobs[0], str(path.absolute().parent)


def _check_timeout(timeout: float | None) -> None:
    """Refuse a timeout that cannot mean anything (negative, NaN) before doing anything."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
    if not timeout >= 0:
        raise ValueError(f"timeout must be >= 0 seconds (or None: no limit), got {timeout!r}")


def _looks_like_path(text: str) -> bool:
    return text.endswith(_MANIFEST_SUFFIXES) or Path(text).is_file()


class JobClient:
    """Jobs on one substrate (``"local"`` by default, or ``"kubernetes"``).

    ``namespace`` is the default for every method (``default`` when unset; ``list``
    without one covers all namespaces). Other keyword options go to the substrate:
    ``state_dir`` and ``config_path`` for local.
    """

    def __init__(
        self,
        substrate: str = "local",
        *,
        state_dir: str | os.PathLike[str] | None = None,
        namespace: str | None = None,
        **options: Any,
    ) -> None:
        self.substrate = substrate
        self.namespace = namespace
        self.backend = backend_for(substrate, state_dir=state_dir, **options)

    def _ns(self, namespace: str | None) -> str | None:
        return namespace if namespace is not None else self.namespace

    def submit(
        self,
        job: JobSource,
        *,
        detach: bool = True,
        namespace: str | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        owner_pid: int | None = None,
    ) -> JobView:
        """Record the job and start it; returns at once with the job as just created.

        ``detach=True`` hands it to a background supervisor that outlives this process.
        ``detach=False`` supervises it from a thread of this process (fastest start;
        the job stops if this process dies): follow it with :meth:`logs`, :meth:`wait`,
        and stop it with :meth:`interrupt`. ``base_dir`` is where relative
        ``workingDir`` resolve (default: the manifest's directory for a path, else the
        current directory). ``owner_pid`` (local substrate only) names the process that
        owns the job, usually ``os.getpid()``: once that process has ended, however it
        ended, the job is stopped and deleted. Raises ``ManifestError`` for a bad manifest,
        ``JobExists`` if the name is taken, ``NotRunnableLocally`` if the local
        substrate cannot run it (e.g. a container without ``command``).
        """
        if owner_pid is not None and self.substrate != "local":
            raise SubstrateError(
                f"owner_pid: only the local substrate stops a job when a process ends; on"
                f" {self.substrate} the job outlives this program until it is deleted"
            )
        model, source_dir = load_source(job)
        chosen = base_dir if base_dir is not None else source_dir
        options = SubmitOptions(
            detach=detach,
            namespace=self._ns(namespace),
            base_dir=None if chosen is None else str(chosen),
            owner_pid=owner_pid,
        )
        return self.backend.submit(model, options)

    def run(
        self,
        job: JobSource,
        *,
        namespace: str | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
    ) -> JobView:
        """Submit in the foreground and wait for the end; Ctrl-C interrupts the job.

        Returns the finished job (or, after ``timeout``, the job as it is then). A service
        cluster is submitted detached, as ``kubemill run`` submits one, and returned once
        Ready (see :meth:`wait`): it serves in the background until :meth:`delete`. A
        schedule raises :class:`NeverFinishes`, submitting nothing.
        """
        _check_timeout(timeout)
        model, source_dir = load_source(job)
        runs = runs_of(model.KIND)
        if runs is not None:
            # Nothing is submitted: a schedule would outlive this call, which never returns.
            raise NeverFinishes(
                f"{model.KIND} {model.name} never finishes, so it cannot be run to its end:"
                f" submit it with client.submit(...) (it runs in the background, starting a"
                f" {runs} at each due time), then wait for one of its runs"
            )
        chosen = base_dir if base_dir is not None else source_dir
        # A service never ends: in the foreground it would live only as long as this call.
        detach = is_service(model.KIND)
        view = self.submit(model, detach=detach, namespace=namespace, base_dir=chosen)
        try:
            return self.wait(view.name, view.namespace, timeout=timeout)
        except KeyboardInterrupt:
            self.interrupt(view.name, view.namespace, why="Ctrl-C in JobClient.run")
            raise

    def train(
        self,
        func: Callable[..., Any],
        *,
        num_nodes: int | None = None,
        runtime: str = "torch-distributed",
        packages: Sequence[str] = (),
        num_proc_per_node: int | str | None = None,
        func_args: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        resources_per_node: Mapping[str, Any] | None = None,
        image: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        pip_index_urls: Sequence[str] | None = None,
    ) -> JobView:
        """Run ``func`` as a training job of ``num_nodes`` nodes (the runtime's count when
        None) through the training runtime ``runtime``; returns at once, as the Kubeflow
        SDK's ``TrainerClient.train`` does (:meth:`wait` for the end, :meth:`logs` for the
        output).

        The function's source (it must be self-contained: its imports inside it) is sent
        in the job's command and called with ``func_args`` as keyword arguments, on every
        node, under the runtime's entry point (torchrun for ``torch-distributed``, with
        ``num_proc_per_node`` processes per node: the runtime's, ``auto``, when None).
        ``packages`` are pip requirements: on Kubernetes each node installs them first (from
        ``pip_index_urls``, PyPI's when None); locally nothing is installed: they must be
        installed already, and :class:`MissingPackages` names those that are not. ``name``
        defaults to a fresh one, like upstream's.
        """
        if not callable(func):
            raise TypeError(f"func must be a function, got {type(func).__name__}")
        try:
            source = textwrap.dedent(inspect.getsource(func))
            func_file = Path(inspect.getfile(func)).name
        except (OSError, TypeError) as exc:
            raise ValueError(f"func: the source of {func!r} cannot be read ({exc})") from None
        to_install = tuple(packages)
        if self.substrate == "local":
            missing = missing_packages(to_install)
            if missing:
                raise MissingPackages(
                    f"packages: {', '.join(missing)} not installed in this environment, and"
                    " the local substrate installs none; install them first (pip install "
                    + " ".join(missing)
                    + ")"
                )
            to_install = ()
        # The function's job is a training runtime's: its engine is imported only here, so
        # that a client which never trains loads no more than the kinds it submits.
        from kubemill.engines.trainer.api.function import DEFAULT_PIP_INDEX_URL, function_trainjob

        manifest = function_trainjob(
            source,
            func.__name__,
            name=name or f"t{uuid.uuid4().hex[:11]}",
            func_file=func_file if func_file.endswith(".py") else "train.py",
            runtime=runtime,
            namespace=self._ns(namespace),
            num_nodes=num_nodes,
            num_proc_per_node=num_proc_per_node,
            func_args=func_args,
            packages=to_install,
            pip_index_urls=(DEFAULT_PIP_INDEX_URL,) if pip_index_urls is None else pip_index_urls,
            env=env,
            resources_per_node=resources_per_node,
            image=image,
        )
        return self.submit(manifest, namespace=namespace)

    def get(self, name: str, namespace: str | None = None) -> JobView:
        """The job now. Raises ``JobNotFound``."""
        return self.backend.get(name, self._ns(namespace))

    def list(self, namespace: str | None = None) -> builtins.list[JobView]:
        """Every job of ``namespace`` (all namespaces when neither it nor the client's is set)."""
        return self.backend.list(self._ns(namespace))

    def history(self, namespace: str | None = None) -> builtins.list[JobRecord]:
        """Records of deleted jobs (of ``namespace``, else the client's, else all), oldest
        deletion first: on Kubernetes, those the operator keeps (``kubemill install
        --history``); none on a substrate that keeps nothing of a deleted job (local: a
        finished job stays in ``list`` until it is deleted)."""
        from kubemill.substrates.history import KeepsHistory  # a read's only, as JobRecord

        if not isinstance(self.backend, KeepsHistory):
            return []
        return self.backend.history(self._ns(namespace))

    def wait(
        self, name: str, namespace: str | None = None, *, timeout: float | None = None
    ) -> JobView:
        """Block until the job has finished and its processes stopped, or ``timeout``.

        Check ``view.finished`` on the result after a timeout. A service cluster
        never finishes by itself: for one, this returns once it is Ready
        (its ``Ready`` condition True, the endpoint in its status), or once it ended
        (stopped or failed), or at ``timeout``; check ``view.status`` for which. A schedule (a
        controller kind) never finishes at all: :class:`NeverFinishes` is
        raised at once, naming what to wait for instead (one of its runs).
        """
        _check_timeout(timeout)
        ns = self._ns(namespace)
        kind = self.get(name, ns).kind
        runs = runs_of(kind)
        if runs is not None:
            raise _never_finishes(kind, name, runs=runs)
        if is_service(kind):
            return self._wait_ready(name, ns, timeout)
        return self.backend.wait(name, ns, timeout)

    def _wait_ready(self, name: str, namespace: str | None, timeout: float | None) -> JobView:
        """Poll a service cluster until it is Ready or has ended, or ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = self.get(name, namespace)
            if view.finished or view.status.is_true(ConditionType.READY):
                return view
            if deadline is not None and time.monotonic() >= deadline:
                return view
            remaining = SERVICE_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            time.sleep(max(0.0, min(SERVICE_POLL_SECONDS, remaining)))

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        replica: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        since: datetime | timedelta | None = None,
        limit_bytes: int | None = None,
        timestamps: bool = False,
    ) -> Iterator[LogLine]:
        """The replicas' output lines; ``replica`` picks one (``worker-1`` or the full
        name). ``follow`` yields lines as they are written, interleaved across replicas,
        until the job has finished and everything was read.

        As ``kubectl logs`` does, per replica: ``tail`` gives only the last N lines,
        ``since`` only lines written at or after a time (a ``datetime``) or within a
        duration before now (a ``timedelta``), ``limit_bytes`` at most that many bytes,
        and ``timestamps`` starts each line's text with its time (``line.time`` is set
        either way when known). Bad values raise ``ValueError`` naming the argument.
        """
        # Loaded by a read only, as the records it returns (kubemill.substrates.reads).
        from kubemill.substrates.reads import LogQuery

        query = LogQuery(tail=tail, since=since, limit_bytes=limit_bytes, timestamps=timestamps)
        lines = self.backend.logs(
            name, self._ns(namespace), replica=replica, follow=follow, query=query
        )
        return (line.stamped() for line in lines) if timestamps else lines

    def events(self, name: str, namespace: str | None = None) -> builtins.list[EventRecord]:
        """Events recorded on the job, oldest first."""
        return self.backend.events(name, self._ns(namespace))

    def progress(self, name: str, namespace: str | None = None) -> builtins.list[ProgressPoint]:
        """The progress reports of the job's program, oldest first, for a plot of its
        metrics over steps (locally every report; on Kubernetes the latest only)."""
        return self.backend.progress(name, self._ns(namespace))

    def children(self, name: str, namespace: str | None = None) -> Children | None:
        """The pods the job's program created itself (a Spark application's executors),
        where its kind has such (None if it has not): on Kubernetes the pods its engine's
        labels select; locally none, with a note saying what they are there."""
        return self.backend.children(name, self._ns(namespace))

    def resources(self, name: str, namespace: str | None = None) -> ResourceReport:
        """Each replica's CPU (cores busy) and memory over time, oldest first: locally as
        the supervisor sampled them every few seconds, kept with the job; on Kubernetes the
        latest sample of each pod from the cluster's metrics API, or a ``note`` saying the
        cluster has none."""
        return self.backend.resources(name, self._ns(namespace))

    def interrupt(
        self,
        name: str,
        namespace: str | None = None,
        *,
        force: bool = False,
        why: str = "kubemill interrupt",
    ) -> JobView:
        """Stop the job for good; it is recorded Failed with reason ``Interrupted``.

        The same on every substrate: the stop annotation (``kubemill.dev/stop``) goes on
        the job, the core fails it and deletes its pods. Waits until its replicas have
        stopped (``force``: no grace period) and returns the job then. A job that already
        finished is left as it is. ``why`` (who asked, and why) is the annotation's value
        and shows in the Failed condition's message.
        """
        return self.backend.interrupt(name, self._ns(namespace), force=force, why=why)

    def suspend(self, name: str, namespace: str | None = None) -> JobView:
        """Suspend the job: its replicas are stopped, and it stays, Suspended, until resumed.

        The same on every substrate: ``spec.runPolicy.suspend`` is set and the core
        deletes the pods. Returns at once; :meth:`get` shows Suspended once that is done.
        Restarts counted so far are kept. Raises ``SubstrateError`` for a finished job.
        For a schedule, ``spec.suspend`` is set: no new run starts, and runs already
        started go on. A service cluster whose kind has no suspend field (:func:`has_suspend`)
        cannot be: ``SubstrateError``, and nothing changes (stop it with :meth:`interrupt`
        or :meth:`delete`); one that has (KubeRay's) stops its replicas as a job does.
        """
        ns = self._ns(namespace)
        self._refuse_service(name, ns, "suspended")
        return self.backend.suspend(name, ns)

    def resume(self, name: str, namespace: str | None = None) -> JobView:
        """Resume a suspended job: ``spec.runPolicy.suspend`` is cleared and the core
        creates its replicas again (``startTime`` restarts, as upstream). Locally, a job
        whose supervisor has gone meanwhile gets a new detached one. A schedule starts
        runs again from its next due time on (times missed meanwhile are not made up)."""
        ns = self._ns(namespace)
        self._refuse_service(name, ns, "resumed")
        return self.backend.resume(name, ns)

    def scale(
        self,
        name: str,
        replicas: int,
        *,
        group: str | None = None,
        namespace: str | None = None,
    ) -> JobView:
        """Give a group of a running job (``group``; None: its only one) ``replicas``
        replicas, for kinds whose engine scales groups (a Ray cluster's worker groups).

        The same on every substrate: the job is given the engine's JSON patch (that group's
        counts only, refused whole if the groups changed meanwhile: ``SubstrateError``), and
        the core creates the missing pods or deletes those no longer asked for, leaving the
        others as they are.
        Returns at once; :meth:`get` shows the new replicas once they run. ``ManifestError``
        (with the field path) for a group the job has not or a count the kind refuses;
        ``SubstrateError`` for a kind that is not scaled this way or a finished job.
        """
        if replicas < 0:
            raise ManifestError([FieldError("replicas", f"{replicas} is below 0")])
        ns = self._ns(namespace)
        view = self.get(name, ns)
        scale = getattr(entry_for(view.kind), "scale", None)
        if scale is None:
            raise SubstrateError(
                f"{view.kind} {name} has no groups kubemill scales; change its replicas in"
                " the manifest, delete the job and submit it again"
            )
        return self.backend.patch(name, scale(view.job, group, replicas), ns)

    def _refuse_service(self, name: str, namespace: str | None, verb: str) -> None:
        kind = self.get(name, namespace).kind
        if is_service(kind) and not has_suspend(kind):
            raise SubstrateError(
                f"{kind} {name} cannot be {verb}: a service cluster has no suspend (it"
                f" serves until stopped); stop it with `kubemill cluster stop {name}`"
                " (client.delete), or `kubemill interrupt` (client.interrupt) to keep its record"
            )

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Stop every replica (no process is left behind) and remove the job and its logs."""
        self.backend.delete(name, self._ns(namespace))
