"""A cluster for the Kubernetes client tests: the operator tests' kmock cluster, plus logs.

The cluster is :class:`support.kmock_cluster.KubeCluster` (kmock's emulator
with what kmock 0.8 leaves out filled in: uids, resourceVersions, 201 on create, selectors,
status subresources, garbage collection, ...); it is imported, not copied. What the client
needs beyond it, added here on the emulator's extension point (its ``__call__``):

- ``GET .../pods/NAME/log`` (kmock has no pod logs): served from :class:`LogBook` entries the
  test writes, as the kubelet would: ``timestamps``, ``sinceTime``, ``container`` and
  ``follow`` (streams until the test ends the book or deletes the pod); ``400`` while the
  container has not started, ``404`` for a missing pod;
- strict custom resources: kmock registers any resource on its first create, a real API
  server answers ``404`` until a CRD serves it;
- canned answers (:class:`Canned`): a request matching method and path gets a given status
  and ``Status`` body (a realistic ``403 Forbidden``, a ``401``, a ``500``).

The test plays the operator and the kubelet (:class:`Operator`): it creates the pods the
real operator would (built by :mod:`kubemill.substrates.kubernetes.build`) and writes pod
and job statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import re
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import rendering

from kubemill.api import GROUP, Job
from kubemill.kinds import crds
from kubemill.substrates.kubernetes.build import Owner, build_pod
from kubemill.substrates.kubernetes.client import load_job
from kubemill.substrates.kubernetes.render import plan_on_kubernetes
from support import kmock_cluster

TOKEN = "test-token"
"""The bearer token :func:`kmock_cluster.write_kubeconfig` puts in the kubeconfig."""

_LOG_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<pod>[^/]+)/log/?$")


SEED_TFJOB = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: seed}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{name: tensorflow, image: trainer:1, command: [python, t.py]}]
"""
"""A one-worker Kubeflow TFJob, as the client tests and the dashboard's submit it."""

SEED_PYTORCHJOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: trainer:1, command: [python, ddp.py]}]
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: trainer:1, command: [python, ddp.py]}]
"""
"""A Kubeflow PyTorchJob of a Master and a Worker, as the client tests submit it."""


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"  # RFC3339Nano, as the kubelet


@dataclass
class LogBook:
    """The log of one pod's container instance, as the kubelet keeps it."""

    container: str
    lines: list[tuple[datetime.datetime, str]] = field(default_factory=list)
    ended: bool = False
    cuts: int = 0
    follows: int = 0
    """How many follow requests were served (a resumed stream is one more)."""

    def write(self, *texts: str) -> None:
        for text in texts:
            self.lines.append((datetime.datetime.now(tz=datetime.UTC), text))

    def end(self) -> None:
        """The container has exited: streams end once everything is sent."""
        self.ended = True

    def cut(self) -> None:
        """End the open follow streams now, though the container runs on (a dropped
        connection, an API server restart)."""
        self.cuts += 1


@dataclass
class Canned:
    """Answer requests matching ``method`` and ``path`` (a regex) with ``status``/``body``."""

    method: str
    path: str
    status: int
    body: Mapping[str, Any]
    times: int = 1_000_000
    hits: int = 0


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    """A ``Status`` object as the API server sends it with an error."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


@attrs.define(kw_only=True)
class ClientCluster(kmock_cluster.KubeCluster):
    """The operator tests' cluster with pod logs, strict CRDs and canned answers."""

    logs: dict[tuple[str, str], LogBook] = attrs.field(factory=dict, init=False)
    canned: list[Canned] = attrs.field(factory=list, init=False)

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        for answer in self.canned:
            if (
                answer.times > 0
                and raw_request.method == answer.method
                and re.search(answer.path, raw_request.path)
            ):
                answer.times -= 1
                answer.hits += 1
                self._log_raw(raw_request, answer.status)
                return aiohttp.web.json_response(dict(answer.body), status=answer.status)
        if match := _LOG_PATH.match(raw_request.path):
            return await self._serve_log(raw_request, match["ns"], match["pod"])
        return await super().__call__(raw_request)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        resource = request.resource
        if (
            resource is not None
            and resource.group == GROUP
            and resource.plural
            and self._info(resource) is None
        ):
            # A real API server serves a custom resource only once its CRD exists.
            self._log(request, 404)
            raise kmock.KubernetesError(
                status=404,
                reason="NotFound",
                message="the server could not find the requested resource",
                details={},
            )
        return await super()._handle(request)

    def _log_raw(self, raw: aiohttp.web.BaseRequest, status: int) -> None:
        self.calls.append(
            kmock_cluster.Call(
                method=raw.method,
                path=raw.path,
                group=None,
                version=None,
                plural=None,
                namespace=None,
                name=None,
                subresource=None,
                watch=raw.query.get("watch") == "true",
                status=status,
                user_agent=raw.headers.get("User-Agent", ""),
                params=dict(raw.query),
            )
        )

    async def _serve_log(
        self, raw: aiohttp.web.BaseRequest, namespace: str, pod: str
    ) -> aiohttp.web.StreamResponse:
        if self._stored(kmock.resource("", "v1", "pods"), namespace, pod) is None:
            self._log_raw(raw, 404)
            body = status_body(404, "NotFound", f'pods "{pod}" not found', name=pod, kind="pods")
            return aiohttp.web.json_response(body, status=404)
        book = self.logs.get((namespace, pod))
        container = raw.query.get("container")
        if book is None or (container is not None and container != book.container):
            self._log_raw(raw, 400)
            message = (
                f'container "{container or "main"}" in pod "{pod}" is waiting to start: '
                "ContainerCreating"
            )
            return aiohttp.web.json_response(status_body(400, "BadRequest", message), status=400)
        self._log_raw(raw, 200)
        stamps = raw.query.get("timestamps") == "true"
        since_raw = raw.query.get("sinceTime")
        since = datetime.datetime.fromisoformat(since_raw) if since_raw else None

        def render(entry: tuple[datetime.datetime, str]) -> str | None:
            moment, text = entry
            if since is not None and moment < since:
                return None
            return f"{_stamp(moment)} {text}\n" if stamps else f"{text}\n"

        if raw.query.get("follow") != "true":
            text = "".join(r for r in map(render, book.lines) if r is not None)
            return aiohttp.web.Response(text=text, content_type="text/plain")
        response = aiohttp.web.StreamResponse()
        response.content_type = "text/plain"
        await response.prepare(raw)
        book.follows += 1
        cuts = book.cuts
        sent = 0
        while book.cuts == cuts:
            if raw.transport is None or raw.transport.is_closing():
                return response  # the client went away
            while sent < len(book.lines):
                line = render(book.lines[sent])
                sent += 1
                if line is not None:
                    await response.write(line.encode())
            if book.ended or self._stored(kmock.resource("", "v1", "pods"), namespace, pod) is None:
                if sent >= len(book.lines):
                    break
                continue
            await asyncio.sleep(0.02)
        await response.write_eof()
        return response


class ClientClusterThread(kmock_cluster.ClusterThread):
    """:class:`kmock_cluster.ClusterThread` serving a :class:`ClientCluster`."""

    def __init__(self) -> None:
        super().__init__()
        self.cluster = ClientCluster()

    def install_crds(self, kinds: list[str] | None = None) -> None:
        self.cluster.install_crds(
            [c for c in crds() if kinds is None or c["spec"]["names"]["kind"] in kinds]
        )

    def answer(
        self,
        method: str,
        path: str,
        status: int,
        body: Mapping[str, Any],
        *,
        times: int = 1_000_000,
    ) -> Canned:
        canned = Canned(method, path, status, body, times=times)
        self.cluster.canned.append(canned)
        return canned

    def client_calls(self) -> list[kmock_cluster.Call]:
        """The requests the client under test made (not the test's own)."""
        return [c for c in self.cluster.calls if not c.from_tests]


_HELD_PORTS: list[socket.socket] = []
"""Sockets bound for :func:`closed_port`, kept open while the tests' process runs."""


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: bound and kept, never listening, so that a
    connection to it is refused and no other process (another test's server, on the other
    pytest worker) can take it meanwhile, as it could a port bound and released."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    _HELD_PORTS.append(sock)
    port: int = sock.getsockname()[1]
    return port


# --- the test as operator and kubelet ------------------------------------------------------


def _job_path(kind_plural: str, namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/v1/namespaces/{namespace}/{kind_plural}/{name}"


class Operator:
    """What the operator and the kubelet would write, done by the test."""

    def __init__(self, cluster: ClientClusterThread) -> None:
        self.cluster = cluster

    def job(self, plural: str, namespace: str, name: str) -> Job:
        return load_job(self.cluster.get(_job_path(plural, namespace, name)))

    def create_pods(self, plural: str, namespace: str, name: str) -> list[dict[str, Any]]:
        """The pods of every replica, exactly as the operator builds them."""
        job = self.job(plural, namespace, name)
        plan = plan_on_kubernetes(job)
        created = []
        for replica in plan.replicas:
            pod = build_pod(job, replica, owner=Owner.of(job))
            created.append(self.cluster.create(f"/api/v1/namespaces/{namespace}/pods", pod))
        return created

    def set_conditions(
        self, plural: str, namespace: str, name: str, *conditions: tuple[str, str, str]
    ) -> None:
        """Write ``status.conditions`` (type, reason, message) through the subresource."""
        now = _stamp(datetime.datetime.now(tz=datetime.UTC))[:19] + "Z"
        status = {
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": reason,
                    "message": message,
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                }
                for kind, reason, message in conditions
            ],
            "startTime": now,
        }
        self.cluster.patch(_job_path(plural, namespace, name) + "/status", {"status": status})

    def pod_status(self, namespace: str, pod: str, status: Mapping[str, Any]) -> None:
        self.cluster.patch(
            f"/api/v1/namespaces/{namespace}/pods/{pod}/status", {"status": dict(status)}
        )

    def start_log(self, namespace: str, pod: str, container: str) -> LogBook:
        book = LogBook(container)
        self.cluster.cluster.logs[namespace, pod] = book
        return book


def running(container: str, *, ip: str, restarts: int = 0, last_exit: int | None = None) -> dict:
    """A pod status with its container running (as the kubelet reports it)."""
    cstatus: dict[str, Any] = {
        "name": container,
        "image": "trainer:1",
        "imageID": "",
        "ready": True,
        "restartCount": restarts,
        "state": {"running": {"startedAt": "2026-01-02T03:04:05Z"}},
    }
    if last_exit is not None:
        cstatus["lastState"] = {
            "terminated": {
                "exitCode": last_exit,
                "reason": "Error",
                "finishedAt": "2026-01-02T03:04:04Z",
            }
        }
    return {
        "phase": "Running",
        "podIP": ip,
        "startTime": "2026-01-02T03:04:00Z",
        "containerStatuses": [cstatus],
    }


def terminated(container: str, *, exit_code: int, ip: str = "", restarts: int = 0) -> dict:
    """A pod status with its container ended."""
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "podIP": ip,
        "startTime": "2026-01-02T03:04:00Z",
        "containerStatuses": [
            {
                "name": container,
                "image": "trainer:1",
                "imageID": "",
                "ready": False,
                "restartCount": restarts,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "startedAt": "2026-01-02T03:04:05Z",
                        "finishedAt": "2026-01-02T03:05:06Z",
                    }
                },
            }
        ],
    }


@contextlib.contextmanager
def later(seconds: float, action: Any) -> Iterator[threading.Thread]:
    """Run ``action`` after ``seconds`` in a thread (joined when the block ends)."""
    timer = threading.Timer(seconds, action)
    timer.start()
    try:
        yield timer
    finally:
        timer.join(timeout=30)


def as_json(obj: Any) -> Any:
    return json.loads(json.dumps(obj))
