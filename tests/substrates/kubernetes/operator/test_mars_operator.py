"""The real operator reconciles a MarsCluster against the strict test API server.

The operator creates the cluster's Role, RoleBinding, supervisor and worker Deployments and
NodePort Service in the MarsCluster's namespace, owned by it -- the same objects
``kubemill.deploy.kubernetes.new_cluster`` creates, from the same builders. The test plays
the Deployment controller (pods from the templates), the kubelet (Running, ready, a node's
IP) and the node-port allocator; the core's verdict comes back as ``Ready`` with the
endpoint, never ``Succeeded``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubemill.engines.mars.api import MarsClusterSpec
from kubemill.engines.mars.framework import (
    LABEL_MARS_ROLE,
    build_role,
    build_role_binding,
    build_supervisors,
    build_web_service,
    build_workers,
)
from support.operator_support import (
    Cluster,
    condition,
    is_true,
    job_path,
    replica_set,
    running_operator,
    start_pod,
)
from support.waiting import eventually

HOST_IP = "10.1.0.7"
NODE_PORT = 30104
SPEC = {"workerNum": 3, "workerCpu": 1, "workerMem": "1g", "minWorkerNum": 2}


def mars_cluster(name: str = "m") -> dict[str, Any]:
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "MarsCluster",
        "metadata": {"name": name},
        "spec": dict(SPEC),
    }


def report(cluster: Cluster, namespace: str, pod: str, *, ready: bool) -> None:
    status = {
        "phase": "Running",
        "hostIP": HOST_IP,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {
                "name": "mars",
                "ready": ready,
                "restartCount": 0,
                "image": "marsproject/mars",
                "imageID": "",
                "state": {"running": {}},
            }
        ],
    }
    cluster.patch(f"/api/v1/namespaces/{namespace}/pods/{pod}/status", {"status": status})


def test_the_operator_makes_a_mars_cluster_and_reports_it_ready(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = cluster.namespace()
    apps = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    services = f"/api/v1/namespaces/{namespace}/services"
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("MarsCluster", namespace, "m")
        created = cluster.create(job_path("MarsCluster", namespace), mars_cluster())
        uid = created["metadata"]["uid"]
        eventually(lambda: len(cluster.list(apps)) == 2, what="the two Deployments")
        eventually(lambda: cluster.get_or_none(f"{services}/m-web") is not None, what="the web")
        not_ready = eventually(
            lambda: (job := cluster.get(path)) and condition(job, "Ready") and job,
            what="Ready False",
        )
        assert condition(not_ready, "Ready")["status"] == "False"
        assert "0 of 1 Supervisor" in condition(not_ready, "Ready")["message"]

        # The same objects as new_cluster's, in this namespace, owned by the MarsCluster.
        spec = MarsClusterSpec.model_validate(SPEC)
        expected = {
            ("Role", "m-pod-reader"): build_role("m", namespace),
            ("RoleBinding", "m-pod-reader"): build_role_binding("m", namespace),
            ("Deployment", "m-supervisor"): build_supervisors("m", namespace, spec),
            ("Deployment", "m-worker"): build_workers("m", namespace, spec),
            ("Service", "m-web"): build_web_service("m", namespace),
        }
        stored = {
            ("Role", "m-pod-reader"): cluster.get(f"{rbac}/roles/m-pod-reader"),
            ("RoleBinding", "m-pod-reader"): cluster.get(f"{rbac}/rolebindings/m-pod-reader"),
            ("Deployment", "m-supervisor"): cluster.get(f"{apps}/m-supervisor"),
            ("Deployment", "m-worker"): cluster.get(f"{apps}/m-worker"),
            ("Service", "m-web"): cluster.get(f"{services}/m-web"),
        }
        # What the API server allocated on create is no part of what the operator built.
        web_spec = stored["Service", "m-web"]["spec"]
        assert web_spec.pop("clusterIPs") == [web_spec.pop("clusterIP")]
        for key, body in stored.items():
            owners = body["metadata"]["ownerReferences"]
            assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("MarsCluster", "m", uid)]
            for part in ("spec", "rules", "subjects", "roleRef"):
                if part in expected[key]:
                    assert body[part] == expected[key][part], (key, part)
            assert expected[key]["metadata"]["labels"].items() <= body["metadata"]["labels"].items()

        # The controllers and the kubelet: a supervisor and two of three workers ready.
        supervisor = stored["Deployment", "m-supervisor"]
        worker = stored["Deployment", "m-worker"]
        assert supervisor["spec"]["template"]["metadata"]["labels"][LABEL_MARS_ROLE] == "supervisor"
        supervisors = replica_set(cluster, namespace, supervisor)
        workers = replica_set(cluster, namespace, worker)
        report(cluster, namespace, start_pod(cluster, namespace, supervisors, 0), ready=True)
        for index in range(3):
            report(
                cluster, namespace, start_pod(cluster, namespace, workers, index), ready=index < 2
            )
        waiting = eventually(
            lambda: (
                (job := cluster.get(path))
                and "node port" in (condition(job, "Ready") or {}).get("message", "")
                and job
            ),
            what="waiting for the node port",
        )
        assert not is_true(waiting, "Ready")
        web = cluster.get(f"{services}/m-web")
        web["spec"]["ports"][0]["nodePort"] = NODE_PORT  # the API server's allocator
        cluster.patch(f"{services}/m-web", {"spec": {"ports": web["spec"]["ports"]}})

        ready = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Ready") and job, what="Ready"
        )
        assert ready["status"]["endpoint"] == f"http://{HOST_IP}:{NODE_PORT}"
        assert ready["status"]["readyReplicas"] == {"Supervisor": 1, "Worker": 2}
        assert ready["status"]["replicaStatuses"]["Worker"]["active"] == 3
        assert not is_true(ready, "Succeeded")
        # Created once: no second create of any object.
        creates = sorted(
            c.resource
            for c in cluster.operator_calls(namespace=namespace)
            if c.method == "POST" and c.resource in ("deployments", "roles", "rolebindings")
        )
        assert creates == ["deployments", "deployments", "rolebindings", "roles"]

        # More workers: the workers' Deployment is rewritten, nothing else is.
        cluster.patch(path, {"spec": {"workerNum": 5}})
        eventually(lambda: cluster.get(f"{apps}/m-worker")["spec"]["replicas"] == 5, what="scaled")
        bigger = MarsClusterSpec.model_validate({**SPEC, "workerNum": 5})
        assert (
            cluster.get(f"{apps}/m-worker")["spec"] == build_workers("m", namespace, bigger)["spec"]
        )
        updates = [
            c.resource
            for c in cluster.operator_calls(namespace=namespace)
            if c.method == "PUT" and c.status < 300
        ]
        assert updates == ["deployments"]
        assert is_true(cluster.get(path), "Ready")  # still 2 of the needed 2 workers

        # `kubemill interrupt`: Failed, Interrupted; the Deployments keep no pods.
        cluster.patch(path, {"metadata": {"annotations": {"kubemill.dev/stop": "tests"}}})
        stopped = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Failed") and job, what="Failed"
        )
        assert condition(stopped, "Failed")["reason"] == "Interrupted"
        assert not is_true(stopped, "Ready") and "endpoint" not in stopped["status"]
        eventually(
            lambda: [d["spec"]["replicas"] for d in cluster.list(apps)] == [0, 0],
            what="scaled to 0",
        )
