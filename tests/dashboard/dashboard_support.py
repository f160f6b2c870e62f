"""Helpers of the dashboard's tests: manifests of small real jobs, reading Server-Sent
Events, polling, and stopping whatever a test started."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import yaml
from aiohttp import ClientResponse

from kubemill.sdk import JobClient
from kubemill.substrates.local import procinfo
from support.waiting import eventually

SLEEPER = "import time; print('up', flush=True); time.sleep(120)"
"""A replica that says it is up, then runs until it is stopped."""


def page_of(name: str, suffix: str = "") -> str:
    """The path of the page of the PyTorchJob ``name`` in ``default``, as the dashboard's own
    links give it: ``KIND/NAME``, URL-quoted (:func:`kubemill.dashboard.views.job_reference`)."""
    return f"/jobs/default/pytorchjob%2F{name}{suffix}"


def pytorch_manifest(
    name: str, code: str, *, workers: int = 0, worker_code: str | None = None, **run_policy: Any
) -> str:
    """A PyTorchJob's YAML: a Master (and ``workers`` Workers) running ``python -c code``."""

    def replica(program: str, count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": "local-python",
                            "command": ["python", "-c", program],
                        }
                    ]
                }
            },
        }

    specs = {"Master": replica(code, 1)}
    if workers:
        specs["Worker"] = replica(worker_code or code, workers)
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if run_policy:
        spec["runPolicy"] = run_policy
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": spec,
    }
    return yaml.safe_dump(doc, sort_keys=False)


async def eventually_async(
    check: Callable[[], Any], *, timeout: float = 60.0, what: str = ""
) -> Any:
    """:func:`eventually` for a test running on the event loop: the wait runs in a thread so
    the dashboard's handlers keep being served meanwhile."""
    return await asyncio.to_thread(eventually, check, what, timeout=timeout)


async def sse_events(response: ClientResponse) -> AsyncIterator[tuple[str, Any]]:
    """The (event, data) pairs of a Server-Sent Events response, data decoded from JSON."""
    event = "message"
    data: list[str] = []
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            continue
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])


def cleanup(client: JobClient) -> None:
    """Delete every job (its replicas stop) and stop the detached supervisors it had."""
    backend: Any = client.backend
    for rec in backend.store.jobs():
        client.delete(rec.name, rec.namespace)
        if rec.supervisor is not None and rec.supervisor_mode == "detached":
            procinfo.kill_process(rec.supervisor)


BURNER = (
    "import time\n"
    "held = bytearray(96 * 1024 * 1024)  # touched below: resident, not just reserved\n"
    "for i in range(0, len(held), 4096):\n"
    "    held[i] = 1\n"
    "print('holding', flush=True)\n"
    "end = time.time() + 8\n"
    "while time.time() < end:\n"
    "    sum(range(10000))\n"
)
"""A replica that holds 96 MiB and keeps a core busy for 8 seconds, then ends."""
