"""Mars clusters on this machine: ``new_cluster`` runs the cluster as a job of the local
substrate, with the same keywords as the Kubernetes one.

    from kubemill.deploy.local import new_cluster
    import mars.tensor as mt

    cluster = new_cluster(worker_num=2, worker_cpu=1, worker_mem="2g")
    a = mt.random.rand(10, 10)
    a.dot(a.T).execute()          # runs in the workers: new_cluster made the session default
    cluster.stop()

**One way to run a cluster.** ``new_cluster`` submits the cluster's kind through the SDK's
:class:`~kubemill.sdk.JobClient`, to a detached supervisor, and waits until the core judges
it Ready, exactly as ``kubemill cluster create`` does
(:func:`~kubemill.deploy.serving.wait_serving`): its supervisors and workers are the
replicas of that job (the engine's ``LocalSupport``, :mod:`kubemill.engines.mars.local`),
each running the in-pod entrypoint in the environment its image stands for
(:mod:`kubemill.substrates.local.images`: ``kubemill env create mars`` makes it). The
arguments are read through the kind's model
(:func:`~kubemill.engines.mars.deploy.cluster.cluster_spec`), so both substrates refuse the
same values, naming the argument. The cluster is a job like any other: ``kubemill get``,
``kubemill logs NAME --replica worker-0``, ``kubemill cluster list`` show it, and the
cluster's processes get this program's ``PYTHONPATH`` (as processes it started itself
would), unless the extra env sets one.

**Names.** ``namespace`` (generated, ``mars-<hex>``, unless given) is the job's name, in
the local substrate's ``default`` namespace.

**No process outlives its cluster.** ``stop()`` deletes the job: the substrate stops every
replica (Mars's own graceful stop, SIGKILL past the grace period) and checks that no process
of the job is left. The program that calls ``new_cluster`` owns the job
(``JobClient.submit(owner_pid=...)``, :mod:`kubemill.substrates.local.owner`): when it dies
without ``stop()`` (killed, crashed), the job's supervisor stops the cluster and removes
it. ``detach=True`` submits it without an owner: the cluster then runs until
``LocalClusterClient(namespace).stop()`` (from any process) or ``kubemill cluster stop``.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence

from kubemill.deploy.serving import NotServing, wait_serving
from kubemill.engines.mars.deploy.cluster import (
    CLUSTER_KIND,
    ClusterClient,
    ClusterError,
    cluster_job,
    cluster_spec,
)
from kubemill.sdk import JobClient
from kubemill.substrates.base import JobExists, JobNotFound, JobView, ReplicaView, SubstrateError

DEFAULT_NAMESPACE = "default"
"""The local namespace of every cluster's job (the cluster's ``namespace`` is its name)."""
LOG_LINES = 20
"""How many of a failing replica's last log lines an error shows."""
Progress = Callable[[str], None]

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _checked_namespace(namespace: object) -> str:
    """A namespace names the cluster's job: a DNS label, as a Kubernetes namespace is."""
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise ClusterError(
            f"namespace: expected a DNS label (lower-case letters, digits and '-', at most"
            f" 63), got {namespace!r}"
        )
    return namespace


def list_clusters(state_dir: str | os.PathLike[str] | None = None) -> list[LocalClusterClient]:
    """The clusters ``new_cluster`` can reattach to (its jobs' namespace, ``default``),
    Ready or not."""
    client = JobClient(state_dir=state_dir)
    return [
        LocalClusterClient(view.name, state_dir=state_dir, view=view)
        for view in client.list(namespace=DEFAULT_NAMESPACE)
        if view.kind == CLUSTER_KIND
    ]


class LocalClusterClient(ClusterClient):
    """A Mars cluster running as a job of the local substrate.

    ``LocalClusterClient(namespace)`` reattaches to a cluster (from any process of the same
    user, with the same state dir); ``stop()`` then stops it as the creator would.
    """

    def __init__(
        self,
        namespace: str,
        endpoint: str | None = None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        view: JobView | None = None,
    ) -> None:
        self.jobs = JobClient(state_dir=state_dir, namespace=DEFAULT_NAMESPACE)
        """The SDK's client of the state dir the cluster is recorded in."""
        name = _checked_namespace(namespace)
        found = view or self._view(name)
        served = str(getattr(found.status, "endpoint", None) or "")
        if endpoint is not None and endpoint.rstrip("/") != served.rstrip("/"):
            raise ClusterError(
                f"local cluster {name!r} serves {served or 'nothing yet'}, not {endpoint}:"
                " wrong namespace?"
            )
        super().__init__(name, served)
        self.uid = found.job.metadata.uid or ""
        """The job's uid: every process of the cluster carries ``<uid>/<replica>`` in its
        environment (:data:`kubemill.substrates.local.procinfo.REPLICA_MARK`)."""

    def _view(self, name: str) -> JobView:
        try:
            view = self.jobs.get(name)
        except JobNotFound:
            raise ClusterError(
                f"no local Mars cluster {name!r}; `kubemill.deploy.local.new_cluster` starts one"
            ) from None
        if view.kind != CLUSTER_KIND:
            raise ClusterError(f"{name} is a {view.kind}, not a Mars cluster")
        return view

    @property
    def replicas(self) -> list[ReplicaView]:
        """The cluster's supervisors and workers as the substrate shows them now."""
        return list(self._view(self.namespace).replicas)

    @property
    def running(self) -> bool:
        """Whether every supervisor and worker of the cluster is running."""
        try:
            replicas = self.replicas
        except ClusterError:
            return False
        return bool(replicas) and all(r.phase == "Running" for r in replicas)

    @property
    def supervisor_addresses(self) -> list[str]:
        return [r.address for r in self.replicas if r.replica_type == "Supervisor"]

    @property
    def worker_addresses(self) -> list[str]:
        return [r.address for r in self.replicas if r.replica_type == "Worker"]

    def replica_pids(self) -> dict[str, int]:
        """The pid of each running supervisor and worker, by replica name."""
        return {r.name: r.pid for r in self.replicas if r.pid}

    def log_tail(self, replica: str, lines: int = LOG_LINES) -> str:
        """The last lines of a replica's log (``supervisor-0``, ``worker-1``, ...)."""
        try:
            found = self.jobs.logs(self.namespace, replica=replica, tail=lines)
            return "\n".join(line.text for line in found)
        except (JobNotFound, SubstrateError, ValueError) as exc:
            return f"(no log: {exc})"

    def stop(self, wait: bool = True, timeout: float | None = None) -> None:
        """Delete the cluster's job: every process of it stopped (Mars's graceful stop, then
        SIGKILL past its grace period), none left, its records gone. The substrate bounds
        the wait itself (the grace period and a margin), so ``wait`` and ``timeout`` change
        nothing here; a process that survives SIGKILL raises :class:`ClusterError`."""
        # As Mars's own clients do, the session is dropped, not destroyed: its cluster goes.
        self._session = None
        try:
            self.jobs.delete(self.namespace)
        except JobNotFound:
            return  # stopped already (by another process, or with its owner)
        except SubstrateError as exc:
            raise ClusterError(f"cluster {self.namespace}: {exc}") from exc


def new_cluster(
    image: str | None = None,
    *,
    supervisor_num: int = 1,
    supervisor_cpu: float = 1,
    supervisor_mem: int | str = "4g",
    supervisor_extra_env: Mapping[str, str] | None = None,
    worker_num: int = 2,
    worker_cpu: float = 1,
    worker_mem: int | str = "2g",
    worker_spill_paths: Sequence[str] | None = None,
    worker_cache_mem: int | str | None = None,
    min_worker_num: int | None = None,
    worker_extra_env: Mapping[str, str] | None = None,
    namespace: str | None = None,
    timeout: float | None = None,
    keep_on_failure: bool = False,
    detach: bool = False,
    state_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> LocalClusterClient:
    """Start a Mars cluster as a job of the local substrate; return once it serves.

    It returns once the core judges the cluster Ready (every supervisor and at least
    ``min_worker_num`` workers, default ``worker_num``, ready: a worker once a supervisor
    lists it), with a session on it made the default one when Mars is importable here (as
    Mars's own ``new_cluster`` does). A replica that keeps failing, the job ending, or
    ``timeout`` seconds passing (``None``: no limit) raises :class:`ClusterError` with the
    failing replica's last log lines, after stopping the cluster (unless
    ``keep_on_failure``). Sizes are bytes or carry a unit (``"2g"``);
    ``worker_cache_mem`` may be a percentage of ``worker_mem``; the arguments mean what
    the kind's fields of the same names mean. ``detach`` keeps the cluster running after
    this program exits (see the module's docs).
    """
    name = _checked_namespace(namespace) if namespace else f"mars-{secrets.token_hex(4)}"
    path = os.environ.get("PYTHONPATH")
    spec = cluster_spec(
        image=image,
        supervisor_num=supervisor_num,
        supervisor_cpu=supervisor_cpu,
        supervisor_mem=supervisor_mem,
        supervisor_extra_env=_with_path(supervisor_extra_env, path),
        worker_num=worker_num,
        worker_cpu=worker_cpu,
        worker_mem=worker_mem,
        worker_spill_paths=list(worker_spill_paths) if worker_spill_paths else None,
        worker_cache_mem=worker_cache_mem,
        min_worker_num=min_worker_num,
        worker_extra_env=_with_path(worker_extra_env, path),
    )
    say = progress or (lambda _line: None)
    jobs = JobClient(state_dir=state_dir, namespace=DEFAULT_NAMESPACE)
    try:
        jobs.submit(cluster_job(name, spec), owner_pid=None if detach else os.getpid())
    except JobExists:
        raise ClusterError(
            f"namespace {name!r} is taken: a cluster (or job) of that name exists (stop it"
            f" with `LocalClusterClient({name!r}).stop()`, or pick another namespace)"
        ) from None
    except SubstrateError as exc:
        raise ClusterError(f"cluster {name} cannot start here: {exc}") from exc
    say(f"{name}: submitted {spec.supervisor_num} supervisor(s) and {spec.worker_num} worker(s)")
    try:
        view = wait_serving(
            jobs, name, None, timeout=timeout, progress=lambda line: say(f"{name}: {line}")
        )
    except BaseException as exc:
        _failed(jobs, name, exc, keep=keep_on_failure)
        raise
    client = LocalClusterClient(name, state_dir=state_dir, view=view)
    say(f"{name}: ready at {client.endpoint}")
    _default_session(client)
    return client


def _with_path(env: Mapping[str, str] | None, path: str | None) -> dict[str, str] | None:
    """The extra env, with this program's ``PYTHONPATH`` unless it sets one (the local
    substrate gives a replica of another environment none of its own)."""
    given = dict(env or {})
    if path and "PYTHONPATH" not in given:
        given["PYTHONPATH"] = path
    return given or None


def _failed(jobs: JobClient, name: str, exc: BaseException, *, keep: bool) -> None:
    """After a cluster did not get Ready: stop it (unless ``keep`` and the failure is the
    cluster's), and turn :class:`NotServing` into :class:`ClusterError` with the failing
    replica's last log lines."""
    message = str(exc)
    failing = exc.failing if isinstance(exc, NotServing) else None
    if failing:
        with contextlib.suppress(JobNotFound, SubstrateError):
            tail = [line.text for line in jobs.logs(name, replica=failing, tail=LOG_LINES)]
            message += f"\n--- the last lines of {failing}'s log:\n" + "\n".join(tail)
    if not (keep and isinstance(exc, NotServing)):
        with contextlib.suppress(JobNotFound, SubstrateError):
            jobs.delete(name)
    if isinstance(exc, NotServing):
        kept = "is kept (keep_on_failure=True)" if keep else "was stopped and deleted"
        raise ClusterError(f"{message}\nThe cluster {kept}.") from None


def _default_session(client: LocalClusterClient) -> None:
    """Make a session on the cluster the default one, as Mars's ``new_cluster`` does, when
    this program has Mars (a CLI without it just gets the endpoint)."""
    try:
        # Mars's session module, not just a `mars` name: a directory called `mars` on the
        # path (Mars's own socket directory /tmp/mars, with /tmp as the working directory)
        # imports as an empty namespace package.
        import mars.session  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return
    try:
        client.session  # noqa: B018 - made on first use, and made the default
    except Exception as exc:
        client.stop()
        raise ClusterError(
            f"cluster {client.namespace} is up but Mars here cannot open a session on"
            f" {client.endpoint}: {exc}"
        ) from exc


__all__ = ["LocalClusterClient", "list_clusters", "new_cluster"]
