"""Addresses of a local job's replicas: 127.0.0.1 and a port reserved per replica and port.

On Kubernetes every pod has its own IP, so all workers can listen on 2222. Locally they
share 127.0.0.1, so each (replica, container port) pair gets a host port of its own,
chosen when the job is submitted and stored with it, so a restarted replica gets the
same address its peers were told about.

The race, and what is done about it. A port is "free" when a test bind succeeds, but
the replica binds it later, and any process on the machine may take it in between.
kubemill narrows that window three ways:

- ports are picked at random *below* the kernel's ephemeral range
  (``/proc/sys/net/ipv4/ip_local_port_range``), so the source ports of ordinary
  outgoing connections (gloo, gRPC open many) never land on them;
- ports are reserved in SQLite for as long as their job is unfinished, inside the same
  transaction that records the job, so two kubemill jobs never share one;
- right before a job's first replica starts, the supervisor tests every port again and
  re-allocates (and re-plans) the ones that were taken, which is safe because no
  replica has been told an address yet.

Once replicas run, a port taken by a stranger makes the replica fail to bind; it exits
non-zero and its restart policy applies (the supervisor records a ``PortInUse`` event
when it sees the port busy before a restart).
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from kubemill.api import Job
from kubemill.frameworks import Endpoint, Plan, replica_name
from kubemill.kinds import engine_for, plan_for
from kubemill.substrates.base import SubstrateError

LOCAL_HOST = "127.0.0.1"
LOWEST_PORT = 15000
"""Ports below this are left to services users configure by hand."""
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_ATTEMPTS = 200


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for automatically assigned source ports."""
    try:
        low, high = _EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def port_is_free(port: int, host: str = LOCAL_HOST) -> bool:
    """Whether ``host:port`` can be bound now (a listener or bound socket makes it busy).

    SO_REUSEADDR is set as servers (torch's TCPStore, gRPC) set it, so a port whose old
    connections linger in TIME_WAIT after a restart still counts as free.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class PortAllocator:
    """Picks free ports outside the ephemeral range, never one in ``avoid``."""

    def __init__(
        self,
        *,
        avoid: Iterable[int] = (),
        rng: random.Random | None = None,
        is_free: Callable[[int], bool] = port_is_free,
    ) -> None:
        self.avoid = set(avoid)
        self._rng = rng or random.Random()  # noqa: S311 - spreading ports, not security
        self._is_free = is_free
        low, _ = ephemeral_range()
        self._range = (LOWEST_PORT, low - 1) if low - 1 - LOWEST_PORT >= 1000 else None

    def allocate(self) -> int:
        """A port that is free now and not handed out before by this allocator."""
        for _ in range(_ATTEMPTS):
            port = self._candidate()
            if port not in self.avoid and self._is_free(port):
                self.avoid.add(port)
                return port
        raise SubstrateError(
            "could not find a free port on 127.0.0.1 for a replica; too many ports are in use"
            " (check `ss -ltn`) or finished jobs still hold them (`kubemill delete`)"
        )

    def _candidate(self) -> int:
        if self._range is not None:
            return self._rng.randint(*self._range)
        # An unusual ephemeral range leaves no room below it: let the kernel choose.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOCAL_HOST, 0))
            port: int = sock.getsockname()[1]
            return port


class LocalNetwork:
    """The :class:`~kubemill.frameworks.Network` of one local job.

    Built with the ports stored for the job it hands them out again; with an
    ``allocator`` it reserves a new port the first time a pair is asked for.
    """

    def __init__(
        self,
        job_name: str,
        *,
        ports: Mapping[tuple[str, int], int] | None = None,
        allocator: PortAllocator | None = None,
        host: str = LOCAL_HOST,
        files_root: str = "",
    ) -> None:
        self.job_name = job_name
        self.host = host
        self.files_root = files_root
        """The job's ``files`` directory: each FileSet is a directory in it."""
        self._ports: dict[tuple[str, int], int] = dict(ports or {})
        self._allocator = allocator

    @property
    def ports(self) -> dict[tuple[str, int], int]:
        """Every reservation: (replica name, container port) -> host port."""
        return dict(self._ports)

    def port(self, replica: str, container_port: int) -> int:
        """The host port of ``container_port`` of ``replica``, reserving it if needed."""
        key = (replica, container_port)
        if key not in self._ports:
            if self._allocator is None:
                raise SubstrateError(
                    f"no port was reserved for {replica} port {container_port} when the job"
                    " was submitted; delete the job and submit it again"
                )
            self._ports[key] = self._allocator.allocate()
        return self._ports[key]

    def endpoint(
        self, replica_type: str, index: int, container_port: int, *, qualified: bool = True
    ) -> Endpoint:
        """``127.0.0.1:<the port reserved for this replica and container port>``."""
        return Endpoint(
            self.host, self.port(replica_name(self.job_name, replica_type, index), container_port)
        )

    def files_path(self, file_set: str, mount_path: str) -> str:
        """``<job dir>/files/<set>``: where the supervisor writes the set (no mounts here)."""
        if not self.files_root:
            raise SubstrateError(
                f"{self.job_name}: no files directory was given for file set {file_set!r}"
            )
        return f"{self.files_root}/{file_set}"

    def replica_host(self, replica_type: str, index: int) -> str:
        """Every replica listens on this machine's loopback address."""
        return self.host

    def host_name(self, replica_type: str, index: int, *, subdomain: str = "") -> str:
        """The replica's name: the local exec service resolves it to that replica."""
        return replica_name(self.job_name, replica_type, index)

    def reserve_plan(self, plan: Plan) -> None:
        """Reserve every declared container port of every replica, used or not."""
        for rep in plan.replicas:
            for container_port in rep.ports.values():
                self.port(rep.name, container_port)


def local_plan(job: Job, network: LocalNetwork) -> Plan:
    """The job's Plan as this machine runs it.

    The engine adapts the job and its Plan to one machine first (``LocalSupport``).
    Replicas reach each other on 127.0.0.1 ports, so there are no services (headless or
    exposed), and there is no API server to grant per-job access on nor a network to
    police: none of them is asked for, so no event claims they were created.
    """
    support = engine_for(job.KIND).local
    local_job = support.adapted(job)
    plan = support.planned(local_job, plan_for(local_job, network), network)
    return replace(plan, services=False, exposed=(), access=None, network_policies=())


def busy_ports(ports: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The reservations whose port cannot be bound right now."""
    return {key: port for key, port in ports.items() if not port_is_free(port)}


def replica_address(
    plan_ports: Mapping[str, int],
    reserved: Mapping[tuple[str, int], int],
    *,
    replica: str,
    preferred: str = "",
) -> str:
    """What ``get`` shows as a replica's address: its framework port, else its first port."""
    names = [preferred, *plan_ports] if preferred in plan_ports else list(plan_ports)
    for name in names:
        port = reserved.get((replica, plan_ports[name]))
        if port is not None:
            return f"{LOCAL_HOST}:{port}"
    return ""
