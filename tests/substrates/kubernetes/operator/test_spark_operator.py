"""The real operator runs a SparkApplication against the strict test API server (the kubelet
and Spark's driver emulated).

The operator creates the driver's configuration, account, services, NetworkPolicy and pod;
the driver ("the test") creates an executor pod owned by the driver pod, labelled as Spark labels it
(with ``spark.kubernetes.executor.label.*`` from spark.properties); the executor is counted
in ``replicaStatuses.Executor`` and ``executorState`` and never deleted; and the driver
decides: SUBMITTED, RUNNING, then COMPLETED or FAILED with its error.

Then the spark-operator's state machine, decided by the core: OnFailure re-runs exactly
``onFailureRetries`` times after ``onFailureRetryInterval`` (PENDING_RERUN, the driver
deleted and created again, the executors left to go with it); a submission the API refuses
is SUBMISSION_FAILED and submitted again; a driver whose image cannot be pulled fails the
application; a driver briefly missing right after its submission is not a failure; a
suspended driver's exit 143 is not a failure (SUSPENDING, SUSPENDED, RESUMING); a spec
change re-runs the application (INVALIDATING); the TTL deletes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubemill.cli.app import app
from support.kmock_cluster import Fault
from support.operator_support import (
    Cluster,
    Kubelet,
    container_status,
    is_true,
    job_path,
    now_stamp,
    running_cluster,
    running_operator,
)
from support.waiting import eventually

DRIVER = "spark-kubernetes-driver"


def spark_app(name: str = "s") -> dict[str, Any]:
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Python",
            "sparkVersion": "4.0.0",
            "image": "spark:4.0.0",
            "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
            "arguments": ["10"],
            "executor": {"instances": 1},
        },
    }


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as served:
        yield served


def pod_names(cluster: Cluster, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def state_of(job: dict[str, Any]) -> str:
    status = job.get("status") or {}
    found: str = (status.get("applicationState") or {}).get("state", "")
    return found


def state(cluster: Cluster, path: str) -> str:
    return state_of(cluster.get(path))


def statuses_written(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """Every status the operator's status patches wrote with an applicationState, in order
    (a state may last only a moment: a poll of the object can miss it, the record cannot)."""
    out = []
    status: dict[str, Any] = {}
    for call in cluster.operator_calls(namespace=namespace):
        if call.method != "PATCH" or call.resource != "sparkapplications/status":
            continue
        patch = (call.body or {}).get("status") or {}
        if call.status >= 300:
            continue
        # Status patches are merge patches: each names what changed since the last one.
        status = merged(status, patch)
        if (patch.get("applicationState") or {}).get("state") is not None:
            out.append(status)
    return out


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with a JSON merge patch applied (RFC 7386)."""
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def states_written(cluster: Cluster, namespace: str) -> list[str]:
    """Every applicationState.state the operator's status patches wrote, in order."""
    return [s["applicationState"]["state"] for s in statuses_written(cluster, namespace)]


def driver_posts(cluster: Cluster, namespace: str) -> list[int]:
    """The statuses of the operator's creations of the driver pod."""
    return [
        c.status
        for c in cluster.operator_calls(namespace=namespace)
        if c.method == "POST"
        and c.resource == "pods"
        and c.body["metadata"]["name"] == "s-driver-0"
    ]


def wait_state(cluster: Cluster, path: str, wanted: str) -> dict[str, Any]:
    found: dict[str, Any] = eventually(
        lambda: (job := cluster.get(path)) and state_of(job) == wanted and job, what=wanted
    )
    return found


def spark_properties(cluster: Cluster, namespace: str) -> dict[str, str]:
    config = cluster.get(f"/api/v1/namespaces/{namespace}/configmaps/s-spark-conf")
    lines = config["data"]["spark.properties"].splitlines()
    return dict(line.split("=", 1) for line in lines)


def executor_pod(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The executor pod as Spark's driver creates it: owned by the driver pod, with Spark's
    labels and the ones spark.properties asks for."""
    driver = cluster.get(f"/api/v1/namespaces/{namespace}/pods/s-driver-0")
    conf = spark_properties(cluster, namespace)
    prefix = "spark.kubernetes.executor.label."
    labels = {k[len(prefix) :]: v for k, v in conf.items() if k.startswith(prefix)}
    labels.update(
        {
            "spark-app-selector": conf["spark.app.id"],
            "spark-role": "executor",
            "spark-exec-id": "1",
            "spark-app-name": "s",
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "s-driver-0",
                    "uid": driver["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "spark-kubernetes-executor", "image": "spark:4.0.0"}],
        },
    }


def kubemill_get(kubeconfig: Path, namespace: str) -> list[list[str]]:
    """The rows of ``kubemill --substrate kubernetes get`` in one namespace."""
    cli = ["--substrate", "kubernetes", "--kubeconfig", str(kubeconfig), "get", "-n", namespace]
    result = CliRunner().invoke(app, cli)
    assert result.exit_code == 0, result.output
    return [line.split() for line in result.stdout.splitlines() if line.strip()]


def test_the_driver_creates_executors_and_decides(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces") as operator:
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), spark_app())
        eventually(lambda: pod_names(cluster, namespace) == {"s-driver-0"}, what="the driver")
        eventually(lambda: state(cluster, path) == "SUBMITTED", what="SUBMITTED")

        # What the driver needs is there: its conf, its account, its services.
        conf = spark_properties(cluster, namespace)
        assert conf["spark.driver.host"] == f"s-driver-0.s-driver-svc.{namespace}.svc"
        assert conf["spark.kubernetes.namespace"] == namespace
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        (rule,) = cluster.get(f"{rbac}/roles/s-driver")["rules"]
        assert {"create", "watch", "delete"} <= set(rule["verbs"])
        driver = cluster.get(f"{pods}/s-driver-0")
        assert driver["spec"]["serviceAccountName"] == "s-driver"
        assert driver["metadata"]["labels"]["spark-role"] == "driver"
        services = f"/api/v1/namespaces/{namespace}/services"
        assert cluster.get(f"{services}/s-driver-svc")["spec"]["clusterIP"] == "None"
        assert cluster.get(f"{services}/s-ui-svc")["spec"]["ports"][0]["port"] == 4040
        # Spark's NetworkPolicy: the executors take connections from this application only.
        policies = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"
        policy = cluster.get(f"{policies}/s-policy")
        assert policy["spec"]["podSelector"]["matchLabels"] == {
            "spark-role": "executor",
            "spark-app-selector": conf["spark.app.id"],
        }
        assert policy["metadata"]["ownerReferences"][0]["kind"] == "SparkApplication"

        kubelet = Kubelet(cluster, namespace)
        kubelet.set("s-driver-0", "Running", container=DRIVER)
        running = eventually(
            lambda: (job := cluster.get(path)) and state_of(job) == "RUNNING" and job,
            what="RUNNING",
        )
        info = running["status"]["driverInfo"]
        assert (info["podName"], info["webUIServiceName"], info["webUIPort"]) == (
            "s-driver-0",
            "s-ui-svc",
            4040,
        )
        # As the spark-operator: the UI service's cluster IP (the API server's) and port.
        ui_ip = cluster.get(f"{services}/s-ui-svc")["spec"]["clusterIP"]
        assert info["webUIAddress"] == f"{ui_ip}:4040"

        # The driver creates an executor: counted, its state reported.
        cluster.create(pods, executor_pod(cluster, namespace, "s-exec-1"))
        kubelet.set("s-exec-1", "Running", container="spark-kubernetes-executor")
        eventually(
            lambda: cluster.get(path)["status"].get("executorState") == {"s-exec-1": "RUNNING"},
            what="the executor's state",
        )
        eventually(
            lambda: (
                cluster.get(path)["status"]["replicaStatuses"].get("Executor", {}).get("active")
                == 1
            ),
            what="the executor counted",
        )

        # The driver's node stops reporting: UNKNOWN until it does again.
        kubelet.set("s-driver-0", "Unknown", container=DRIVER)
        wait_state(cluster, path, "UNKNOWN")
        kubelet.set("s-driver-0", "Running", container=DRIVER)
        wait_state(cluster, path, "RUNNING")

        kubelet.set("s-driver-0", "Succeeded", container=DRIVER, exit_code=0)
        done = eventually(
            lambda: (job := cluster.get(path)) and state_of(job) == "COMPLETED" and job,
            what="COMPLETED",
        )
        assert is_true(done, "Succeeded")
        assert done["status"]["sparkApplicationId"] == conf["spark.app.id"]
        # Never deleted by kubemill: it goes with its driver pod.
        assert "s-exec-1" in pod_names(cluster, namespace)
        deletes = [c for c in cluster.calls() if c.method == "DELETE" and c.name == "s-exec-1"]
        assert deletes == []
        # `kubemill get` shows the application's state.
        header, row = kubemill_get(operator.kubeconfig, namespace)
        assert header[:3] == ["NAME", "KIND", "STATE"]
        assert row[:3] == ["s", "SparkApplication", "COMPLETED"]


def test_a_failed_driver_fails_the_application_with_its_error(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), spark_app())
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        kubelet = Kubelet(cluster, namespace)
        kubelet.set("s-driver-0", "Running", container=DRIVER)
        kubelet.set("s-driver-0", "Failed", container=DRIVER, exit_code=1, reason="Error")
        failed = eventually(
            lambda: (job := cluster.get(path)) and state_of(job) == "FAILED" and job,
            what="FAILED",
        )
        assert is_true(failed, "Failed")
        # The core's verdict, in the spark-operator's words: the driver's exit and reason.
        message = failed["status"]["applicationState"]["errorMessage"]
        assert message == next(
            c["message"] for c in failed["status"]["conditions"] if c["type"] == "Failed"
        )
        assert message == "driver container failed with ExitCode: 1, Reason: Error"


@pytest.mark.parametrize("upstream", [False, True], ids=["kubemill", "sparkoperator"])
def test_time_to_live_deletes_the_application_in_either_group(
    cluster: Cluster, tmp_path: Path, upstream: bool
) -> None:
    namespace = cluster.namespace()
    manifest = spark_app()
    manifest["spec"]["timeToLiveSeconds"] = 1
    if not upstream:
        manifest["apiVersion"] = "kubemill.dev/v1"
    with running_operator(cluster, tmp_path, "--all-namespaces", "--serve-upstream-groups"):
        path = job_path("SparkApplication", namespace, "s", upstream=upstream)
        created = cluster.create(
            job_path("SparkApplication", namespace, upstream=upstream), manifest
        )
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        kubelet = Kubelet(cluster, namespace)
        # An evicted driver fails the run: its pods are never restarted (the spark-operator
        # re-runs the whole application instead), so there are no restart counts to keep.
        kubelet.set("s-driver-0", "Failed", container=DRIVER, reason="Evicted")
        eventually(lambda: cluster.get_or_none(path) is None, what="deleted by its TTL")
        # FAILED lasted the TTL (1 s), which a poll under load can miss: the writes tell.
        assert states_written(cluster, namespace)[-1] == "FAILED"
        restarts_written = [
            c
            for c in cluster.operator_calls(namespace=namespace)
            if c.method == "PATCH" and "kubemill.dev/restarts" in json.dumps(c.body)
        ]
        assert restarts_written == []
        deletes = [
            c for c in cluster.calls() if c.method == "DELETE" and c.name == "s" and c.status < 300
        ]
        assert [c.body.get("preconditions") for c in deletes] == [
            {"uid": created["metadata"]["uid"]}
        ]


# --- the state machine ------------------------------------------------------------------------


def test_on_failure_re_runs_exactly_once_after_the_interval(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = cluster.namespace()
    manifest = spark_app()
    manifest["spec"]["restartPolicy"] = {
        "type": "OnFailure",
        "onFailureRetries": 1,
        "onFailureRetryInterval": 2,
    }
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), manifest)
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        first_uid = cluster.get(f"{pods}/s-driver-0")["metadata"]["uid"]
        kubelet = Kubelet(cluster, namespace)
        kubelet.set("s-driver-0", "Running", container=DRIVER)
        wait_state(cluster, path, "RUNNING")
        cluster.create(pods, executor_pod(cluster, namespace, "s-exec-1"))
        kubelet.set("s-driver-0", "Failed", container=DRIVER, exit_code=1, reason="Error")
        failing = wait_state(cluster, path, "FAILING")
        assert failing["status"]["applicationState"]["errorMessage"] == (
            "driver container failed with ExitCode: 1, Reason: Error"
        )

        # Re-run: the failed driver is deleted and a new one created, once the interval
        # from the termination has passed.
        def second_driver() -> bool:
            pod = cluster.get_or_none(f"{pods}/s-driver-0")
            return pod is not None and pod["metadata"]["uid"] != first_uid

        eventually(second_driver, what="the driver of the re-run")
        resubmitted = wait_state(cluster, path, "SUBMITTED")["status"]
        assert resubmitted["executionAttempts"] == 2
        assert resubmitted["submissionAttempts"] == 1
        ended = datetime.fromisoformat(failing["status"]["terminationTime"])
        again = datetime.fromisoformat(resubmitted["lastSubmissionAttemptTime"])
        assert again >= ended + timedelta(seconds=2)
        assert not is_true(cluster.get(path), "Failed")

        kubelet.set("s-driver-0", "Failed", container=DRIVER, exit_code=1, reason="Error")
        failed = wait_state(cluster, path, "FAILED")
        assert is_true(failed, "Failed")
        assert failed["status"]["executionAttempts"] == 2
        written = states_written(cluster, namespace)
        assert written.count("SUBMITTED") == 2 and "PENDING_RERUN" in written
        assert written.index("FAILING") < written.index("PENDING_RERUN")
        assert driver_posts(cluster, namespace) == [201, 201]
        # The core deleted the first driver only; its executor goes with it (by its owner).
        deleted = [
            c.name for c in cluster.operator_calls(namespace=namespace) if c.method == "DELETE"
        ]
        assert deleted == ["s-driver-0"]


def test_a_refused_submission_is_submitted_again(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    manifest = spark_app()
    manifest["spec"]["restartPolicy"] = {
        "type": "OnFailure",
        "onSubmissionFailureRetries": 1,
        "onSubmissionFailureRetryInterval": 1,
    }
    refusal = Fault(403, method="POST", plural="pods", namespace=namespace, reason="Forbidden")
    cluster.cluster.faults.append(refusal)
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), manifest)
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="resubmitted")
        submitted = wait_state(cluster, path, "SUBMITTED")["status"]
        assert submitted["submissionAttempts"] == 2 and submitted["executionAttempts"] == 1
        assert "errorMessage" not in submitted["applicationState"]
        # SUBMISSION_FAILED lasts until the interval is over, which under load may already
        # be when the refusal is seen: the status written says what it was.
        (refused,) = [
            s
            for s in statuses_written(cluster, namespace)
            if s["applicationState"]["state"] == "SUBMISSION_FAILED"
        ]
        assert "injected by the test: 403" in refused["applicationState"]["errorMessage"]
        assert refused["submissionAttempts"] == 1 and refused["executionAttempts"] == 0
        # The second submission is an interval (1 s) after the refused one, at the least.
        gap = datetime.fromisoformat(submitted["lastSubmissionAttemptTime"]) - (
            datetime.fromisoformat(refused["lastSubmissionAttemptTime"])
        )
        assert gap >= timedelta(seconds=1), gap
        assert driver_posts(cluster, namespace) == [403, 201]
        assert refusal.hits == 1


def test_a_refused_submission_without_retries_fails(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    refusal = Fault(403, method="POST", plural="pods", namespace=namespace, reason="Forbidden")
    cluster.cluster.faults.append(refusal)
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), spark_app())
        failed = wait_state(cluster, path, "FAILED")
        assert is_true(failed, "Failed")
        assert "injected by the test: 403" in failed["status"]["applicationState"]["errorMessage"]
        assert states_written(cluster, namespace)[-2:] == ["SUBMISSION_FAILED", "FAILED"]
        assert driver_posts(cluster, namespace) == [403]


def test_a_driver_image_that_cannot_be_pulled_fails_the_application(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), spark_app())
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        wait_state(cluster, path, "SUBMITTED")
        cluster.bind(namespace, "s-driver-0")
        entry = container_status(DRIVER, phase="Pending")
        entry["state"] = {
            "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling "spark:4.0.0"'}
        }
        status = {"phase": "Pending", "startTime": now_stamp(), "containerStatuses": [entry]}
        cluster.patch(f"{pods}/s-driver-0/status", {"status": status})
        failed = wait_state(cluster, path, "FAILED")
        assert "ImagePullBackOff" in failed["status"]["applicationState"]["errorMessage"]
        # It would never start: its pod is deleted.
        eventually(lambda: "s-driver-0" not in pod_names(cluster, namespace), what="deleted")


def test_a_driver_briefly_missing_after_submission_is_not_a_failure(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces") as operator:
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), spark_app())
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        wait_state(cluster, path, "SUBMITTED")
        body = cluster.get(f"{pods}/s-driver-0")
        passes = operator.log().count(f"reconciled {namespace}/s at resourceVersion")
        cluster.delete(f"{pods}/s-driver-0", grace=0)
        eventually(lambda: "s-driver-0" not in pod_names(cluster, namespace), what="gone")
        # The operator judged the application with its driver missing ...
        eventually(
            lambda: operator.log().count(f"reconciled {namespace}/s at resourceVersion") > passes,
            what="a pass without the driver",
        )
        assert state(cluster, path) == "SUBMITTED"
        # ... and the driver shows up again (a late watch): the run goes on.
        meta = body["metadata"]
        kept = ("name", "labels", "annotations", "ownerReferences")
        cluster.create(pods, {**body, "metadata": {k: meta[k] for k in kept if k in meta}})
        Kubelet(cluster, namespace).set("s-driver-0", "Running", container=DRIVER)
        wait_state(cluster, path, "RUNNING")
        assert "FAILING" not in states_written(cluster, namespace)


def test_a_suspended_driver_exiting_143_is_not_a_failure(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    cluster.cluster.kubelet_finishes_after = None  # the test ends the Terminating window
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), spark_app())
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        first_uid = cluster.get(f"{pods}/s-driver-0")["metadata"]["uid"]
        kubelet = Kubelet(cluster, namespace)
        kubelet.set("s-driver-0", "Running", container=DRIVER)
        wait_state(cluster, path, "RUNNING")
        cluster.patch(path, {"spec": {"suspend": True}})
        wait_state(cluster, path, "SUSPENDING")
        eventually(
            lambda: cluster.get(f"{pods}/s-driver-0")["metadata"].get("deletionTimestamp"),
            what="the driver stopped",
        )
        # SIGTERM: Spark's driver exits 143 before its pod is gone.
        kubelet.set("s-driver-0", "Failed", container=DRIVER, exit_code=143, reason="Error")
        cluster.finish_terminating(namespace, "s-driver-0")
        suspended = wait_state(cluster, path, "SUSPENDED")
        assert is_true(suspended, "Suspended") and not is_true(suspended, "Failed")

        cluster.patch(path, {"spec": {"suspend": False}})

        def resumed_driver() -> bool:
            pod = cluster.get_or_none(f"{pods}/s-driver-0")
            return pod is not None and pod["metadata"]["uid"] != first_uid

        eventually(resumed_driver, what="the resumed driver")
        wait_state(cluster, path, "SUBMITTED")
        written = states_written(cluster, namespace)
        assert written.index("SUSPENDED") < written.index("RESUMING") < len(written)
        assert "FAILING" not in written and "FAILED" not in written


def test_a_spec_change_re_runs_the_application(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), spark_app())
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        kubelet = Kubelet(cluster, namespace)
        kubelet.set("s-driver-0", "Succeeded", container=DRIVER, exit_code=0)
        completed = wait_state(cluster, path, "COMPLETED")
        assert is_true(completed, "Succeeded")

        cluster.patch(path, {"spec": {"arguments": ["20"]}})

        def rerun_driver() -> bool:
            pod = cluster.get_or_none(f"{pods}/s-driver-0")
            if pod is None:
                return False
            container = next(c for c in pod["spec"]["containers"] if c["name"] == DRIVER)
            return bool(container["args"][-1] == "20")

        eventually(rerun_driver, what="the driver of the new spec")
        rerun = wait_state(cluster, path, "SUBMITTED")
        assert not is_true(rerun, "Succeeded")
        assert rerun["status"]["executionAttempts"] == 1
        written = states_written(cluster, namespace)
        assert written.index("SUCCEEDING") < written.index("COMPLETED")
        assert written.index("COMPLETED") < written.index("INVALIDATING")
        kubelet.set("s-driver-0", "Succeeded", container=DRIVER, exit_code=0)
        assert is_true(wait_state(cluster, path, "COMPLETED"), "Succeeded")


def test_always_re_runs_a_completed_run(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    manifest = spark_app()
    manifest["spec"]["restartPolicy"] = {"type": "Always", "onFailureRetryInterval": 1}
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("SparkApplication", namespace, "s")
        cluster.create(job_path("SparkApplication", namespace), manifest)
        eventually(lambda: "s-driver-0" in pod_names(cluster, namespace), what="the driver")
        first_uid = cluster.get(f"{pods}/s-driver-0")["metadata"]["uid"]
        Kubelet(cluster, namespace).set("s-driver-0", "Succeeded", container=DRIVER, exit_code=0)

        def next_run() -> bool:
            pod = cluster.get_or_none(f"{pods}/s-driver-0")
            return pod is not None and pod["metadata"]["uid"] != first_uid

        eventually(next_run, what="the next run's driver")
        again = wait_state(cluster, path, "SUBMITTED")
        assert again["status"]["executionAttempts"] == 2
        assert not is_true(again, "Succeeded")
        written = states_written(cluster, namespace)
        assert "COMPLETED" not in written
        assert written.index("SUCCEEDING") < written.index("PENDING_RERUN")
