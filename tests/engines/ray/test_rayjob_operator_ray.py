"""The operator follows a RayJob's Ray job through Ray's own job API, against real Ray: a
``ray start --head`` on this machine plays the head pod (its dashboard on a free loopback
port, which the RayJob's ``rayStartParams`` name as ``dashboard-port``, so the rendered pod
declares the port the real head serves on), and the kubelet stand-in reports the head pod
Running and ready with ``podIP`` 127.0.0.1. In HTTPMode the operator POSTs the job to that
head itself (the core asks, ``SubmitRemote``); it really runs on that Ray; the operator asks
its status off its event loop and the core judges it: SUCCEEDED is Complete, an entrypoint
that raises is Failed with Ray's message. Against kmock, one operator for the module.

The Ray processes started here (the head and everything it starts) carry a token in their
environment and are all ended by PID at the end of the module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill import http_client
from support.control_plane import free_ports
from support.e2e_support import TOKEN_VAR, processes_with_token
from support.engines import skip_without
from support.operator_support import Cluster, Kubelet, Operator, job_path
from support.waiting import eventually

pytestmark = pytest.mark.engine

HOST = "127.0.0.1"
RAY_WAIT = 90.0
"""Seconds a real Ray head may take to start, or a Ray job to end, on a busy machine."""


def _healthy(dashboard: int) -> bool:
    try:
        answer = http_client.request(
            "GET", f"http://{HOST}:{dashboard}/api/gcs_healthz", user_agent="test", timeout=(1, 2)
        )
    except (http_client.NoAnswer, http_client.HttpAnswer):
        return False
    return answer.status == 200


def _end(token: str, head: subprocess.Popen[bytes]) -> None:
    """End every process of the Ray head (by PID): ``ray start --block`` stops its own on
    SIGTERM; whatever is left after it is killed."""
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
    for pid in processes_with_token(token):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    eventually(lambda: not processes_with_token(token), what="no Ray process left")


@pytest.fixture(scope="module")
def ray_head() -> Iterator[int]:
    """A real Ray head on loopback, every port its own; yields its dashboard's port."""
    skip_without("ray", "ray")
    gcs, dashboard, client, agent, grpc, runtime_env, metrics, node, objects, *workers = free_ports(
        17
    )
    token = uuid.uuid4().hex
    # Short: Ray's unix sockets live under it, and a socket's path must fit in 107 bytes.
    temp = tempfile.mkdtemp(prefix="kmray-", dir="/tmp")
    ray = Path(sys.executable).with_name("ray")
    argv = [
        str(ray), "start", "--head", "--block",
        f"--port={gcs}", f"--dashboard-port={dashboard}", f"--ray-client-server-port={client}",
        f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={grpc}",
        f"--runtime-env-agent-port={runtime_env}", f"--metrics-export-port={metrics}",
        f"--node-manager-port={node}", f"--object-manager-port={objects}",
        f"--worker-port-list={','.join(map(str, workers))}",
        f"--node-ip-address={HOST}", f"--dashboard-host={HOST}", f"--temp-dir={temp}",
        "--num-cpus=1", "--disable-usage-stats",
    ]  # fmt: skip
    env = dict(
        os.environ,
        RAY_USAGE_STATS_ENABLED="0",
        TMPDIR=temp,
        # The entrypoint's `python` is this environment's, with Ray.
        PATH=f"{ray.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        **{TOKEN_VAR: token},
    )
    log = open(Path(temp) / "head.log", "wb")  # noqa: SIM115 - closed at the end
    head = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        eventually(
            lambda: head.poll() is None and _healthy(dashboard),
            what="the Ray head serving",
            timeout=RAY_WAIT,
            interval=0.5,
        )
        yield dashboard
    finally:
        _end(token, head)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _rayjob(name: str, dashboard: int, entrypoint: str, ttl: int) -> dict[str, Any]:
    container = {"name": "ray-head", "image": "rayproject/ray:2.60.0"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": ttl,
            "runtimeEnvYAML": "env_vars:\n  ANSWER: '41'\n",
            "entrypoint": entrypoint,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-port": str(dashboard)},
                    "template": {"spec": {"containers": [container]}},
                },
                "workerGroupSpecs": [],
            },
        },
    }


def _run_on_the_real_head(
    cluster: Cluster, kubelet: Kubelet, namespace: str, name: str, dashboard: int
) -> tuple[dict[str, Any], str]:
    """The head pod created as rendered, reported Running and ready at 127.0.0.1 (where
    the real head serves): the RayJob once the core has judged it, and its path."""
    path = job_path("RayJob", namespace, name, upstream=True)
    head = f"{name}-head-0"
    pod_path = f"/api/v1/namespaces/{namespace}/pods/{head}"
    pod = eventually(lambda: cluster.get_or_none(pod_path), what="the head pod")
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports["dashboard"] == dashboard  # what the real head serves on
    kubelet.set(head, "Running", container="ray-head")
    cluster.patch(f"{pod_path}/status", {"status": {"podIP": HOST}})
    job = eventually(
        lambda: (j := cluster.get(path)) and j.get("status", {}).get("endTime") and j,
        what=f"{name} finished",
        timeout=RAY_WAIT,
        interval=0.2,
    )
    return job, pod_path


def test_the_operator_submits_over_http_and_rays_success_completes_the_rayjob(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, ray_head: int
) -> None:
    entrypoint = (
        'python -c "import os, ray; ray.init(); '
        "answer = ray.get(ray.remote(lambda: int(os.environ['ANSWER']) + 1).remote()); "
        'assert answer == 42, answer"'
    )
    manifest = _rayjob("rj-ok", ray_head, entrypoint, ttl=2)
    cluster.create(job_path("RayJob", namespace, upstream=True), manifest)
    job, pod_path = _run_on_the_real_head(cluster, kubelet, namespace, "rj-ok", ray_head)
    status = job["status"]
    assert status["jobStatus"] == "SUCCEEDED", status
    assert status["jobDeploymentStatus"] == "Complete"
    assert status["rayJobInfo"]["endTime"] >= status["rayJobInfo"]["startTime"]
    # Ray knows the job by the RayJob's id: the operator submitted it (no submitter pod).
    answer = http_client.request(
        "GET", f"http://{HOST}:{ray_head}/api/jobs/{status['jobId']}", user_agent="test"
    )
    assert b'"SUCCEEDED"' in answer.data
    # shutdownAfterJobFinishes: the cluster's pods go ttlSecondsAfterFinished (2 s) after
    # the end; the RayJob stays.
    eventually(lambda: cluster.get_or_none(pod_path) is None, what="the head pod deleted")
    rayjob = cluster.get(job_path("RayJob", namespace, "rj-ok", upstream=True))
    assert rayjob["status"]["jobDeploymentStatus"] == "Complete"


def test_a_ray_job_that_raises_fails_the_rayjob_with_rays_message(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, ray_head: int
) -> None:
    entrypoint = (
        'python -c "import os; '
        "raise ValueError('the answer is ' + os.environ['ANSWER'] + ', not 42')\""
    )
    manifest = _rayjob("rj-bad", ray_head, entrypoint, ttl=3600)
    cluster.create(job_path("RayJob", namespace, upstream=True), manifest)
    job, pod_path = _run_on_the_real_head(cluster, kubelet, namespace, "rj-bad", ray_head)
    status = job["status"]
    assert status["jobStatus"] == "FAILED", status
    assert status["jobDeploymentStatus"] == "Failed"
    assert status["reason"] == "AppFailed"
    assert "the answer is 41, not 42" in status["message"], status["message"]
    failed = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed and "the answer is 41" in failed[0]["message"]
    # Its ttlSecondsAfterFinished is an hour: the cluster serves on after the end.
    assert cluster.get_or_none(pod_path) is not None
