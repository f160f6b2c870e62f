"""Helpers of the local-substrate tests: manifests of small ``python -c`` jobs, polling."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubemill.api import Job
from kubemill.kinds import load_one
from kubemill.substrates.local import LocalBackend


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


def eventually(check: Callable[[], Any], *, timeout: float = 30.0, what: str = "") -> Any:
    """Poll ``check`` until it returns something truthy (a generous safety net, not a bound)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.02)


def log_text(backend: LocalBackend, name: str, replica: str | None = None) -> str:
    """Everything a job (or one replica) has logged so far."""
    return "\n".join(line.text for line in backend.logs(name, replica=replica))
