"""Helpers of the local-substrate tests: manifests of small ``python -c`` jobs, polling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubemill.api import Job
from kubemill.kinds import load_one
from kubemill.substrates.local import LocalBackend, procinfo
from support.waiting import eventually


def container(code: str | None, **extra: Any) -> dict[str, Any]:
    """A container running ``python -c code`` (no command at all when ``code`` is None)."""
    spec: dict[str, Any] = {"name": extra.pop("name", "pytorch"), "image": "local-python"}
    if code is not None:
        spec["command"] = ["python", "-c", code]
    spec.update(extra)
    return spec


def pytorch_job(
    name: str,
    *,
    master: str | dict[str, Any],
    worker: str | dict[str, Any] | None = None,
    workers: int = 1,
    restart_policy: str = "Never",
    worker_restart_policy: str | None = None,
    run_policy: dict[str, Any] | None = None,
) -> Job:
    """A PyTorchJob (Master + ``workers`` Workers) whose replicas run small snippets."""

    def replica(code: str | dict[str, Any], replicas: int, policy: str) -> dict[str, Any]:
        spec = code if isinstance(code, dict) else container(code)
        return {
            "replicas": replicas,
            "restartPolicy": policy,
            "template": {"spec": {"containers": [spec]}},
        }

    specs: dict[str, Any] = {"Master": replica(master, 1, restart_policy)}
    if worker is not None and workers:
        specs["Worker"] = replica(worker, workers, worker_restart_policy or restart_policy)
    doc: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    if run_policy:
        doc["spec"]["runPolicy"] = run_policy
    return load_one(doc)


SLEEPER = "import time; print('up', flush=True); time.sleep(120)"
"""A replica that says it is up, then runs until it is stopped."""


def log_text(backend: LocalBackend, name: str, replica: str | None = None) -> str:
    """Everything a job (or one replica) has logged so far."""
    return "\n".join(line.text for line in backend.logs(name, replica=replica))


DAEMONISE = """
import json, os, subprocess, sys, time
env = {} if os.environ.get('CLEAR_ENV') else None
session = subprocess.Popen(['sleep', '300'], start_new_session=True, env=env)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        os.execvp('sleep', ['sleep', '301'])
    os.write(w, str(grandchild).encode())
    os._exit(0)
os.wait()
double = int(os.read(r, 32))
with open('daemons.tmp', 'w') as f:
    json.dump([session.pid, double], f)
os.replace('daemons.tmp', 'daemons')
while not os.path.exists('go'):
    time.sleep(0.01)
sys.exit(int(open('go').read() or 0))
"""
"""Starts a process in a new session and a double-forked one (re-parented away from the
replica at once), records both pids, then exits with the code written to ``go``."""


def daemons(tmp_path: Path) -> list[procinfo.ProcessId]:
    """The replica's daemonised processes, identified while they run."""
    pids = json.loads(eventually(lambda: _read(tmp_path / "daemons"), what="daemons started"))
    found = [procinfo.identify(pid) for pid in pids]
    assert all(p is not None and procinfo.is_alive(p) for p in found), found
    return [p for p in found if p is not None]


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def assert_gone(processes: list[procinfo.ProcessId]) -> None:
    left = [p.pid for p in processes if procinfo.is_alive(p)]
    assert not left, f"daemonised processes outlived their job: {left}"
