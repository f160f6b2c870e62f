"""The in-pod entrypoint's settings: the pod's environment read and checked
(:class:`PodSettings`), the arguments of Mars's command runner, and the errors the
entrypoint exits with. See :mod:`kubemill.engines.mars.pod.entrypoint`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The contract with the Deployments, from their builders (kubemill is in the image).
from kubemill.engines.mars.framework import (
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
NODE_ROLE = {"supervisor": 0, "worker": 1}
"""Mars's ``NodeRole`` values (its web API's ``role=``)."""
NODE_READY = 1
"""Mars's ``NodeStatus.READY``."""
POLL = 1.0
ASK_TIMEOUT = 5.0
"""Seconds one question to a supervisor may take (an address nobody routes hangs)."""
ENV_SUPERVISOR_WAIT = "KUBEMILL_MARS_SUPERVISOR_WAIT"
"""Seconds to find the supervisors and for them to answer (see the module's docs)."""
ENV_START_WAIT = "KUBEMILL_MARS_START_WAIT"
"""Seconds for the started service to be ready: a worker registered, a supervisor's web."""
SUPERVISOR_WAIT = 600
START_WAIT = 180
PLASMA_SHARE = 0.95
"""Mars's plasma store gets this share of the cache size (``mars.storage.plasma``)."""


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
