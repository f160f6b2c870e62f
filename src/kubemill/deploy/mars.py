"""In-pod entrypoints of a Mars cluster: ``python -m kubemill.deploy.mars supervisor|worker``.

The Deployments of ``kubemill.deploy.kubernetes`` (and of the ``MarsCluster`` kind) run this
in every pod. It reads the pod's environment, finds the supervisors, starts the real Mars
service in this process (Mars's own supervisor or worker command runner) and, only once that
service is really up, writes the readiness file the pod's probe tests
(``test -f /tmp/kubemill-mars-ready``):

- a supervisor once its web API answers;
- a worker once a supervisor lists it as a ready worker (it has registered).

The file is removed when the service stops. Importing this module needs no Mars; running
it does.

**A worker waits for its supervisors.** On Kubernetes a worker's pod often starts before
the supervisors' pods serve, and Mars's worker never gets over that: when no supervisor
answers as it starts, its locator never asks again (it spins, and the worker is never
registered). So before starting Mars's worker services, the entrypoint waits until every
supervisor it was given answers and is listed ready by the supervisors, whichever way they
were found (``KUBEMILL_MARS_SUPERVISORS`` too), logging once that it waits. Both waits are
bounded: finding and waiting for the supervisors by ``KUBEMILL_MARS_SUPERVISOR_WAIT``
seconds (default 600), the started service's readiness (a worker registered, a
supervisor's web API answering) by ``KUBEMILL_MARS_START_WAIT`` (default 180). Past
either, the entrypoint stops what it started and exits 1 with the reason on stderr, so
the pod restarts rather than stay unready. The same spin starves a worker whose supervisor
stops first (a stop that never ends): :func:`patch_worker_locator` makes Mars's locator
nap and ask again instead, and Mars's services get 10 s to stop before the actor pool is
stopped anyway. SIGTERM and SIGINT cancel the runner's main task from its event loop (Mars's
own stop path), and a stop that still takes over 25 s ends the process with every thread's
stack on stderr.

**Storage, as Mars's own Kubernetes deployment.** A worker runs with Mars's Kubernetes
config (``mars/deploy/kubernetes/config.yml``: ``storage: backends: [plasma]``), its
cluster backend set back to ``fixed`` since kubemill finds the supervisors itself: a
plasma store (``pyarrow==11.0.0``, the last pyarrow with plasma) of ``MARS_CACHE_MEM_SIZE``
bytes (Mars takes 95% of it), in /dev/shm, which the Deployment makes a memory emptyDir of
the cache's size. A worker without pyarrow's plasma, or whose /dev/shm cannot hold the
store, exits 1 saying so before Mars starts. Supervisors keep Mars's default config.
``kubemill.deploy.local.new_cluster`` does not run these entrypoints: its workers are
Mars's own ``mars-worker`` with Mars's local default, shared-memory storage. The local
substrate's MarsCluster replicas do run them, with a plasma store each in this machine's
/dev/shm.

**The environment** (set by the Deployments; all but the first three have defaults):

``MARS_K8S_POD_NAME``, ``MARS_K8S_POD_NAMESPACE``, ``MARS_K8S_POD_IP`` (downward API);
``MARS_CPU_TOTAL`` (CPUs; Mars's sub-pools, a fraction counts as one), ``MARS_MEMORY_TOTAL``
(bytes; a worker's ``--mem-bytes``), ``MARS_SPILL_DIRS`` (colon-separated) and
``MARS_CACHE_MEM_SIZE`` (bytes), which Mars's worker reads itself (the spill dirs add its
disk storage; the cache size is its plasma store's);
``MARS_SERVICE_PORT`` (7103) and ``MARS_WEB_PORT`` (7104); ``MARS_SUPERVISOR_SERVICE``, the
Service in front of the supervisors' web port; ``KUBEMILL_MARS_READY_FILE`` to put the
readiness file elsewhere; ``KUBEMILL_MARS_SUPERVISOR_WAIT`` and ``KUBEMILL_MARS_START_WAIT``
(seconds, see above).

**Finding the supervisors**, first that answers:

1. ``KUBEMILL_MARS_SUPERVISORS``: explicit ``host:port`` addresses, comma-separated (for
   running the entrypoints outside Kubernetes, as the tests do);
2. the Kubernetes API with the pod's service account (the cluster's Role grants get, list
   and watch on pods): this pod's ``kubemill.dev/mars-cluster`` label, then the pods
   labelled ``kubemill.dev/mars-role=supervisor`` of that cluster. A supervisor waits
   until every such pod has an IP (they find each other); a worker until at least one is
   ready;
3. the supervisors' web Service (``MARS_SUPERVISOR_SERVICE``): the supervisors a ready one
   lists (``/api/cluster/nodes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import hashlib
import importlib.util
import json
import logging
import math
import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The contract with the Deployments, from their builders (kubemill is in the image).
from kubemill.frameworks.mars import (
    ENV_CACHE_MEM_SIZE,
    ENV_CPU_TOTAL,
    ENV_MEMORY_TOTAL,
    ENV_POD_IP,
    ENV_POD_NAME,
    ENV_POD_NAMESPACE,
    ENV_READY_FILE,
    ENV_SERVICE_PORT,
    ENV_SUPERVISOR_SERVICE,
    ENV_SUPERVISORS,
    ENV_WEB_PORT,
    LABEL_MARS_CLUSTER,
    LABEL_MARS_ROLE,
    READY_FILE,
    SERVICE_PORT,
    SHM_PATH,
    WEB_PORT,
)

LABEL_ROLE = LABEL_MARS_ROLE
LABEL_CLUSTER = LABEL_MARS_CLUSTER
TMPDIR_MAX = 64
"""Longest ``TMPDIR`` Mars can work in: its sub-pools bind unix sockets at
``$TMPDIR/mars/<32 hex digits>``, and a socket's path has at most 107 bytes."""
ROLES = ("supervisor", "worker")
_NODE_ROLE = {"supervisor": 0, "worker": 1}
"""Mars's ``NodeRole`` values (its web API's ``role=``)."""
_READY = 1
"""Mars's ``NodeStatus.READY``."""
_POLL = 1.0
_ASK_TIMEOUT = 5.0
"""Seconds one question to a supervisor may take (an address nobody routes hangs)."""
ENV_SUPERVISOR_WAIT = "KUBEMILL_MARS_SUPERVISOR_WAIT"
"""Seconds to find the supervisors and for them to answer (see the module's docs)."""
ENV_START_WAIT = "KUBEMILL_MARS_START_WAIT"
"""Seconds for the started service to be ready: a worker registered, a supervisor's web."""
SUPERVISOR_WAIT = 600
START_WAIT = 180
PLASMA_SHARE = 0.95
"""Mars's plasma store gets this share of the cache size (``mars.storage.plasma``)."""

log = logging.getLogger("kubemill.deploy.mars")


class SettingsError(ValueError):
    """The pod's environment is missing or has a bad value; the message names the variable."""


class StartFailure(RuntimeError):
    """The service could not start or get ready in time; the entrypoint exits 1 with this
    message, so that the pod restarts."""


@dataclass(frozen=True)
class PodSettings:
    """What the entrypoint reads from the pod's environment."""

    role: str
    pod_name: str
    namespace: str
    ip: str
    cpu: int
    memory: int | None
    service_port: int
    web_port: int
    service: str
    ready_file: Path
    explicit_supervisors: tuple[str, ...]
    supervisor_wait: int = SUPERVISOR_WAIT
    start_wait: int = START_WAIT

    @property
    def address(self) -> str:
        """This pod's Mars address."""
        return f"{self.ip}:{self.service_port}"

    @classmethod
    def from_env(cls, role: str, environ: Mapping[str, str]) -> PodSettings:
        if role not in ROLES:
            raise SettingsError(f"role: expected one of {list(ROLES)}, got {role!r}")

        def required(name: str) -> str:
            value = environ.get(name, "").strip()
            if not value:
                raise SettingsError(f"{name}: not set (the Deployment sets it from the pod)")
            return value

        def number(name: str, default: int | None, *, fraction: bool = False) -> int | None:
            raw = environ.get(name, "").strip()
            if not raw:
                return default
            try:
                value = float(raw) if fraction else int(raw)
            except ValueError:
                raise SettingsError(f"{name}: expected a number, got {raw!r}") from None
            if value <= 0:
                raise SettingsError(f"{name}: expected a positive number, got {raw!r}")
            return max(1, math.ceil(value))

        explicit = tuple(
            a.strip() for a in environ.get(ENV_SUPERVISORS, "").split(",") if a.strip()
        )
        for address in explicit:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise SettingsError(f"{ENV_SUPERVISORS}: expected host:port, got {address!r}")
        return cls(
            role=role,
            pod_name=required(ENV_POD_NAME),
            namespace=required(ENV_POD_NAMESPACE),
            ip=required(ENV_POD_IP),
            cpu=number(ENV_CPU_TOTAL, 1, fraction=True) or 1,
            memory=number(ENV_MEMORY_TOTAL, None),
            service_port=number(ENV_SERVICE_PORT, SERVICE_PORT) or SERVICE_PORT,
            web_port=number(ENV_WEB_PORT, WEB_PORT) or WEB_PORT,
            service=environ.get(ENV_SUPERVISOR_SERVICE, "").strip(),
            ready_file=Path(environ.get(ENV_READY_FILE) or READY_FILE),
            explicit_supervisors=explicit,
            supervisor_wait=number(ENV_SUPERVISOR_WAIT, SUPERVISOR_WAIT) or SUPERVISOR_WAIT,
            start_wait=number(ENV_START_WAIT, START_WAIT) or START_WAIT,
        )


def mars_argv(settings: PodSettings, supervisors: Sequence[str]) -> list[str]:
    """The arguments of Mars's command runner for this pod."""
    argv = ["-H", settings.ip, "-p", str(settings.service_port)]
    if settings.role == "supervisor":
        # Always given (possibly empty), or Mars would adopt whatever it finds in TMPDIR.
        others = [a for a in supervisors if a != settings.address]
        return [*argv, "-w", str(settings.web_port), "-s", ",".join(others)]
    argv += ["-s", ",".join(supervisors), "--n-cpu", str(settings.cpu)]
    if settings.memory is not None:
        argv += ["--mem-bytes", str(settings.memory)]
    return argv


@dataclass(frozen=True)
class SeenPod:
    """What discovery needs of a supervisor pod."""

    name: str
    ip: str
    ready: bool
    deleting: bool = False


def supervisors_from_pods(pods: Sequence[SeenPod], role: str, port: int) -> list[str] | None:
    """Supervisor addresses from the supervisor pods, or ``None`` to wait: a supervisor
    waits until every live one has an IP, a worker until at least one is ready."""
    live = [p for p in pods if not p.deleting]
    if role == "supervisor":
        if not live or any(not p.ip for p in live):
            return None
        return sorted(f"{p.ip}:{port}" for p in live)
    ready = sorted(f"{p.ip}:{port}" for p in live if p.ready and p.ip)
    return ready or None


def _seen(pod: Mapping[str, Any]) -> SeenPod:
    """A pod as the API client's ``to_dict`` gives it."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    return SeenPod(
        name=str(meta.get("name") or ""),
        ip=str(status.get("pod_ip") or ""),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        ),
        deleting=meta.get("deletion_timestamp") is not None,
    )


def _from_kubernetes(settings: PodSettings) -> list[str] | None:
    """Ask the API server (in-cluster service account); ``None`` if it cannot be asked."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    try:
        from kubernetes import client, config

        config.load_incluster_config()  # type: ignore[no-untyped-call]
        api = client.CoreV1Api()
        me = api.read_namespaced_pod(settings.pod_name, settings.namespace)
        cluster = ((me.to_dict().get("metadata") or {}).get("labels") or {}).get(LABEL_CLUSTER)
        selector = f"{LABEL_ROLE}=supervisor"
        if cluster:
            selector += f",{LABEL_CLUSTER}={cluster}"
        items = api.list_namespaced_pod(settings.namespace, label_selector=selector).items
    except Exception as exc:
        log.warning("cannot list the supervisor pods through the Kubernetes API: %s", exc)
        return None
    seen = [_seen(pod.to_dict()) for pod in items]
    found = supervisors_from_pods(seen, settings.role, settings.service_port)
    return [] if found is None else found


def ready_nodes(host: str, web_port: int, role: str, *, timeout: float) -> list[str] | None:
    """The addresses of the ready nodes of ``role`` (``supervisor`` or ``worker``) that the
    supervisor whose web API is at ``host:web_port`` lists; None while it does not answer."""
    url = f"http://{host}:{web_port}/api/cluster/nodes?role={_NODE_ROLE[role]}&statuses={_READY}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            nodes = json.loads(answer.read()).get("nodes", {})
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return sorted(nodes) if isinstance(nodes, dict) else None


def _from_service(settings: PodSettings) -> list[str]:
    """The supervisors a ready one lists, through the supervisors' web Service."""
    if not settings.service:
        return []
    return ready_nodes(settings.service, settings.web_port, "supervisor", timeout=5) or []


def find_supervisors(
    settings: PodSettings,
    *,
    sleep: Callable[[float], None] = time.sleep,
    kubernetes: Callable[[PodSettings], list[str] | None] = _from_kubernetes,
    service: Callable[[PodSettings], list[str]] = _from_service,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
) -> list[str]:
    """The supervisors' addresses, waiting until there are some (see the module's docs),
    until ``deadline`` (of ``clock``; default ``supervisor_wait`` from now): then
    :class:`StartFailure`."""
    if settings.explicit_supervisors:
        return list(settings.explicit_supervisors)
    if deadline is None:
        deadline = clock() + settings.supervisor_wait
    waited = False
    while True:
        found = kubernetes(settings)  # None: cannot ask; []: none to take yet
        if found:
            return found
        listed = service(settings)
        if listed:
            return listed
        if settings.role == "supervisor" and found is None:
            # No API to ask and no supervisor serves yet: start alone; later supervisors
            # find this one through the Service.
            return [settings.address]
        where = settings.service or "Kubernetes API"
        if clock() >= deadline:
            raise StartFailure(
                f"no supervisor found through the {where} within {settings.supervisor_wait} s"
                f" ({ENV_SUPERVISOR_WAIT})"
            )
        if not waited:
            log.warning("waiting for a supervisor (%s)", where)
            waited = True
        sleep(_POLL)


def supervisors_not_up(
    addresses: Sequence[str], answers: Mapping[str, set[str] | None]
) -> list[str]:
    """The supervisors of ``addresses`` a worker cannot start with yet: those that do not
    answer (``None``), and those no answering supervisor lists as ready (each supervisor's
    collector lists the supervisors whose node info it holds, not necessarily itself)."""
    ready = set().union(*(found for found in answers.values() if found is not None))
    return [a for a in addresses if answers.get(a) is None or a not in ready]


Ask = Callable[[str], Awaitable[set[str] | None]]


async def wait_for_supervisors(
    addresses: Sequence[str],
    *,
    ask: Ask,
    deadline: float,
    wait: int,
    clock: Callable[[], float] = time.monotonic,
    nap: float = _POLL,
) -> None:
    """Until every supervisor of ``addresses`` answers and is listed ready (``ask``: the
    ready supervisors one lists, ``None`` when it does not answer); past ``deadline`` (of
    ``clock``), :class:`StartFailure`. Logs once that it waits, and when it is over."""
    started = clock()
    said = False
    while True:
        answers = await asyncio.gather(*(ask(address) for address in addresses))
        missing = supervisors_not_up(addresses, dict(zip(addresses, answers, strict=True)))
        if not missing:
            if said:
                log.warning("the supervisors answered after %.0f s", clock() - started)
            return
        if clock() >= deadline:
            raise StartFailure(
                f"the supervisor(s) {', '.join(missing)} did not answer within {wait} s"
                f" ({ENV_SUPERVISOR_WAIT}), so the Mars worker was not started (it would not"
                " register)"
            )
        if not said:
            log.warning(
                "waiting up to %.0f s for the supervisor(s) %s to answer before starting the"
                " Mars worker",
                max(deadline - clock(), 0),
                ", ".join(missing),
            )
            said = True
        await asyncio.sleep(nap)


async def _ready_supervisors(address: str) -> set[str] | None:
    """The ready supervisors the supervisor at ``address`` lists (Mars's cluster service
    there, asked through this worker's actor pool); ``None`` if it does not answer yet."""
    from mars import oscar as mo  # type: ignore[import-not-found]
    from mars.services.cluster import NodeRole  # type: ignore[import-not-found]
    from mars.services.cluster.core import NodeStatus  # type: ignore[import-not-found]
    from mars.services.cluster.supervisor.node_info import (  # type: ignore[import-not-found]
        NodeInfoCollectorActor,
    )

    try:
        ref = await asyncio.wait_for(
            mo.actor_ref(NodeInfoCollectorActor.default_uid(), address=address), _ASK_TIMEOUT
        )
        nodes = await asyncio.wait_for(
            ref.get_nodes_info(role=NodeRole.SUPERVISOR, statuses={NodeStatus.READY}),
            _ASK_TIMEOUT,
        )
    except Exception:  # refused, no such actor yet, timed out: not up
        return None
    return set(nodes)


def _web_answers(host: str, port: int) -> bool:
    url = f"http://{host}:{port}/api/cluster/nodes?role={_NODE_ROLE['supervisor']}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def mars_kubernetes_config() -> str:
    """Mars's own Kubernetes config file (its workers' plasma storage)."""
    import mars

    return str(Path(mars.__file__).parent / "deploy" / "kubernetes" / "config.yml")


def patch_worker_locator() -> None:
    """Make Mars's worker locator nap and ask again when its supervisor is unreachable.

    pymars 0.10.0's ``WorkerSupervisorLocatorActor`` watches the supervisors through the
    collector of node info on one of them; when that supervisor does not answer (not up
    yet, or gone first at shutdown) it drops the reference and reads the fixed list again,
    which yields at once, unchanged, so nothing asks for the reference again: the watch
    spins without ever suspending, starving the worker's event loop (no registration, no
    timeout, a stop that never ends; seen as a worker at 50-100% CPU). Between two such
    turns this naps :data:`_POLL` and asks for the reference again. Idempotent."""
    from mars import oscar as mo
    from mars.services.cluster.supervisor.node_info import NodeInfoCollectorActor
    from mars.services.cluster.worker.locator import (  # type: ignore[import-not-found]
        WorkerSupervisorLocatorActor as Locator,
    )

    if getattr(Locator, "_kubemill_patched", False):
        return
    spinning = Locator._watch_supervisors_from_backend

    async def watch(self: Any) -> Any:
        async for supervisors in spinning(self):
            yield supervisors
            if self._node_info_ref is None:
                await asyncio.sleep(_POLL)
                address = self.get_supervisor(NodeInfoCollectorActor.default_uid())
                with contextlib.suppress(Exception):
                    self._node_info_ref = await mo.actor_ref(
                        NodeInfoCollectorActor.default_uid(), address=address
                    )

    Locator._watch_supervisors_from_backend = watch
    Locator._kubemill_patched = True


def _runner(settings: PodSettings, supervisors: Sequence[str], deadline: float) -> Any:
    """Mars's own command runner for the role, which writes the readiness file once up; a
    worker's waits first for its ``supervisors`` (until ``deadline``, monotonic)."""
    if settings.role == "supervisor":
        from mars.deploy.oscar.supervisor import (  # type: ignore[import-not-found]
            SupervisorCommandRunner as Base,
        )
    else:
        from mars.deploy.oscar.worker import (  # type: ignore[import-not-found]
            WorkerCommandRunner as Base,
        )

    class Runner(Base):  # type: ignore[misc]
        @classmethod
        def get_default_config_file(cls) -> str:
            # Mars looks for config.yml next to the runner's module: Mars's, not this one.
            # A worker's is Mars's Kubernetes config, for its plasma storage.
            if settings.role == "worker":
                return mars_kubernetes_config()
            return str(Base.get_default_config_file())

        def parse_args(self, parser: Any, argv: Any, environ: Any = None) -> Any:
            args = super().parse_args(parser, argv, environ=environ)
            # The Kubernetes config's cluster backend finds supervisors by Mars's own pod
            # labels; kubemill found them and passes them (-s), as the fixed backend takes.
            self.config.setdefault("cluster", {})["backend"] = "fixed"
            return args

        async def _main(self, argv: Any) -> Any:
            # A signal handled by raising KeyboardInterrupt lands in whichever task the loop
            # is stepping (an uploader's, the locator's): that task ends with it, the main
            # one is never cancelled, nothing is stopped, and the process outlives its
            # SIGTERM (seen: a worker still running 60 s on). Cancelling the main task from
            # the loop runs Mars's own stop path (services, then the actor pool).
            loop = asyncio.get_running_loop()
            main = asyncio.current_task()
            assert main is not None
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, _stop_requested, settings, main)
            return await super()._main(argv)

        async def start_services(self) -> Any:
            started = None
            try:
                if settings.role == "worker":
                    await wait_for_supervisors(
                        supervisors,
                        ask=_ready_supervisors,
                        deadline=deadline,
                        wait=settings.supervisor_wait,
                    )
                started = await super().start_services()
                if settings.role == "supervisor":
                    await _wait(
                        lambda: _web_answers(settings.ip, settings.web_port),
                        settings.start_wait,
                        f"the supervisor's web API ({settings.ip}:{settings.web_port}) did"
                        " not answer",
                    )
                else:
                    await _wait_registered(self.args.endpoint, settings.start_wait, supervisors)
            except StartFailure:
                await self._give_up(started_services=started is not None)
                raise
            _write_ready(settings.ready_file)
            log.warning("%s %s is ready", settings.role, settings.address)
            return started

        async def _give_up(self, *, started_services: bool) -> None:
            """Stop what was started (Mars's own loop stops it only when cancelled)."""
            if started_services:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.stop_services(), _STOP_WAIT)
            if self.pool is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.pool.stop(), _STOP_WAIT)

        async def stop_services(self) -> Any:
            _clear_ready(settings.ready_file)
            # Its sockets are bound and connected: the link is not needed to stop, and a
            # worker whose supervisor went first may hang stopping until it is killed.
            drop_short_tmpdir(os.environ)
            try:
                return await asyncio.wait_for(super().stop_services(), _SERVICES_STOP_WAIT)
            except TimeoutError:
                # The pool is stopped next anyway: its processes end with it.
                log.warning(
                    "stopping the Mars %s's services took over %.0f s",
                    settings.role,
                    _SERVICES_STOP_WAIT,
                )
                return None

    if settings.role == "worker":
        patch_worker_locator()
    return Runner()


def _stop_requested(settings: PodSettings, main: asyncio.Task[Any]) -> None:
    """Cancel the runner's main task (Mars then stops its services and actor pool), and
    bound the whole stop: past :data:`_STOP_DEADLINE` every thread's stack goes to stderr
    and the process exits 1, so a hang is both ended and explained."""
    if main.cancelling():
        return
    log.warning("stopping the Mars %s %s", settings.role, settings.address)
    faulthandler.dump_traceback_later(_STOP_DEADLINE, exit=True)
    main.cancel()


_STOP_DEADLINE = 25.0
"""Seconds a stop may take before the process ends itself (a pod's grace period is 30 s by
default; Mars's own graceful stop takes a few seconds)."""
_STOP_WAIT = 30.0
"""Seconds to stop what a failed start left, before exiting anyway."""
_SERVICES_STOP_WAIT = 10.0
"""Seconds Mars's services may take to stop on SIGTERM (a pod's grace period is 30 s by
default): then the actor pool is stopped anyway, and its processes with it."""


async def _wait(check: Callable[[], bool], wait: int, failure: str) -> None:
    """Until ``check`` passes; after ``wait`` seconds, :class:`StartFailure`."""
    give_up = time.monotonic() + wait
    while not await asyncio.to_thread(check):
        if time.monotonic() >= give_up:
            raise StartFailure(f"{failure} within {wait} s ({ENV_START_WAIT})")
        await asyncio.sleep(0.2)


async def _wait_registered(endpoint: str, wait: int, supervisors: Sequence[str]) -> None:
    """Until a supervisor lists this worker as ready (asked through Mars's cluster API);
    after ``wait`` seconds, :class:`StartFailure`."""
    from mars.services.cluster import ClusterAPI, NodeRole
    from mars.services.cluster.core import NodeStatus

    give_up = time.monotonic() + wait
    api = await ClusterAPI.create(endpoint)
    while True:
        with contextlib.suppress(Exception):
            nodes = await api.get_nodes_info(
                nodes=[endpoint], role=NodeRole.WORKER, statuses={NodeStatus.READY}
            )
            if endpoint in nodes:
                return
        if time.monotonic() >= give_up:
            raise StartFailure(
                f"the Mars worker {endpoint} was not registered with the supervisor(s)"
                f" {', '.join(supervisors)} within {wait} s ({ENV_START_WAIT})"
            )
        await asyncio.sleep(0.2)


def shm_problem(cache: int, shm_total: int, shm_path: str = SHM_PATH) -> str | None:
    """Why a /dev/shm (``shm_path``) of ``shm_total`` bytes cannot hold the plasma store of a
    ``cache`` of that many bytes (Mars writes the store's objects there: past its end,
    SIGBUS), or None when it can."""
    store = int(cache * PLASMA_SHARE)
    if store <= shm_total:
        return None
    return (
        f"{ENV_CACHE_MEM_SIZE}={cache}: the plasma store ({store} bytes) does not fit in"
        f" {shm_path} ({shm_total} bytes); mount a memory-backed emptyDir of at least the"
        " cache's size there (the Deployments of kubemill.deploy.kubernetes do), or give a"
        " smaller worker_cache_mem"
    )


def check_plasma(environ: Mapping[str, str], shm_path: str = SHM_PATH) -> None:
    """:class:`StartFailure` if this worker's plasma store cannot run: no ``pyarrow.plasma``
    here, or a /dev/shm smaller than the store."""
    if importlib.util.find_spec("pyarrow") is None or (
        importlib.util.find_spec("pyarrow.plasma") is None
    ):
        raise StartFailure(
            "a worker's storage is a plasma store (Mars's Kubernetes config), which needs"
            f" pyarrow==11.0.0, not installed in {sys.prefix}: `kubemill env create mars`"
            " installs it (the kubemill-mars image has it)"
        )
    cache = environ.get(ENV_CACHE_MEM_SIZE, "").strip()
    if not cache.isdigit():
        return  # not set, or a percentage: Mars sizes the store itself
    try:
        stat = os.statvfs(shm_path)
    except OSError as exc:
        raise StartFailure(f"{shm_path}: {exc.strerror}; the plasma store lives there") from exc
    problem = shm_problem(int(cache), stat.f_blocks * stat.f_frsize, shm_path)
    if problem:
        raise StartFailure(problem)


def _write_ready(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(f"{os.getpid()}\n", encoding="utf-8")
    temp.replace(path)


def _clear_ready(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


LINK_PREFIX = "kubemill-mars-"
LINK_DIR = "/tmp"  # noqa: S108 - a short directory on purpose (see short_tmpdir)


@contextlib.contextmanager
def short_tmpdir(
    environ: dict[str, str] | os._Environ[str], link_dir: str = LINK_DIR
) -> Iterator[str | None]:
    """Make ``TMPDIR`` short enough for Mars's sockets (:data:`TMPDIR_MAX`) while inside.

    A pod's /tmp is short; a local replica's private TMPDIR under the job's directory often
    is not. Then a symlink with a short name, ``/tmp/kubemill-mars-<digest of the path>``,
    stands for it: the files stay in the replica's own directory (removed with the job),
    a restarted replica takes the same link again, and the link is removed on the way out.
    A link left by a killed process dangles once its job is deleted; every start removes
    such dangling links of ours. Yields the link, or None when TMPDIR was short enough.
    """
    real = environ.get("TMPDIR", "")
    if not real or len(os.fsencode(real)) <= TMPDIR_MAX:
        yield None
        return
    _sweep_links(link_dir)
    link = Path(link_dir) / (LINK_PREFIX + hashlib.sha256(os.fsencode(real)).hexdigest()[:12])
    with contextlib.suppress(FileNotFoundError):
        if link.is_symlink() and str(link.readlink()) != real:
            link.unlink()  # not ours to take: another path with the same digest prefix
    if not link.is_symlink():
        link.symlink_to(real)
    environ["TMPDIR"] = str(link)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    try:
        yield str(link)
    finally:
        environ["TMPDIR"] = real
        tempfile.tempdir = None
        with contextlib.suppress(FileNotFoundError):
            link.unlink()


def drop_short_tmpdir(environ: Mapping[str, str], link_dir: str = LINK_DIR) -> None:
    """Remove the link :func:`short_tmpdir` made, if ``TMPDIR`` is one (early, on stop)."""
    link = Path(environ.get("TMPDIR", ""))
    if link.parent == Path(link_dir) and link.name.startswith(LINK_PREFIX) and link.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            link.unlink()


def _sweep_links(link_dir: str) -> None:
    """Remove our links whose directory is gone (their replicas were killed)."""
    with contextlib.suppress(OSError):
        for entry in Path(link_dir).glob(LINK_PREFIX + "*"):
            if entry.is_symlink() and not entry.exists():
                with contextlib.suppress(OSError):
                    entry.unlink()


def run(role: str, environ: Mapping[str, str] | None = None) -> int:
    """Start the Mars service of ``role`` in this process; return when it stops."""
    environ = os.environ if environ is None else environ
    settings = PodSettings.from_env(role, environ)
    _clear_ready(settings.ready_file)  # a restarted container is not ready yet
    deadline = time.monotonic() + settings.supervisor_wait
    try:
        if role == "worker":
            check_plasma(environ)
        supervisors = find_supervisors(settings, deadline=deadline)
        argv = mars_argv(settings, supervisors)
        log.warning("starting the Mars %s: %s", role, " ".join(argv))
        # As PID 1 of a container, SIGTERM would be ignored (no handler): make it stop Mars
        # the way Ctrl-C does (Mars's runner cancels its services on KeyboardInterrupt).
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        with short_tmpdir(os.environ):
            _runner(settings, supervisors, deadline)(argv)
    except KeyboardInterrupt:
        pass
    except StartFailure as exc:
        log.error("the Mars %s %s gives up: %s", role, settings.address, exc)
        sys.stderr.write(f"kubemill.deploy.mars: {exc}\n")
        return 1
    finally:
        _clear_ready(settings.ready_file)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if len(args) != 1 or args[0] not in ROLES:
        sys.stderr.write("usage: python -m kubemill.deploy.mars supervisor|worker\n")
        return 2
    try:
        return run(args[0])
    except SettingsError as exc:
        sys.stderr.write(f"kubemill.deploy.mars: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
