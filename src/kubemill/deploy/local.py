"""Mars clusters on this machine: ``new_cluster`` starts real ``mars-supervisor`` and
``mars-worker`` processes on 127.0.0.1, with the same keywords as the Kubernetes one.

    from kubemill.deploy.local import new_cluster
    import mars.tensor as mt

    cluster = new_cluster(worker_num=2, worker_cpu=1, worker_mem="2g")
    a = mt.random.rand(10, 10)
    a.dot(a.T).execute()          # runs in the workers: new_cluster made the session default
    cluster.stop()

**Which Mars.** ``image`` (a Mars cluster's default, ``kubemill-mars:<version>``) selects a Python
environment as every local image does (:mod:`kubemill.substrates.local.images`): a mapping in
the config file, else the managed ``mars`` environment (``kubemill env create mars``), else
the interpreter running this program if it has Mars.

**One directory per cluster**, ``$KUBEMILL_STATE_DIR/mars-clusters/<namespace>`` (the local
state dir; ``namespace`` is generated unless given): ``cluster.json`` (the roles, their
process identities and addresses) and per role its log. Each role also gets a ``TMPDIR`` of
its own, in a short directory under the system's temp dir (``cluster.json`` names it; ``stop``
removes it): Mars finds services through ``$TMPDIR/mars_service_process.*`` files and a
supervisor adopts every live one listed there, so a shared TMPDIR would merge two clusters,
and its sub-pools bind unix sockets at ``$TMPDIR/mars/<md5 of the process index>``, which
collide between processes sharing it and fail past the 107 bytes a socket path may have
(a TMPDIR under the state dir is too long). Each role also gets the supervisors' addresses
explicitly.

**No process outlives its cluster.** Each role leads its own process group (Mars's
forkserver and sub-pools stay in it); ``stop()`` SIGTERMs every group, SIGKILLs what is left
after a grace period, and checks that nothing carrying the cluster's mark
(``KUBEMILL_MARS_CLUSTER=<namespace>`` in the environment, inherited by every descendant)
is alive. When the program that called ``new_cluster`` dies without ``stop()`` (killed,
crashed), a watchdog does the same: a small process in a session of its own that holds the
read end of a pipe only the caller writes to; the kernel closes it when the caller dies,
whatever the signal, and the watchdog stops the cluster (a child the program forks without
exec holds the pipe too, so the cluster then lives until that child ends as well; a killed
watchdog cannot act: ``LocalClusterClient(namespace).stop()`` still can). ``detach=True``
releases the watchdog: the cluster then runs until ``LocalClusterClient(namespace).stop()``
(from any process: it reattaches through ``cluster.json``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubemill.deploy.client import ClusterClient, ClusterError
from kubemill.deploy.watchdog import (
    CLUSTER_MARK,
    STOP_GRACE,
    RoleRecord,
    read_record,
    remove,
    roles_of,
    teardown,
    write_record,
)
from kubemill.engines.mars.api import (
    DEFAULT_IMAGE,
    SizeError,
    parse_cache_size,
    parse_fraction,
    parse_size,
)
from kubemill.engines.mars.pod.discovery import ready_nodes
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.images import ImageConfig
from kubemill.substrates.local.network import LOCAL_HOST, PortAllocator
from kubemill.substrates.local.store import default_state_dir

_POLL = 0.1
_LOG_LINES = 20


def clusters_dir(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where local clusters keep their directories (under the local substrate's state)."""
    return default_state_dir(state_dir) / "mars-clusters"


def _log_tail(path: str | Path, lines: int = _LOG_LINES) -> str:
    try:
        with Path(path).open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    # Mars's progress bars redraw with carriage returns: keep each line's last state.
    kept = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join([line for line in kept if line.strip()][-lines:])


def _short_temp_dir() -> str:
    """The system's temp dir, unless it is too long for Mars's socket paths (see above)."""
    found = tempfile.gettempdir()
    return found if len(found) <= 40 else "/tmp"  # noqa: S108 - a base for mkdtemp


_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _checked_namespace(namespace: object) -> str:
    """A namespace names a directory: a DNS label, as a Kubernetes namespace is."""
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise ClusterError(
            f"namespace: expected a DNS label (lower-case letters, digits and '-', at most"
            f" 63), got {namespace!r}"
        )
    return namespace


def list_clusters(state_dir: str | os.PathLike[str] | None = None) -> list[LocalClusterClient]:
    """The local clusters recorded under the state dir (running or left by a crash)."""
    root = clusters_dir(state_dir)
    found: list[LocalClusterClient] = []
    for directory in sorted(root.glob("*")) if root.is_dir() else []:
        with contextlib.suppress(ClusterError):
            found.append(LocalClusterClient(directory.name, state_dir=state_dir))
    return found


class LocalClusterClient(ClusterClient):
    """A Mars cluster of processes on this machine.

    ``LocalClusterClient(namespace)`` reattaches to a running cluster (from any process of
    the same user) through its directory; ``stop()`` then stops it as the creator would.
    """

    def __init__(
        self,
        namespace: str,
        endpoint: str | None = None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        directory = clusters_dir(state_dir) / _checked_namespace(namespace)
        record = read_record(directory)
        if not record:
            raise ClusterError(
                f"no local Mars cluster {namespace!r} (nothing at {directory}); "
                "`kubemill.deploy.local.new_cluster` starts one"
            )
        found = str(record.get("endpoint", ""))
        if endpoint is not None and endpoint.rstrip("/") != found.rstrip("/"):
            raise ClusterError(
                f"local cluster {namespace!r} serves {found}, not {endpoint}: wrong namespace?"
            )
        super().__init__(namespace, found)
        self.directory = directory
        self._children: list[subprocess.Popen[bytes]] = []
        self._watchdog: subprocess.Popen[bytes] | None = None

    @property
    def roles(self) -> list[RoleRecord]:
        """The cluster's processes (supervisors first), as recorded."""
        return roles_of(read_record(self.directory))

    @property
    def running(self) -> bool:
        """Whether every recorded process of the cluster is alive."""
        roles = self.roles
        return bool(roles) and all(procinfo.is_alive(r.process) for r in roles)

    @property
    def supervisor_addresses(self) -> list[str]:
        return [r.address for r in self.roles if r.role == "supervisor"]

    @property
    def worker_addresses(self) -> list[str]:
        return [r.address for r in self.roles if r.role == "worker"]

    def log_tail(self, name: str, lines: int = _LOG_LINES) -> str:
        """The last lines of role ``name``'s log (``supervisor-0``, ``worker-1``, ...)."""
        for role in self.roles:
            if role.name == name:
                return _log_tail(role.log, lines)
        raise ClusterError(f"cluster {self.namespace} has no role {name!r}")

    def stop(self, wait: bool = True, timeout: float | None = None) -> None:
        """Stop every process of the cluster and remove its directory.

        Stopping is always complete (SIGKILL after :data:`STOP_GRACE` seconds, or after
        ``timeout`` if shorter); ``wait=False`` only skips checking for stragglers.
        Raises :class:`ClusterError` if a process of the cluster survives SIGKILL.
        """
        # As Mars's own clients do, the session is dropped, not destroyed: its cluster goes.
        self._session = None
        grace = STOP_GRACE if timeout is None else max(0.0, min(STOP_GRACE, timeout))
        left = teardown(self.namespace, self.directory, grace=grace)
        for child in self._children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=1)
        self._children = []
        self._release_watchdog(b"")
        if left and wait:
            raise ClusterError(
                f"cluster {self.namespace}: processes {sorted(left)} survived SIGKILL"
            )
        remove(self.directory)

    def _release_watchdog(self, message: bytes) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        stdin = watchdog.stdin
        if stdin is not None:
            with contextlib.suppress(OSError):
                if message:
                    stdin.write(message)
                    stdin.flush()
                stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(timeout=STOP_GRACE + 10)


@dataclass(frozen=True)
class _Ask:
    """``new_cluster``'s arguments, checked and in bytes."""

    supervisor_num: int
    worker_num: int
    min_worker_num: int
    worker_cpu: int
    worker_mem: int
    supervisor_mem: int
    cache_mem: int | None
    spill_paths: tuple[str, ...]


def _count(value: object, field: str, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ClusterError(f"{field}: expected an integer >= {least}, got {value!r}")
    return value


def _size(value: object, field: str, of: int | None = None) -> int:
    """Bytes of a size as the Mars cluster kind reads it (``engines/mars/api.py``: bytes or with a
    binary unit; with ``of``, the worker's memory, also a percentage of it)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ClusterError(f"{field}: expected a size (bytes, or with a unit: '2g'), got {value!r}")
    try:
        if of is not None:
            return parse_cache_size(value, of)
        if parse_fraction(value) is not None:
            raise ClusterError(
                f"{field}: a percentage ({value!r}) is not allowed here; give a size"
            )
        return parse_size(value)
    except SizeError as exc:
        raise ClusterError(f"{field}: {exc}") from None


def _check(
    supervisor_num: int,
    supervisor_cpu: float,
    supervisor_mem: object,
    worker_num: int,
    worker_cpu: float,
    worker_mem: object,
    worker_spill_paths: Sequence[str] | None,
    worker_cache_mem: object,
    min_worker_num: int | None,
) -> _Ask:
    supervisors = _count(supervisor_num, "supervisor_num", least=1)
    workers = _count(worker_num, "worker_num", least=1)
    least = workers if min_worker_num is None else min_worker_num
    least = _count(least, "min_worker_num", least=1)
    if least > workers:
        raise ClusterError(f"min_worker_num: {least} is more than worker_num ({workers})")
    for field, cpu in (("supervisor_cpu", supervisor_cpu), ("worker_cpu", worker_cpu)):
        if isinstance(cpu, bool) or not isinstance(cpu, int | float) or not cpu > 0:
            raise ClusterError(f"{field}: expected a positive number of CPUs, got {cpu!r}")
    memory = _size(worker_mem, "worker_mem")
    supervisor_memory = _size(supervisor_mem, "supervisor_mem")
    cache = (
        None if worker_cache_mem is None else _size(worker_cache_mem, "worker_cache_mem", memory)
    )
    spill = tuple(worker_spill_paths or ())
    for index, path in enumerate(spill):
        if not isinstance(path, str) or not path or ":" in path:
            raise ClusterError(
                f"worker_spill_paths[{index}]: expected a directory path without ':', got {path!r}"
            )
    return _Ask(
        supervisor_num=supervisors,
        worker_num=workers,
        min_worker_num=least,
        # Mars counts whole CPUs (its sub-pools); a fraction still gets one.
        worker_cpu=max(1, math.ceil(worker_cpu)),
        worker_mem=memory,
        supervisor_mem=supervisor_memory,
        cache_mem=cache,
        spill_paths=spill,
    )


def mars_bin_dir(image: str | None = None) -> Path:
    """The ``bin/`` holding ``mars-supervisor`` and ``mars-worker`` for ``image``: the
    environment the image maps to, else (nothing mapped, no managed ``mars`` environment)
    this program's own if it has Mars."""
    wanted = image or DEFAULT_IMAGE
    own = Path(sys.executable).absolute().parent
    try:
        candidates = [Path(ImageConfig.load().resolve(wanted).bin_dir), own]
        problem = f"{candidates[0]} has no mars-supervisor"
    except SubstrateError as exc:
        candidates, problem = [own], str(exc)
    for bin_dir in dict.fromkeys(candidates):
        if (bin_dir / "mars-supervisor").exists() and (bin_dir / "mars-worker").exists():
            return bin_dir
    raise ClusterError(
        f"no Mars for image {wanted!r}: {problem}. Create Mars's environment with `kubemill"
        " env create mars` and run the program with `$(kubemill env python mars)`"
    )


Progress = Callable[[str], None]


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
    """Start a Mars cluster of local processes; return once it serves.

    It returns when the supervisors' web API answers and at least ``min_worker_num``
    (default ``worker_num``) workers have registered with them, as the supervisor reports
    (``/api/cluster/nodes``), with a session on it made the default one when Mars is
    importable here (as Mars's own ``new_cluster`` does). A role that exits, or
    ``timeout`` seconds passing (``None``: no limit), raises :class:`ClusterError` with the
    roles' last log lines, after stopping the cluster (unless ``keep_on_failure``).

    Sizes are bytes or carry a unit (``"2g"``); ``worker_cache_mem`` may be a percentage of
    ``worker_mem``. Mars's workers take ``worker_cpu`` (whole CPUs, at least 1) as their
    number of sub-pools and ``worker_mem`` as ``--mem-bytes``; ``supervisor_cpu`` and
    ``supervisor_mem`` are checked but nothing here limits a process by them.
    ``worker_spill_paths`` become the workers' ``MARS_SPILL_DIRS`` (Mars's disk spill),
    ``worker_cache_mem`` their ``MARS_CACHE_MEM_SIZE``. ``detach`` keeps the cluster
    running after this program exits (see the module's docs).
    """
    ask = _check(
        supervisor_num,
        supervisor_cpu,
        supervisor_mem,
        worker_num,
        worker_cpu,
        worker_mem,
        worker_spill_paths,
        worker_cache_mem,
        min_worker_num,
    )
    name = _checked_namespace(namespace) if namespace else f"mars-{secrets.token_hex(4)}"
    say = progress or (lambda _line: None)
    bin_dir = mars_bin_dir(image)
    root = clusters_dir(state_dir)
    root.mkdir(parents=True, exist_ok=True)
    directory = root / name
    try:
        directory.mkdir()
    except FileExistsError:
        raise ClusterError(
            f"namespace {name!r} is taken: {directory} exists (stop that cluster with"
            f" `LocalClusterClient({name!r}).stop()`, or pick another namespace)"
        ) from None
    except OSError as exc:
        raise ClusterError(f"cannot create {directory}: {exc.strerror}") from exc

    ports = PortAllocator()
    supervisors = [
        (f"{LOCAL_HOST}:{ports.allocate()}", ports.allocate()) for _ in range(ask.supervisor_num)
    ]
    endpoint = f"http://{LOCAL_HOST}:{supervisors[0][1]}"
    temp = tempfile.mkdtemp(prefix=f"kubemill-{name}-", dir=_short_temp_dir())
    record: dict[str, Any] = {"namespace": name, "endpoint": endpoint, "tmp": temp, "roles": []}
    write_record(directory, record)
    client = LocalClusterClient(name, state_dir=state_dir)
    started = time.monotonic()
    try:
        client._watchdog = _start_watchdog(name, directory)
        base_env = _base_env(bin_dir, name)
        addresses = [address for address, _ in supervisors]
        for index, (address, web_port) in enumerate(supervisors):
            others = ",".join(a for a in addresses if a != address)
            argv = [
                str(bin_dir / "mars-supervisor"),
                "-H", LOCAL_HOST,
                "-p", address.rsplit(":", 1)[1],
                "-w", str(web_port),
                "-s", others,
            ]  # fmt: skip
            _start_role(
                client, record, f"supervisor-{index}", "supervisor", address, argv,
                {**base_env, **(supervisor_extra_env or {})}, web_port=web_port,
            )  # fmt: skip
        worker_env = dict(base_env)
        worker_env["OMP_NUM_THREADS"] = str(ask.worker_cpu)
        if ask.spill_paths:
            worker_env["MARS_SPILL_DIRS"] = ":".join(ask.spill_paths)
        if ask.cache_mem is not None:
            worker_env["MARS_CACHE_MEM_SIZE"] = str(ask.cache_mem)
        worker_env.update(worker_extra_env or {})
        for index in range(ask.worker_num):
            address = f"{LOCAL_HOST}:{ports.allocate()}"
            argv = [
                str(bin_dir / "mars-worker"),
                "-H", LOCAL_HOST,
                "-p", address.rsplit(":", 1)[1],
                "-s", ",".join(addresses),
                "--n-cpu", str(ask.worker_cpu),
                "--mem-bytes", str(ask.worker_mem),
            ]  # fmt: skip
            _start_role(client, record, f"worker-{index}", "worker", address, argv, worker_env)
        say(f"{name}: started {ask.supervisor_num} supervisor(s) and {ask.worker_num} worker(s)")
        _wait_ready(client, ask, started, timeout, say)
    except BaseException as exc:
        if keep_on_failure and isinstance(exc, ClusterError):
            client._release_watchdog(b"detach\n")
        else:
            with contextlib.suppress(ClusterError):
                client.stop()
        raise
    say(f"{name}: ready at {endpoint} after {time.monotonic() - started:.1f} s")
    if detach:
        client._release_watchdog(b"detach\n")
    _default_session(client)
    return client


def _base_env(bin_dir: Path, namespace: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "TMPDIR"}}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env[CLUSTER_MARK] = namespace
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start_role(
    client: LocalClusterClient,
    record: dict[str, Any],
    name: str,
    role: str,
    address: str,
    argv: list[str],
    env: Mapping[str, str],
    *,
    web_port: int | None = None,
) -> None:
    """Start one Mars process in a group of its own with its own TMPDIR; record it."""
    home = client.directory / name
    home.mkdir()
    tmp = Path(record["tmp"]) / name
    tmp.mkdir()
    log = home / "mars.log"
    with log.open("wb") as out:
        try:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=home,
                env={**env, "TMPDIR": str(tmp)},
                start_new_session=True,
            )
        except OSError as exc:
            raise ClusterError(f"{name}: cannot run {argv[0]}: {exc.strerror}") from exc
    client._children.append(child)
    identity = procinfo.identify(child.pid)
    record["roles"].append(
        asdict(
            RoleRecord(
                name=name,
                role=role,
                address=address,
                pid=child.pid,
                start_ticks=identity.start_ticks if identity else 0,
                boot_id=identity.boot_id if identity else procinfo.boot_id(),
                log=str(log),
                web_port=web_port,
            )
        )
    )
    write_record(client.directory, record)


def _start_watchdog(namespace: str, directory: Path) -> subprocess.Popen[bytes]:
    """The process that stops the cluster when this one dies (see the module's docs)."""
    log = directory / "watchdog.log"
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "kubemill.deploy.watchdog", "watch", namespace, str(directory)],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _nodes(web_port: int, role: str) -> int | None:
    """How many nodes of ``role`` the supervisor at ``web_port`` lists as ready; ``None``
    while its web API does not answer."""
    nodes = ready_nodes(LOCAL_HOST, web_port, role, timeout=2)
    return None if nodes is None else len(nodes)


def _wait_ready(
    client: LocalClusterClient, ask: _Ask, started: float, timeout: float | None, say: Progress
) -> None:
    roles = client.roles
    web_ports = [r.web_port for r in roles if r.role == "supervisor" and r.web_port]
    seen: tuple[int, int] = (-1, -1)
    while True:
        for child, role in zip(client._children, roles, strict=True):
            code = child.poll()
            if code is not None:
                raise ClusterError(
                    f"cluster {client.namespace}: {role.name} ({role.address}) exited with"
                    f" code {code} before the cluster was ready; its last log lines"
                    f" ({role.log}):\n{_log_tail(role.log)}"
                )
        supervisors = sum(1 for port in web_ports if _nodes(port, "supervisor"))
        workers = _nodes(web_ports[0], "worker") or 0
        if (supervisors, workers) != seen:
            seen = (supervisors, workers)
            say(
                f"{client.namespace}: {supervisors}/{ask.supervisor_num} supervisor(s) serving,"
                f" {workers}/{ask.worker_num} worker(s) registered"
            )
        if supervisors == len(web_ports) and workers >= ask.min_worker_num:
            return
        if timeout is not None and time.monotonic() - started > timeout:
            tails = "\n".join(
                f"--- {role.name} ({role.log}):\n{_log_tail(role.log)}" for role in roles
            )
            raise ClusterError(
                f"cluster {client.namespace} was not ready after {timeout:g} s:"
                f" {supervisors}/{ask.supervisor_num} supervisor(s) serving,"
                f" {workers}/{ask.min_worker_num} worker(s) needed registered. The roles'"
                f" last log lines:\n{tails}"
            )
        time.sleep(_POLL)


def _default_session(client: LocalClusterClient) -> None:
    """Make a session on the cluster the default one, as Mars's ``new_cluster`` does, when
    this program has Mars (a CLI without it just gets the endpoint)."""
    try:
        import mars  # type: ignore[import-not-found]  # noqa: F401
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
