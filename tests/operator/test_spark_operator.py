"""The real operator runs a SparkApplication against the strict test API server (the kubelet
and Spark's driver emulated).

The operator creates the driver's configuration, account, services, NetworkPolicy and pod;
the driver ("the test") creates an executor pod owned by the driver pod, labelled as Spark labels it
(with ``spark.kubernetes.executor.label.*`` from spark.properties); the executor is counted
in ``replicaStatuses.Executor`` and ``executorState`` and never deleted; and the driver
decides: SUBMITTED, RUNNING, then COMPLETED or FAILED with its error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_support import (
    Cluster,
    Kubelet,
    eventually,
    is_true,
    job_path,
    running_cluster,
    running_operator,
)

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


def test_the_driver_creates_executors_and_decides(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces"):
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
        # The core's verdict, which names the driver and its exit.
        message = failed["status"]["applicationState"]["errorMessage"]
        assert message == next(
            c["message"] for c in failed["status"]["conditions"] if c["type"] == "Failed"
        )
        assert "Driver" in message and "exited with code 1" in message


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
        failed = eventually(
            lambda: (job := cluster.get(path)) and state_of(job) == "FAILED" and job,
            what="FAILED",
        )
        assert "kubemill.dev/restarts" not in failed["metadata"].get("annotations", {})
        eventually(lambda: cluster.get_or_none(path) is None, what="deleted by its TTL")
        deletes = [
            c for c in cluster.calls() if c.method == "DELETE" and c.name == "s" and c.status < 300
        ]
        assert [c.body.get("preconditions") for c in deletes] == [
            {"uid": created["metadata"]["uid"]}
        ]
