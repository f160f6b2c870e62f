"""Progress reports through the operator: its endpoint takes a report only from a pod of the
named job, as a TokenReview of the pod's token says, and the core writes ``trainerStatus``.

The operator runs with its progress endpoint on loopback; the test API server answers
TokenReviews from the table the test fills (``token_reviews``), as a real API server's
authenticator would for pod-bound service-account tokens.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.progress import FORWARD_AUDIENCE, PROGRESS_FILE_ENV, report
from kubemill.substrates.kubernetes.observe import PodSnapshot
from kubemill.substrates.kubernetes.operator.caches import Caches
from kubemill.substrates.kubernetes.operator.progress import (
    POD_NAME_EXTRA,
    POD_UID_EXTRA,
    REVIEW_SECONDS,
    ProgressEndpoint,
    Refused,
)
from kubemill.substrates.kubernetes.operator.settings import JobResource
from kubemill.substrates.kubernetes.progress import (
    FORWARDER,
    REPORTS_FILE,
    SIDECAR,
    TOKEN_PATH,
    TOKEN_VOLUME,
    VOLUME,
)
from support.operator_jobs import pytorchjob
from support.operator_support import (
    Cluster,
    Kubelet,
    Operator,
    job_path,
    running_operator,
)
from support.waiting import eventually

IMAGE = "registry.example/kubemill-operator:test"


@pytest.fixture(scope="module")
def progress_operator(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("progress-operator")
    # The endpoint's port is the test's own (Operator.progress_port), as in the Deployment.
    args = ("--all-namespaces", "--progress-port=8082", f"--progress-image={IMAGE}")
    with running_operator(cluster, workdir, *args, name="progress") as operator:
        yield operator


@pytest.fixture(scope="module")
def progress_port(progress_operator: Operator) -> int:
    return progress_operator.progress_port


def _pod(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = cluster.get_or_none(
        f"/api/v1/namespaces/{namespace}/pods/{name}"
    )
    return found


def _running_job(cluster: Cluster, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    """A PyTorchJob (a master and a worker) whose pods run; its pods by name."""
    cluster.create(job_path("PyTorchJob", namespace), pytorchjob(name, workers=1))
    names = (f"{name}-master-0", f"{name}-worker-0")
    pods = {n: eventually(lambda n=n: _pod(cluster, namespace, n), what=n) for n in names}
    kubelet = Kubelet(cluster, namespace)
    for pod in names:
        kubelet.set(pod, "Running", container="pytorch")
    return {n: p for n, p in pods.items() if p is not None}


def _review(namespace: str, pod: dict[str, Any] | None, **change: Any) -> dict[str, Any]:
    """A TokenReview's status for a pod-bound token of ``pod`` (``None``: bound to none)."""
    user: dict[str, Any] = {"username": f"system:serviceaccount:{namespace}:default"}
    if pod is not None:
        meta = pod["metadata"]
        user["extra"] = {POD_NAME_EXTRA: [meta["name"]], POD_UID_EXTRA: [meta["uid"]]}
    status = {"authenticated": True, "audiences": [FORWARD_AUDIENCE], "user": user}
    return {**status, **change}


def _post(port: int, token: str | None, body: dict[str, Any]) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/progress",
        data=json.dumps(body).encode(),
        method="POST",
        headers=headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _body(namespace: str, name: str, **report: Any) -> dict[str, Any]:
    state = {"step": None, "total": None, "time": 1_700_000_000.0, "metrics": {}, "origin": None}
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "PyTorchJob",
        "namespace": namespace,
        "name": name,
        "report": {**state, **report},
    }


def _trainer_status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    job = cluster.get(job_path("PyTorchJob", namespace, name))
    status: dict[str, Any] = (job.get("status") or {}).get("trainerStatus") or {}
    return status


def test_job_pods_get_the_progress_file_and_the_forwarder_sidecar(
    cluster: Cluster, progress_operator: Operator, namespace: str
) -> None:
    pods = _running_job(cluster, namespace, "sidecar")
    for pod in pods.values():
        spec = pod["spec"]
        (forwarder,) = spec["initContainers"]
        assert forwarder["name"] == SIDECAR
        assert forwarder["restartPolicy"] == "Always"  # a native sidecar
        assert forwarder["image"] == IMAGE
        assert forwarder["command"] == list(FORWARDER)
        args = forwarder["args"]
        # The operator's Service in the operator's namespace (its default, no $POD_NAMESPACE).
        port = progress_operator.progress_port
        url = f"http://kubemill-operator.kubemill-system.svc:{port}/progress"
        assert args[args.index("--forward") + 1] == url
        assert args[args.index("--name") + 1] == "sidecar"
        assert args[args.index("--namespace") + 1] == namespace
        (main,) = spec["containers"]
        assert {"name": PROGRESS_FILE_ENV, "value": REPORTS_FILE} in main["env"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes[VOLUME]
        (source,) = volumes[TOKEN_VOLUME]["projected"]["sources"]
        assert source["serviceAccountToken"]["audience"] == FORWARD_AUDIENCE
        # The token is the forwarder's only: the program's container does not mount it.
        assert TOKEN_VOLUME not in {m["name"] for m in main.get("volumeMounts", [])}
        assert TOKEN_PATH.startswith(
            {m["name"]: m["mountPath"] for m in forwarder["volumeMounts"]}[TOKEN_VOLUME]
        )


def test_a_report_from_the_jobs_own_pod_becomes_its_trainer_status(
    cluster: Cluster, progress_operator: Operator, namespace: str, progress_port: int
) -> None:
    pods = _running_job(cluster, namespace, "ok")
    master = pods["ok-master-0"]
    cluster.cluster.token_reviews["t-ok-master"] = _review(namespace, master)
    body = _body(namespace, "ok", step=3, total=10, metrics={"loss": 0.5}, origin=[1.7e9 - 30, 0])
    assert _post(progress_port, "t-ok-master", body) == 202
    status = eventually(
        lambda: (
            _trainer_status(cluster, namespace, "ok").get("progressPercentage") == 30
            and _trainer_status(cluster, namespace, "ok")
        ),
        what="trainerStatus from the master's report",
    )
    assert status["metrics"] == [{"name": "loss", "value": "0.5"}]
    assert status["step"] == 3
    assert status["total"] == 10
    # 3 steps in 30 s: 7 left take 70 s.
    assert status["estimatedRemainingSeconds"] == 70


def test_reports_the_endpoint_refuses(
    cluster: Cluster, progress_operator: Operator, namespace: str, progress_port: int
) -> None:
    pods = _running_job(cluster, namespace, "guarded")
    other = _running_job(cluster, namespace, "other")
    master = pods["guarded-master-0"]
    reviews = cluster.cluster.token_reviews
    reviews["t-other-job"] = _review(namespace, other["other-master-0"])
    reviews["t-stale-uid"] = _review(
        namespace, {"metadata": {**master["metadata"], "uid": "not-the-pods-uid"}}
    )
    reviews["t-unbound"] = _review(namespace, None)
    reviews["t-other-namespace"] = _review("elsewhere", master)
    reviews["t-api-audience"] = _review(namespace, master, audiences=["https://kubernetes"])
    reviews["t-not-a-service-account"] = _review(namespace, master, user={"username": "alice"})
    reviews["t-guarded"] = _review(namespace, master)
    body = _body(namespace, "guarded", step=1, total=4)
    refused = {
        "no token": (None, 401),
        "an unknown token": ("t-forged", 401),
        "another audience's token": ("t-api-audience", 401),
        "a user's token": ("t-not-a-service-account", 403),
        "a token bound to no pod": ("t-unbound", 403),
        "a token of another job's pod": ("t-other-job", 403),
        "a token of a pod of that name but another uid": ("t-stale-uid", 403),
        "a token of another namespace's account": ("t-other-namespace", 403),
    }
    answers = {why: _post(progress_port, token, body) for why, (token, _) in refused.items()}
    assert answers == {why: status for why, (_, status) in refused.items()}
    # The right token, but a job the pod is not one of, or a report off the protocol.
    assert _post(progress_port, "t-guarded", {**body, "name": "other"}) == 403
    assert _post(progress_port, "t-guarded", _body(namespace, "guarded", step=-1)) == 400
    bad_metric = _body(namespace, "guarded", metrics={"loss": "low"})
    assert _post(progress_port, "t-guarded", bad_metric) == 400
    assert _post(progress_port, "t-guarded", {"report": {}}) == 400
    # Nothing refused reached a status; the job's own pod's report does.
    assert _trainer_status(cluster, namespace, "guarded") == {}
    assert _trainer_status(cluster, namespace, "other") == {}
    assert _post(progress_port, "t-guarded", body) == 202
    eventually(
        lambda: _trainer_status(cluster, namespace, "guarded").get("progressPercentage") == 25,
        what="the accepted report",
    )


def test_the_forwarder_sends_what_the_program_reports_and_its_last_report_on_stop(
    cluster: Cluster,
    progress_operator: Operator,
    namespace: str,
    progress_port: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pods = _running_job(cluster, namespace, "fwd")
    cluster.cluster.token_reviews["t-fwd"] = _review(namespace, pods["fwd-master-0"])
    token = tmp_path / "token"
    token.write_text("t-fwd\n")
    reports = tmp_path / "reports.jsonl"
    argv = [
        sys.executable, *FORWARDER[1:],
        "--forward", f"http://127.0.0.1:{progress_port}/progress",
        "--token-file", str(token), "--file", str(reports),
        "--api-version", "kubemill.dev/v1", "--kind", "PyTorchJob",
        "--namespace", namespace, "--name", "fwd",
        "--interval", "0.2",
    ]  # fmt: skip
    forwarder = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        monkeypatch.setenv(PROGRESS_FILE_ENV, str(reports))
        report(step=1, total=8)  # the file did not exist until now
        eventually(
            lambda: _trainer_status(cluster, namespace, "fwd").get("step") == 1,
            what="the first report",
        )
        report(loss=0.25)  # a metric alone keeps the step and total
        eventually(
            lambda: (
                _trainer_status(cluster, namespace, "fwd").get("metrics")
                == [{"name": "loss", "value": "0.25"}]
            ),
            what="the metric",
        )
        report(step=8)
        forwarder.send_signal(signal.SIGTERM)  # the kubelet stops a sidecar this way
        assert forwarder.wait(timeout=30) == 0
    finally:
        if forwarder.poll() is None:
            forwarder.kill()
            forwarder.wait()
    eventually(
        lambda: _trainer_status(cluster, namespace, "fwd").get("progressPercentage") == 100,
        what="the last report, sent as the forwarder stopped",
    )
    status = _trainer_status(cluster, namespace, "fwd")
    assert (status["step"], status["total"]) == (8, 8)
    assert status["metrics"] == [{"name": "loss", "value": "0.25"}]
    assert forwarder.stderr is not None
    assert b"t-fwd" not in forwarder.stderr.read()  # the token is never logged


def test_a_follower_sends_the_report_back_and_a_review_is_asked_once_a_minute() -> None:
    """The endpoint's own rules, without a server: a replica that does not lead takes
    nothing (503: the forwarder tries again through the Service), an API server that does
    not answer is no refusal (503), and a token reviewed is not reviewed again for a
    minute."""
    resource = JobResource("kubemill.dev", "v1", "pytorchjobs", "PyTorchJob")
    key = ("kubemill.dev", "pytorchjobs", "ns", "j")
    pod = {"metadata": {"name": "j-master-0", "uid": "u1", "namespace": "ns"}}
    snapshot = PodSnapshot(
        name="j-master-0", uid="u1", owner_uid="job-uid", replica_type="master", index=0,
        phase="Running",
    )  # fmt: skip
    caches = Caches(
        jobs={key: [{"metadata": {"name": "j", "namespace": "ns", "uid": "job-uid"}}]},
        pods={("ns", "j"): [snapshot]},
        services={},
        pod_groups={},
    )
    reviews: list[str] = []
    answers: list[Any] = []

    async def review(token: str) -> dict[str, Any]:
        reviews.append(token)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"status": answer}

    now = [0.0]
    leading = [False]
    endpoint = ProgressEndpoint(
        review=review,
        caches=caches,
        resources={("kubemill.dev/v1", "PyTorchJob"): resource},
        reports={},
        leading=lambda: leading[0],
        wake=lambda _key: None,
        clock=lambda: now[0],
    )
    body = _body("ns", "j", step=1, total=2)

    def accept() -> int:
        try:
            asyncio.run(endpoint.accept("t", body))
        except Refused as refused:
            return refused.status
        return 202

    assert accept() == 503  # not leading: not even a review
    assert reviews == []
    leading[0] = True
    answers[:] = [ConnectionError("the API server is away"), _review("ns", pod)]
    assert (accept(), accept(), accept()) == (503, 202, 202)
    assert reviews == ["t", "t"]  # the third was remembered
    now[0] += REVIEW_SECONDS + 1
    answers[:] = [{"authenticated": False}]
    assert accept() == 401  # asked again once the minute is over: the token expired
