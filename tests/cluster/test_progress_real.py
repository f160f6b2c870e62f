"""Progress reports on the real control plane: a job pod's own bound token is what the
operator's endpoint believes, as the real API server's TokenReview says; the forwarder's
reports become the job's ``trainerStatus`` and ``kubemill get`` shows PROGRESS.

No kubelet runs here, so the sidecar's part is played by the forwarder process on this
machine, with what the kubelet would mount into the pod: a token the TokenRequest API binds
to the pod, of the kubemill audience.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kubemill.progress import FORWARD_AUDIENCE, PROGRESS_FILE_ENV, report
from kubemill.sdk import JobClient
from kubemill.substrates.kubernetes.progress import FORWARDER, SIDECAR, TOKEN_VOLUME
from support.control_plane import ControlPlane
from support.node import NodeStandIn
from support.operator_jobs import pytorchjob
from support.real_operator import RealOperator, run_kubemill
from support.waiting import eventually

WAIT = 60.0
"""Upper bound on the operator and the controllers acting: a hang guard."""


def _pod(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return found


def _bound_token(plane: ControlPlane, pod: dict[str, Any], *, audience: str) -> str:
    """A token of the pod's service account bound to the pod (what the kubelet projects)."""
    meta = pod["metadata"]
    account = pod["spec"].get("serviceAccountName") or "default"
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [audience],
            "expirationSeconds": 600,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }
    path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
    answer = plane.request("POST", path, request)
    token: str = answer["status"]["token"]
    return token


def _post(port: int, token: str | None, body: dict[str, Any]) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    url = f"http://127.0.0.1:{port}/progress"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _trainer_status(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    job = plane.request("GET", f"/apis/kubemill.dev/v1/namespaces/{namespace}/pytorchjobs/{name}")
    status: dict[str, Any] = (job.get("status") or {}).get("trainerStatus") or {}
    return status


def test_the_pods_own_token_carries_its_reports_into_the_jobs_status(
    control_plane: ControlPlane,
    node: NodeStandIn,
    operator: RealOperator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(pytorchjob("train"))
    client.submit(pytorchjob("other"))
    names = ("train-master-0", "train-worker-0", "other-master-0")
    eventually(
        lambda: all(node.running(namespace, name) for name in names), timeout=WAIT, what="running"
    )
    master = _pod(control_plane, namespace, "train-master-0")
    # The real API server took the native sidecar and the projected token of the audience.
    (forwarder,) = master["spec"]["initContainers"]
    assert (forwarder["name"], forwarder["restartPolicy"]) == (SIDECAR, "Always")
    volumes = {v["name"]: v for v in master["spec"]["volumes"]}
    (source,) = volumes[TOKEN_VOLUME]["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == FORWARD_AUDIENCE

    port = operator.progress_port
    body = {
        "apiVersion": "kubemill.dev/v1",
        "kind": "PyTorchJob",
        "namespace": namespace,
        "name": "train",
        "report": {"step": 1, "total": 2, "time": 1.7e9, "metrics": {}, "origin": None},
    }
    other_pod = _pod(control_plane, namespace, "other-master-0")
    refused = {
        "no token": _post(port, None, body),
        "another job's pod's token": _post(
            port, _bound_token(control_plane, other_pod, audience=FORWARD_AUDIENCE), body
        ),
        "the pod's token for the API server": _post(
            port,
            _bound_token(control_plane, master, audience="https://kubernetes.default.svc"),
            body,
        ),
    }
    assert refused == {
        "no token": 401,
        "another job's pod's token": 403,
        "the pod's token for the API server": 401,
    }
    assert _trainer_status(control_plane, namespace, "train") == {}

    token = tmp_path / "token"
    token.write_text(_bound_token(control_plane, master, audience=FORWARD_AUDIENCE))
    reports = tmp_path / "reports.jsonl"
    argv = [
        sys.executable, *FORWARDER[1:],
        "--forward", f"http://127.0.0.1:{port}/progress",
        "--token-file", str(token), "--file", str(reports),
        "--api-version", "kubemill.dev/v1", "--kind", "PyTorchJob",
        "--namespace", namespace, "--name", "train",
    ]  # fmt: skip
    process = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        monkeypatch.setenv(PROGRESS_FILE_ENV, str(reports))
        report(step=3, total=10, loss=0.5)
        status = eventually(
            lambda: (
                _trainer_status(control_plane, namespace, "train").get("step") == 3
                and _trainer_status(control_plane, namespace, "train")
            ),
            timeout=WAIT,
            what="trainerStatus from the forwarded report",
        )
        assert status["progressPercentage"] == 30
        assert status["metrics"] == [{"name": "loss", "value": "0.5"}]
        report(step=10, accuracy=0.9)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    done = eventually(
        lambda: (
            _trainer_status(control_plane, namespace, "train").get("step") == 10
            and _trainer_status(control_plane, namespace, "train")
        ),
        timeout=WAIT,
        what="the last report",
    )
    assert done["progressPercentage"] == 100
    assert done["metrics"] == [
        {"name": "accuracy", "value": "0.9"},
        {"name": "loss", "value": "0.5"},
    ]
    assert _trainer_status(control_plane, namespace, "other") == {}

    listed = run_kubemill(control_plane, "--substrate", "kubernetes", "get", "-n", namespace)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert "PROGRESS" in header.split()
    column = header.split().index("PROGRESS")
    cells = {row.split()[0]: row.split()[column] for row in rows}
    assert cells["train"] == "100%"
