"""Helpers of the exec service tests: the ToyHosts plugin, and the client side of the protocol."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.kinds import load_one, unregister
from kubemill.substrates.base import JobView, SubmitOptions
from kubemill.substrates.local import LocalBackend
from kubemill.substrates.plugins import load_plugins

KINDS = Path(__file__).resolve().parents[2] / "kinds"
"""The toy engines' directory: on pytest's ``pythonpath`` (pyproject.toml) for this process,
put on ``PYTHONPATH`` for the processes a test starts, as a user's plugin directory is."""


def register_toy_hosts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Register the ToyHosts plugin as a user does (``KUBEMILL_ENGINES``), so that detached
    supervisors know it too; for a fixture to ``yield from``."""
    monkeypatch.setenv("KUBEMILL_ENGINES", "toy_host_engine:ENGINE")
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{KINDS}{os.pathsep}{path}" if path else str(KINDS))
    added = load_plugins()
    yield
    for engine in added:
        unregister(engine.kind)


CLIENT_FUNCTION = """
import json, os, socket

def exec_in(pod, command, fds=(0, 1, 2), path=None):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path or os.environ["KUBEMILL_EXEC_SOCKET"])
    line = json.dumps({"pod": pod, "command": command}).encode() + b"\\n"
    socket.send_fds(sock, [line], list(fds))
    answer = sock.makefile("rb").readline()
    sock.close()
    return json.loads(answer) if answer else None
"""
"""The whole client side of the protocol (what the MPI agent does in local mode), as
source for the programs the tests run."""

_namespace: dict[str, Any] = {}
exec(CLIENT_FUNCTION, _namespace)
exec_in = _namespace["exec_in"]
"""``exec_in(pod, command, fds=(0, 1, 2), path=None) -> answer``, in the test process."""


def submit(backend: LocalBackend, doc: dict[str, Any], base: Path, *, detach: bool) -> JobView:
    return backend.submit(load_one(doc), SubmitOptions(detach=detach, base_dir=str(base)))
