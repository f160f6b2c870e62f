"""The watchdog of a local Mars cluster, and stopping one from any process.

``kubemill.deploy.local.new_cluster`` starts ``python -m kubemill.deploy.watchdog watch
NAMESPACE DIRECTORY`` in a session of its own, with a pipe on its stdin that only the
cluster's creator writes to. The kernel closes the pipe when the creator exits, however it
dies, and the watchdog then stops the cluster (:func:`teardown`); ``detach`` on the pipe
lets it go instead. This module imports only the standard library and
:mod:`~kubemill.substrates.local.procinfo`, so the watchdog starts fast and small.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kubemill.deploy.client import ClusterError
from kubemill.substrates.local import procinfo

CLUSTER_MARK = "KUBEMILL_MARS_CLUSTER"
"""In every role's environment: ``<namespace>``; what the final sweep looks for."""
CLUSTER_FILE = "cluster.json"
STOP_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL when stopping (Mars's processes exit on SIGTERM)."""


@dataclass(frozen=True)
class RoleRecord:
    """One started Mars process, as ``cluster.json`` keeps it."""

    name: str
    role: str
    """``supervisor`` or ``worker``."""
    address: str
    """Mars's actor address, ``127.0.0.1:<port>``."""
    pid: int
    start_ticks: int
    boot_id: str
    log: str
    web_port: int | None = None

    @property
    def process(self) -> procinfo.ProcessId:
        return procinfo.ProcessId(self.pid, self.start_ticks, self.boot_id)


def read_record(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / CLUSTER_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot read {directory / CLUSTER_FILE}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def write_record(directory: Path, record: Mapping[str, Any]) -> None:
    temp = directory / f".{CLUSTER_FILE}.tmp"
    temp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    temp.replace(directory / CLUSTER_FILE)


def roles_of(record: Mapping[str, Any]) -> list[RoleRecord]:
    return [RoleRecord(**item) for item in record.get("roles", [])]


def teardown(namespace: str, directory: Path, *, grace: float = STOP_GRACE) -> set[int]:
    """Stop every process of the cluster: each recorded group (SIGTERM, then SIGKILL after
    ``grace``), then anything else carrying its mark. Returns the pids still alive
    (normally none). Safe to call from any process and more than once."""
    roles = roles_of(read_record(directory))
    for role in roles:
        procinfo.signal_group(role.process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not any(
            procinfo.group_is_ours(r.process) and procinfo.group_members(r.pid) for r in roles
        ):
            break
        time.sleep(0.02)
    for role in roles:
        procinfo.kill_group(role.process)
    # Whatever left its group (or was started before its group was recorded) still
    # carries the mark.
    left = procinfo.stop_processes(
        lambda: procinfo.marked(namespace, CLUSTER_MARK) - {os.getpid()},
        grace=0.0 if roles else grace,
    )
    return {pid for pid in left if procinfo.mark_of(pid, CLUSTER_MARK) == namespace}


def remove(directory: Path) -> None:
    """Remove a stopped cluster's directory and its roles' temp dirs."""
    temp = read_record(directory).get("tmp")
    if isinstance(temp, str) and Path(temp).name.startswith("kubemill-"):
        shutil.rmtree(temp, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)


# --- the watchdog ---------------------------------------------------------------------------


def watch(namespace: str, directory: Path, control: IO[bytes]) -> int:
    """Block until the creator closes (or loses) the pipe; stop the cluster unless told to
    let it run (``detach``)."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    message = control.read()
    if message.strip() == b"detach":
        return 0
    left = teardown(namespace, directory)
    if left:
        sys.stderr.write(f"processes {sorted(left)} of cluster {namespace} survived SIGKILL\n")
        return 1
    remove(directory)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kubemill.deploy.watchdog watch NAMESPACE DIRECTORY`` (started by
    ``new_cluster``; reads its orders on stdin)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] != "watch":
        sys.stderr.write("usage: python -m kubemill.deploy.watchdog watch NAMESPACE DIRECTORY\n")
        return 2
    return watch(args[1], Path(args[2]), sys.stdin.buffer)


if __name__ == "__main__":
    sys.exit(main())
