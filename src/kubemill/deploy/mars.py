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

**The environment** (set by the Deployments; all but the first three have defaults):

``MARS_K8S_POD_NAME``, ``MARS_K8S_POD_NAMESPACE``, ``MARS_K8S_POD_IP`` (downward API);
``MARS_CPU_TOTAL`` (CPUs; Mars's sub-pools, a fraction counts as one), ``MARS_MEMORY_TOTAL``
(bytes; a worker's ``--mem-bytes``), ``MARS_SPILL_DIRS`` (colon-separated) and
``MARS_CACHE_MEM_SIZE`` (bytes), which Mars's worker reads itself (the spill dirs add its
disk storage; the cache size is its plasma store's, while with Mars's default shared-memory
storage the size of /dev/shm, the pod's memory emptyDir, is what bounds the cache);
``MARS_SERVICE_PORT`` (7103) and ``MARS_WEB_PORT`` (7104); ``MARS_SUPERVISOR_SERVICE``, the
Service in front of the supervisors' web port; ``KUBEMILL_MARS_READY_FILE`` to put the
readiness file elsewhere.

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
import hashlib
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The contract with the Deployments, from their builders (kubemill is in the image).
from kubemill.frameworks.mars import (
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

log = logging.getLogger("kubemill.deploy.mars")


class SettingsError(ValueError):
    """The pod's environment is missing or has a bad value; the message names the variable."""


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
) -> list[str]:
    """The supervisors' addresses, waiting until there are some (see the module's docs)."""
    if settings.explicit_supervisors:
        return list(settings.explicit_supervisors)
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
        if not waited:
            log.warning("waiting for a supervisor (%s)", settings.service or "Kubernetes API")
            waited = True
        sleep(_POLL)


def _web_answers(host: str, port: int) -> bool:
    url = f"http://{host}:{port}/api/cluster/nodes?role={_NODE_ROLE['supervisor']}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _runner(settings: PodSettings) -> Any:
    """Mars's own command runner for the role, which writes the readiness file once up."""
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
            return str(Base.get_default_config_file())

        async def start_services(self) -> Any:
            started = await super().start_services()
            if settings.role == "supervisor":
                await _wait(lambda: _web_answers(settings.ip, settings.web_port))
            else:
                await _wait_registered(self.args.endpoint)
            _write_ready(settings.ready_file)
            log.warning("%s %s is ready", settings.role, settings.address)
            return started

        async def stop_services(self) -> Any:
            _clear_ready(settings.ready_file)
            # Its sockets are bound and connected: the link is not needed to stop, and a
            # worker whose supervisor went first may hang stopping until it is killed.
            drop_short_tmpdir(os.environ)
            return await super().stop_services()

    return Runner()


async def _wait(check: Callable[[], bool]) -> None:
    while not await asyncio.to_thread(check):
        await asyncio.sleep(0.2)


async def _wait_registered(endpoint: str) -> None:
    """Until a supervisor lists this worker as ready (asked through Mars's cluster API)."""
    from mars.services.cluster import ClusterAPI, NodeRole  # type: ignore[import-not-found]
    from mars.services.cluster.core import NodeStatus  # type: ignore[import-not-found]

    api = await ClusterAPI.create(endpoint)
    while True:
        with contextlib.suppress(Exception):
            nodes = await api.get_nodes_info(
                nodes=[endpoint], role=NodeRole.WORKER, statuses={NodeStatus.READY}
            )
            if endpoint in nodes:
                return
        await asyncio.sleep(0.2)


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
    settings = PodSettings.from_env(role, os.environ if environ is None else environ)
    _clear_ready(settings.ready_file)  # a restarted container is not ready yet
    supervisors = find_supervisors(settings)
    argv = mars_argv(settings, supervisors)
    log.warning("starting the Mars %s: %s", role, " ".join(argv))
    # As PID 1 of a container, SIGTERM would be ignored (no handler): make it stop Mars the
    # way Ctrl-C does (Mars's runner cancels its services on KeyboardInterrupt).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with short_tmpdir(os.environ):
            _runner(settings)(argv)
    except KeyboardInterrupt:
        pass
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
