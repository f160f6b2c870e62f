"""The Spark and Mars cluster paths against the real control plane: the seed's
SparkApplication through the operator (in the spark-operator's own group), and the seed's
Mars API, ``kubemill.deploy.kubernetes.new_cluster(api_client, ...)``, with the real
Deployment, ReplicaSet, namespace controllers and the real NodePort allocator."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from kubemill.deploy.kubernetes import KubernetesClusterClient, new_cluster
from support.control_plane import ControlPlane, absent
from support.node import NodeStandIn
from support.real_operator import RealOperator, delete_schedule
from support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0
"""Upper bound on the operator and the controllers acting: a hang guard."""


def test_the_seeds_spark_application_completes_through_the_real_server(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator
) -> None:
    namespace = control_plane.new_namespace()
    manifest: dict[str, Any] = yaml.safe_load(
        (ROOT / "examples" / "seed" / "sparkapplication-v1beta2.yaml").read_text()
    )
    manifest["metadata"]["namespace"] = namespace
    # The seed names a ServiceAccount `spark`: on a real cluster the user creates it first,
    # and the ServiceAccount admission plugin refuses the driver pod without it.
    control_plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "spark"}}
    )
    base = f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/{namespace}/sparkapplications"
    control_plane.request("POST", base, manifest)

    def state() -> str:
        status = control_plane.request("GET", f"{base}/spark-pi").get("status", {})
        return str(status.get("applicationState", {}).get("state", ""))

    def driver() -> dict[str, Any] | None:
        listing = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        drivers = [p for p in listing if p["metadata"]["name"].startswith("spark-pi-driver")]
        return (
            drivers[0]
            if drivers and node.running(namespace, drivers[0]["metadata"]["name"])
            else None
        )

    pod = eventually(driver, timeout=WAIT, what="the driver pod running")
    assert pod["spec"]["serviceAccountName"] == "spark"
    assert pod["spec"]["nodeName"] == control_plane.node
    eventually(lambda: state() == "RUNNING", timeout=WAIT, what="RUNNING")
    node.finish(namespace, pod["metadata"]["name"], 0)
    eventually(lambda: state() == "COMPLETED", timeout=WAIT, what="COMPLETED")
    # Its ServiceAccount, Role and RoleBinding were created in an order the server accepts.
    assert not operator.failed_creates(namespace)


def test_the_seeds_mars_api_makes_its_namespace_and_stop_finalizes_it(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    api_client = config.new_client_from_config(config_file=str(control_plane.admin_kubeconfig))
    cluster = new_cluster(
        api_client,
        image="kubemill-mars:test",
        timeout=WAIT,
        supervisor_num=1,
        worker_num=2,
        worker_cpu=1,
        worker_mem="1g",
        min_worker_num=2,
    )
    namespace = cluster.namespace
    try:
        role = control_plane.request(
            "GET", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles"
        )["items"][0]
        assert {"get", "list", "watch"} <= set(role["rules"][0]["verbs"])
        assert "pods" in role["rules"][0]["resources"]
        deployments = control_plane.request(
            "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments"
        )
        assert len(deployments["items"]) == 2
        pods = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        assert len(pods) == 3
        # Pods from the real ReplicaSets, bound by the real scheduler.
        assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in pods)
        services = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services")["items"]
        node_ports = [
            port["nodePort"]
            for service in services
            if service["spec"]["type"] == "NodePort"
            for port in service["spec"]["ports"]
        ]
        assert len(node_ports) == 1 and 30000 <= node_ports[0] <= 32767
        assert cluster.endpoint == f"http://127.0.0.1:{node_ports[0]}"
        again = KubernetesClusterClient(api_client, namespace, cluster.endpoint)
        assert again.endpoint == cluster.endpoint
    finally:
        cluster.stop()
    eventually(
        lambda: absent(control_plane, f"/api/v1/namespaces/{namespace}"),
        timeout=90,
        what=f"{namespace} finalized by the namespace controller",
    )


SCHEDULE = """
apiVersion: sparkoperator.k8s.io/v1beta2
kind: ScheduledSparkApplication
metadata: {name: tick}
spec:
  schedule: "@every 2s"
  concurrencyPolicy: Forbid
  template:
    type: Python
    mode: cluster
    image: example/spark:4
    mainApplicationFile: local:///opt/pi.py
    sparkVersion: 4.0.1
    restartPolicy: {type: Never}
    driver: {cores: 1, memory: 512m}
    executor: {instances: 1, cores: 1, memory: 512m}
"""


@pytest.mark.usefixtures("operator")
def test_a_scheduled_spark_application_runs_one_application_at_a_time(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    control_plane.kubectl(
        "apply", "--server-side", "--validate=strict", "-n", namespace, "-f", "-", stdin=SCHEDULE
    )
    group = f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/{namespace}"

    def runs() -> list[dict[str, Any]]:
        return control_plane.request("GET", f"{group}/sparkapplications")["items"]  # type: ignore[no-any-return]

    first = eventually(lambda: runs(), timeout=WAIT, what="a first run")[0]
    owner = first["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("ScheduledSparkApplication", "tick")
    name = first["metadata"]["name"]
    eventually(
        lambda: (
            control_plane.request("GET", f"{group}/scheduledsparkapplications/tick")
            .get("status", {})
            .get("lastRunName")
            == name
        ),
        timeout=WAIT,
        what="the schedule's lastRunName",
    )
    driver = eventually(
        lambda: node.running(namespace, f"{name}-driver-0") and f"{name}-driver-0",
        timeout=WAIT,
        what="the first run's driver running",
    )
    # Forbid: while the first run runs, no second one starts, though two more are due.
    time.sleep(5)
    assert len(runs()) == 1, [r["metadata"]["name"] for r in runs()]
    node.finish(namespace, driver, 0)
    eventually(lambda: len(runs()) >= 2, timeout=WAIT, what="a second run after the first ended")
    delete_schedule(control_plane, f"{group}/scheduledsparkapplications/tick")
    # Its runs are owned by it: the real garbage collector takes them.
    eventually(lambda: not runs(), timeout=WAIT, what="the runs collected with their schedule")


def test_a_mars_cluster_of_the_operator_is_ready_once_the_real_controllers_run_its_pods(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator
) -> None:
    namespace = control_plane.new_namespace()
    manifest = yaml.safe_load((ROOT / "examples" / "mars-cluster.yaml").read_text())
    path = f"/apis/kubemill.dev/v1/namespaces/{namespace}/marsclusters"
    control_plane.request("POST", path, manifest)

    def ready() -> dict[str, Any] | None:
        job = control_plane.request("GET", f"{path}/mars-demo")
        conditions = job.get("status", {}).get("conditions", [])
        done = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        return job if done else None

    # The Deployments become ReplicaSets and pods (the real controllers), the scheduler
    # binds them, the node runs them ready; the NodePort is the real server's allocation.
    job = eventually(ready, timeout=WAIT, what="the MarsCluster Ready")
    services = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services")["items"]
    node_ports = [
        port["nodePort"]
        for service in services
        if service["spec"]["type"] == "NodePort"
        for port in service["spec"]["ports"]
    ]
    assert job["status"]["endpoint"] == f"http://127.0.0.1:{node_ports[0]}"
    assert job["status"]["readyReplicas"] == {"Supervisor": 1, "Worker": 2}
    pods = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"ReplicaSet"}
    assert not operator.failed_creates(namespace)  # its Role before its RoleBinding
    control_plane.request("DELETE", f"{path}/mars-demo")
    # Owned by the MarsCluster: the garbage collector takes the Deployments and their pods.
    eventually(
        lambda: not control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"],
        timeout=WAIT,
        what="its pods collected",
    )
