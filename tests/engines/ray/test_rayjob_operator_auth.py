"""The operator with a RayJob whose cluster has Ray's token authentication (KubeRay's
``authOptions.mode: token``): it creates the token Secret KubeRay would (the cluster's
name, key ``auth_token``, owned by the RayJob), every pod's Ray container takes
``RAY_AUTH_TOKEN`` from it, and the operator's own requests to the head's job API carry
that Secret's token as ``Authorization: Bearer``. Against kmock, with a fake job API on
loopback playing the head pod (the kubelet stand-in reports the head at 127.0.0.1); one
operator for the module (tests/engines/conftest.py's fixtures).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from support.operator_support import Cluster, Kubelet, Operator, job_path
from support.waiting import eventually

HOST = "127.0.0.1"


class FakeJobApi(BaseHTTPRequestHandler):
    """Ray's job API as far as the operator uses it in HTTPMode (``POST /api/jobs/``,
    ``GET /api/jobs/<id>``), refusing (401, as Ray) whatever lacks the expected token."""

    token: ClassVar[str | None] = None
    seen: ClassVar[list[tuple[str, str | None]]] = []
    jobs: ClassVar[dict[str, dict[str, Any]]] = {}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization")
        self.seen.append((self.command, given))
        if self.token is not None and given == f"Bearer {self.token}":
            return True
        self._answer(401, {"error": "Unauthenticated"})
        return False

    def do_GET(self) -> None:
        if self._authorized():
            job = self.jobs.get(self.path.removeprefix("/api/jobs/"))
            self._answer(200 if job else 404, job or {"error": "not found"})

    def do_POST(self) -> None:
        if self._authorized():
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.jobs[body["submission_id"]] = {"status": "SUCCEEDED", "message": "done"}
            self._answer(200, {"submission_id": body["submission_id"]})


@pytest.fixture
def job_api() -> Iterator[int]:
    FakeJobApi.token, FakeJobApi.seen, FakeJobApi.jobs = None, [], {}
    server = ThreadingHTTPServer((HOST, 0), FakeJobApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _rayjob(name: str, dashboard: int) -> dict[str, Any]:
    container = {"name": "ray-head", "image": "rayproject/ray:2.60.0"}
    worker = {"name": "ray-worker", "image": "rayproject/ray:2.60.0"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "submissionMode": "HTTPMode",
            "entrypoint": "python -c 'print(42)'",
            "rayClusterSpec": {
                "authOptions": {"mode": "token"},
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-port": str(dashboard)},
                    "template": {"spec": {"containers": [container]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "workers",
                        "replicas": 1,
                        "rayStartParams": {},
                        "template": {"spec": {"containers": [worker]}},
                    }
                ],
            },
        },
    }


def test_the_operator_makes_the_token_secret_and_asks_rays_job_api_with_its_token(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, job_api: int
) -> None:
    created = cluster.create(
        job_path("RayJob", namespace, upstream=True), _rayjob("rj-auth", job_api)
    )
    secret_path = f"/api/v1/namespaces/{namespace}/secrets/rj-auth"
    secret = eventually(lambda: cluster.get_or_none(secret_path), what="the token Secret")
    assert secret["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    assert len(token) == 64
    FakeJobApi.token = token  # the head's token is the Secret's

    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    head_path = f"{pods_path}/rj-auth-head-0"
    head = eventually(lambda: cluster.get_or_none(head_path), what="the head pod")
    kubelet.set("rj-auth-head-0", "Running", container="ray-head")
    worker = eventually(
        lambda: cluster.get_or_none(f"{pods_path}/rj-auth-workers-0"), what="the worker pod"
    )
    for pod in (head, worker):  # the env names the Secret, never the token
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"] == {
            "secretKeyRef": {"name": "rj-auth", "key": "auth_token"}
        }
        assert token not in json.dumps(pod)
    kubelet.set("rj-auth-workers-0", "Running", container="ray-worker")
    cluster.patch(f"{head_path}/status", {"status": {"podIP": HOST}})

    path = job_path("RayJob", namespace, "rj-auth", upstream=True)
    job = eventually(
        lambda: (j := cluster.get(path)) and j.get("status", {}).get("endTime") and j,
        what="rj-auth finished",
    )
    assert job["status"]["jobStatus"] == "SUCCEEDED", job["status"]
    assert job["status"]["jobDeploymentStatus"] == "Complete"
    # The submission and every status read carried the Secret's token, and nothing else.
    assert {method for method, _ in FakeJobApi.seen} == {"POST", "GET"}
    assert {given for _, given in FakeJobApi.seen} == {f"Bearer {token}"}
    # The token is in no log of the operator's.
    assert token not in operator.log_path.read_text(encoding="utf-8", errors="replace")
