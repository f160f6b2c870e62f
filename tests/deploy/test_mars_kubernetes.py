"""``kubemill.deploy.kubernetes.new_cluster`` against the strict kmock cluster.

No operator runs here: ``new_cluster`` creates the objects itself. The cluster emulates no
controllers, so :class:`Controllers` plays them from a thread: the Deployment controller
(pods from each Deployment's template), the scheduler and the kubelet (a node, a host IP,
Ready for as many pods per role as the test allows), the node-port allocator, and the
namespace controller (a deleted namespace's objects go, then the namespace).
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config
from rich.console import Console

from kubemill.deploy.client import ClusterError
from kubemill.deploy.kubernetes import KubernetesClusterClient, new_cluster
from kubemill.engines.mars.framework import (
    ENV_CACHE_MEM_SIZE,
    ENV_CPU_TOTAL,
    ENV_MEMORY_TOTAL,
    ENV_POD_IP,
    ENV_POD_NAME,
    ENV_POD_NAMESPACE,
    ENV_SPILL_DIRS,
    ENV_SUPERVISOR_SERVICE,
    LABEL_MARS_ROLE,
    READINESS_COMMAND,
)
from support import kube_client_support
from support.kube_client_support import kmock_cluster

NODE_PORT = 31234
HOST_IPS = {"supervisor": "10.1.0.7", "worker": "10.1.0.8"}
RESOURCES = (
    ("api/v1", "pods"),
    ("api/v1", "services"),
    ("apis/apps/v1", "deployments"),
    ("apis/rbac.authorization.k8s.io/v1", "roles"),
    ("apis/rbac.authorization.k8s.io/v1", "rolebindings"),
)


class Controllers:
    """The controllers and kubelet a real cluster has, for namespaces named ``mars-*``."""

    def __init__(self, cluster: kube_client_support.ClientClusterThread) -> None:
        self.cluster = cluster
        self.ready = {"supervisor": 1 << 30, "worker": 1 << 30}
        """How many pods of each role the kubelet lets become ready."""
        self.failing: str | None = None
        """A role whose pods crash (CrashLoopBackOff)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.errors: list[BaseException] = []

    def __enter__(self) -> Controllers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self.errors, self.errors

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._pass()
            except kmock_cluster.ApiError as exc:
                if exc.status not in (404, 409):  # raced with a delete or our own create
                    self.errors.append(exc)
            except BaseException as exc:  # reported in __exit__
                self.errors.append(exc)
                return
            time.sleep(0.05)

    def _pass(self) -> None:
        for ns in self.cluster.list("/api/v1/namespaces"):
            name = ns["metadata"]["name"]
            if not name.startswith("mars-"):
                continue
            if ns["metadata"].get("deletionTimestamp"):
                self._empty(name)
                continue
            for deployment in self.cluster.list(f"/apis/apps/v1/namespaces/{name}/deployments"):
                self._deploy(name, deployment)
            for service in self.cluster.list(f"/api/v1/namespaces/{name}/services"):
                ports = service["spec"]["ports"]
                if service["spec"].get("type") == "NodePort" and "nodePort" not in ports[0]:
                    ports[0]["nodePort"] = NODE_PORT
                    self.cluster.patch(
                        f"/api/v1/namespaces/{name}/services/{service['metadata']['name']}",
                        {"spec": {"ports": ports}},
                    )

    def _deploy(self, namespace: str, deployment: dict[str, Any]) -> None:
        name = deployment["metadata"]["name"]
        template = deployment["spec"]["template"]
        role = template["metadata"]["labels"][LABEL_MARS_ROLE]
        for index in range(deployment["spec"]["replicas"]):
            pod_name = f"{name}-{index}"
            path = f"/api/v1/namespaces/{namespace}/pods/{pod_name}"
            pod = self.cluster.get_or_none(path)
            if pod is None:
                body = {"metadata": {**template["metadata"], "name": pod_name}}
                body["spec"] = template["spec"]
                pod = self.cluster.create(f"/api/v1/namespaces/{namespace}/pods", body)
            if pod.get("status", {}).get("containerStatuses"):
                continue
            self.cluster.bind(namespace, pod_name)
            ready = index < self.ready[role]
            state: dict[str, Any] = {"running": {"startedAt": kmock_cluster._now()}}
            restarts = 0
            if self.failing == role:
                ready, restarts = False, 3
                book = kube_client_support.LogBook("mars")
                book.write("starting the Mars worker", "RuntimeError: no supervisor found")
                self.cluster.cluster.logs[(namespace, pod_name)] = book
                state = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}
            status = {
                "phase": "Running",
                "hostIP": HOST_IPS[role],
                "podIP": f"10.2.0.{index + 1}",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "containerStatuses": [
                    {
                        "name": "mars",
                        "ready": ready,
                        "restartCount": restarts,
                        "image": "marsproject/mars",
                        "imageID": "",
                        "state": state,
                    }
                ],
            }
            self.cluster.patch(f"{path}/status", {"status": status})

    def _empty(self, namespace: str) -> None:
        for prefix, plural in RESOURCES:
            for obj in self.cluster.list(f"/{prefix}/namespaces/{namespace}/{plural}"):
                self.cluster.delete(
                    f"/{prefix}/namespaces/{namespace}/{plural}/{obj['metadata']['name']}",
                    grace=0,
                )
        self.cluster.delete(f"/api/v1/namespaces/{namespace}")


@pytest.fixture
def served() -> Iterator[kube_client_support.ClientClusterThread]:
    with kube_client_support.ClientClusterThread() as thread:  # serves pod logs too
        yield thread


@pytest.fixture
def api_client(served: kmock_cluster.ClusterThread, tmp_path: Path) -> Any:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", served.url)
    return config.new_client_from_config(config_file=str(kubeconfig))


@pytest.fixture
def controllers(served: kmock_cluster.ClusterThread) -> Iterator[Controllers]:
    with Controllers(served) as running:
        yield running


def _quiet() -> Console:
    return Console(file=io.StringIO(), width=120)


def _mars_namespaces(served: kmock_cluster.ClusterThread) -> list[str]:
    return [
        ns["metadata"]["name"]
        for ns in served.list("/api/v1/namespaces")
        if ns["metadata"]["name"].startswith("mars-")
    ]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_new_cluster_creates_the_objects_and_returns_once_enough_are_ready(
    served: kmock_cluster.ClusterThread, api_client: Any, controllers: Controllers
) -> None:
    controllers.ready["worker"] = 2  # of 3: min_worker_num is met, not worker_num
    output = io.StringIO()
    cluster = new_cluster(
        api_client,
        worker_num=3,
        worker_cpu=1,
        worker_mem="1g",
        min_worker_num=2,
        worker_cache_mem="25%",
        worker_spill_paths=["/data/spill"],
        timeout=60,
        poll_interval=0.05,
        console=Console(file=output, width=120),
    )
    ns = cluster.namespace
    assert ns.startswith("mars-")
    assert cluster.endpoint == f"http://{HOST_IPS['supervisor']}:{NODE_PORT}"
    assert "workers" in output.getvalue() and "supervisors" in output.getvalue()

    assert served.get(f"/api/v1/namespaces/{ns}")["metadata"]["name"] == ns
    (role,) = served.list(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    (binding,) = served.list(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]

    deployments = {
        d["spec"]["template"]["metadata"]["labels"][LABEL_MARS_ROLE]: d
        for d in served.list(f"/apis/apps/v1/namespaces/{ns}/deployments")
    }
    assert set(deployments) == {"supervisor", "worker"}
    assert deployments["supervisor"]["spec"]["replicas"] == 1
    assert deployments["worker"]["spec"]["replicas"] == 3
    supervisor = deployments["supervisor"]["spec"]["template"]["spec"]["containers"][0]
    worker_pod = deployments["worker"]["spec"]["template"]["spec"]
    worker = worker_pod["containers"][0]
    assert supervisor["command"][-1] == "supervisor" and worker["command"][-1] == "worker"
    assert supervisor["resources"]["limits"] == {"cpu": "1", "memory": str(4 << 30)}
    assert worker["resources"]["limits"] == {"cpu": "1", "memory": str(1 << 30)}
    assert worker["readinessProbe"]["exec"]["command"] == list(READINESS_COMMAND)
    env = _env(worker)
    assert env[ENV_POD_NAME] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env[ENV_POD_NAMESPACE] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env[ENV_POD_IP] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env[ENV_CPU_TOTAL] == "1" and env[ENV_MEMORY_TOTAL] == str(1 << 30)
    assert env[ENV_CACHE_MEM_SIZE] == str((1 << 30) // 4)
    assert env[ENV_SUPERVISOR_SERVICE]
    volumes = {v["name"]: v for v in worker_pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": str((1 << 30) // 4)}
    assert mounts["shm"] == "/dev/shm"
    spill = [v for v in worker_pod["volumes"] if "hostPath" in v]
    assert [v["hostPath"]["path"] for v in spill] == ["/data/spill"]
    assert env[ENV_SPILL_DIRS] == mounts[spill[0]["name"]]

    (service,) = served.list(f"/api/v1/namespaces/{ns}/services")
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["selector"][LABEL_MARS_ROLE] == "supervisor"
    assert service["metadata"]["name"] == env[ENV_SUPERVISOR_SERVICE]

    cluster.stop(timeout=30)
    assert served.get_or_none(f"/api/v1/namespaces/{ns}") is None


def test_too_few_ready_workers_time_out_and_delete_the_namespace(
    served: kmock_cluster.ClusterThread, api_client: Any, controllers: Controllers
) -> None:
    controllers.ready["worker"] = 1
    with pytest.raises(ClusterError) as caught:
        new_cluster(
            api_client,
            worker_num=3,
            worker_cpu=1,
            worker_mem="1g",
            min_worker_num=2,
            timeout=1.5,
            poll_interval=0.05,
            console=_quiet(),
        )
    message = str(caught.value)
    assert "not ready within 1.5 s" in message
    assert "1 of 2 worker(s) needed ready" in message
    assert "mars-worker-1" in message and "mars-worker-2" in message  # the pods still waiting
    assert "was deleted" in message
    deadline = time.monotonic() + 30
    while _mars_namespaces(served) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _mars_namespaces(served) == []


def test_a_crashing_pod_fails_at_once_and_the_namespace_can_be_kept(
    served: kmock_cluster.ClusterThread, api_client: Any, controllers: Controllers
) -> None:
    controllers.failing = "worker"
    with pytest.raises(ClusterError) as caught:
        new_cluster(
            api_client,
            worker_cpu=1,
            worker_mem="1g",
            namespace="mars-kept",
            keep_on_failure=True,
            poll_interval=0.05,
            console=_quiet(),
        )
    message = str(caught.value)
    assert "cannot start: mars-worker-0 (mars: CrashLoopBackOff)" in message
    log = "starting the Mars worker\n    RuntimeError: no supervisor found"
    assert f"mars-worker-0, last log lines:\n    {log}" in message
    assert "is kept" in message
    assert served.get_or_none("/api/v1/namespaces/mars-kept") is not None
    KubernetesClusterClient(api_client, "mars-kept", "").stop(timeout=30)
    assert served.get_or_none("/api/v1/namespaces/mars-kept") is None


def test_reattach_and_stop(
    served: kmock_cluster.ClusterThread, api_client: Any, controllers: Controllers
) -> None:
    cluster = new_cluster(
        api_client, worker_cpu=0.5, worker_mem=1 << 30, poll_interval=0.05, console=_quiet()
    )
    again = KubernetesClusterClient(api_client, cluster.namespace, cluster.endpoint)
    assert (again.namespace, again.endpoint) == (cluster.namespace, cluster.endpoint)
    again.stop(timeout=30)
    assert served.get_or_none(f"/api/v1/namespaces/{cluster.namespace}") is None
    cluster.stop(timeout=5)  # already gone: nothing to do, no error


def test_an_existing_namespace_is_refused(
    served: kmock_cluster.ClusterThread, api_client: Any
) -> None:
    served.create_namespaces("mars-taken")
    with pytest.raises(ClusterError, match="namespace mars-taken exists already"):
        new_cluster(api_client, worker_cpu=1, worker_mem="1g", namespace="mars-taken")
    assert served.list("/apis/apps/v1/namespaces/mars-taken/deployments") == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"worker_mem": "1g"}, "worker_cpu: is required"),
        ({"worker_cpu": 1}, "worker_mem: is required"),
        ({"worker_cpu": 1, "worker_mem": "lots"}, "worker_mem: Value error, 'lots' is not a size"),
        (
            {"worker_cpu": 1, "worker_mem": "1g", "worker_cache_mem": "2g"},
            "worker_cache_mem: '2g' is more than workerMem",
        ),
        (
            {"worker_cpu": 1, "worker_mem": "1g", "min_worker_num": 2},
            "min_worker_num: 2 is more than workerNum (1)",
        ),
        (
            {"worker_cpu": 1, "worker_mem": "1g", "worker_spill_paths": ["data"]},
            "worker_spill_paths: Value error, 'data' is not an absolute path",
        ),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_created(
    served: kmock_cluster.ClusterThread, api_client: Any, arguments: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ClusterError) as caught:
        new_cluster(api_client, **arguments)
    assert expected in str(caught.value)
    assert _mars_namespaces(served) == []
