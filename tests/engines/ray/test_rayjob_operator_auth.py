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
from collections.abc import Iterator
from typing import Any

import pytest

from support.operator_support import Cluster, Kubelet, Operator, job_path
from support.ray_job_api import RayJobApi, serving_ray_job_api
from support.waiting import eventually

HOST = "127.0.0.1"


@pytest.fixture
def job_api() -> Iterator[int]:
    with serving_ray_job_api(token="(not known yet)") as port:
        yield port


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
    RayJobApi.token = token  # the head's token is the Secret's

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
    assert {method for method, _ in RayJobApi.seen} == {"POST", "GET"}
    assert {given for _, given in RayJobApi.seen} == {f"Bearer {token}"}
    # The token is in no log of the operator's.
    assert token not in operator.log_path.read_text(encoding="utf-8", errors="replace")
