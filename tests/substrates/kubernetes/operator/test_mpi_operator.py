"""The real operator runs MPIJobs against the strict test API server (the kubelet emulated).

Workers come first, and under ``WaitForWorkersReady`` the launcher only once every worker
is Ready; ``discover_hosts.sh`` follows the running workers; exec mode's launcher Role
names exactly the job's worker pods; ssh mode's key Secret is of type ssh-auth; and the
launcher decides the outcome, while a worker that fails for good fails the job by name.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.substrates.kubernetes.operator.reconciler import RESTARTS_ANNOTATION
from support.operator_jobs import mpijob
from support.operator_support import (
    Cluster,
    Kubelet,
    condition,
    is_true,
    job_path,
    running_cluster,
    running_operator,
)
from support.waiting import eventually


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as served:
        yield served


def pod_names(cluster: Cluster, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def set_running(cluster: Cluster, namespace: str, pod: str, *, ready: bool) -> None:
    Kubelet(cluster, namespace).set(pod, "Running", container="worker", ready=ready)


def all_running(cluster: Cluster, namespace: str) -> Kubelet:
    """Workers of job ``m`` up, then its launcher: every pod Running (and Ready)."""
    eventually(
        lambda: pod_names(cluster, namespace) == {"m-worker-0", "m-worker-1"}, what="workers"
    )
    kubelet = Kubelet(cluster, namespace)
    for pod in ("m-worker-0", "m-worker-1"):
        kubelet.set(pod, "Running", container="worker")
    eventually(lambda: "m-launcher-0" in pod_names(cluster, namespace), what="the launcher")
    kubelet.set("m-launcher-0", "Running", container="launcher")
    return kubelet


def discover_hosts(cluster: Cluster, namespace: str) -> str:
    config = cluster.get(f"/api/v1/namespaces/{namespace}/configmaps/m-config")
    script: str = config["data"]["discover_hosts.sh"]
    return script


def test_the_launcher_waits_for_every_worker_to_be_ready(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("MPIJob", namespace, "m")
        cluster.create(
            job_path("MPIJob", namespace), mpijob(launcherCreationPolicy="WaitForWorkersReady")
        )
        eventually(
            lambda: pod_names(cluster, namespace) == {"m-worker-0", "m-worker-1"}, what="workers"
        )
        set_running(cluster, namespace, "m-worker-0", ready=True)
        set_running(cluster, namespace, "m-worker-1", ready=False)
        # Both running, as the operator counted them: it has seen the not-ready worker.
        eventually(
            lambda: cluster.get(path)["status"]["replicaStatuses"]["Worker"]["active"] == 2,
            what="two active workers",
        )
        launcher_creates = [
            c
            for c in cluster.calls()
            if c.method == "POST" and c.resource == "pods" and "launcher" in str(c.body)
        ]
        assert launcher_creates == []
        assert "m-launcher-0" not in pod_names(cluster, namespace)

        set_running(cluster, namespace, "m-worker-1", ready=True)
        eventually(lambda: "m-launcher-0" in pod_names(cluster, namespace), what="the launcher")


def test_workers_first_then_the_launcher_which_decides(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("MPIJob", namespace, "m")
        cluster.create(job_path("MPIJob", namespace), mpijob())
        eventually(
            lambda: pod_names(cluster, namespace) == {"m-worker-0", "m-worker-1"}, what="workers"
        )
        assert discover_hosts(cluster, namespace) == "#!/bin/sh\n"

        # discover_hosts.sh follows the running workers, rewritten in place.
        set_running(cluster, namespace, "m-worker-0", ready=False)
        eventually(
            lambda: (
                discover_hosts(cluster, namespace)
                == f"#!/bin/sh\necho m-worker-0.m.{namespace}.svc:2\n"
            ),
            what="worker 0 listed",
        )
        assert "m-launcher-0" not in pod_names(cluster, namespace)  # AtStartup: once all run
        set_running(cluster, namespace, "m-worker-1", ready=False)
        eventually(
            lambda: (
                discover_hosts(cluster, namespace) == "#!/bin/sh\n"
                f"echo m-worker-0.m.{namespace}.svc:2\n"
                f"echo m-worker-1.m.{namespace}.svc:2\n"
            ),
            what="both workers listed",
        )
        eventually(lambda: "m-launcher-0" in pod_names(cluster, namespace), what="the launcher")

        config = cluster.get(f"/api/v1/namespaces/{namespace}/configmaps/m-config")["data"]
        assert config["hostfile"] == (
            f"m-worker-0.m.{namespace}.svc slots=2\nm-worker-1.m.{namespace}.svc slots=2\n"
        )
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        role = cluster.get(f"{rbac}/roles/m-launcher")
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {
                "apiGroups": [""],
                "resources": ["pods/exec"],
                "verbs": ["get", "create"],
                "resourceNames": ["m-worker-0", "m-worker-1"],
            },
        ]
        launcher = cluster.get(f"/api/v1/namespaces/{namespace}/pods/m-launcher-0")
        assert launcher["spec"]["serviceAccountName"] == "m-launcher"
        service = cluster.get(f"/api/v1/namespaces/{namespace}/services/m")
        assert service["spec"]["clusterIP"] == "None"

        kubelet = Kubelet(cluster, namespace)
        kubelet.set("m-launcher-0", "Running", container="launcher")
        kubelet.set("m-launcher-0", "Succeeded", container="launcher", exit_code=0)
        done = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Succeeded") and job,
            what="Succeeded",
        )
        assert not is_true(done, "Failed")


def test_a_worker_failing_for_good_fails_the_job_by_name(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("MPIJob", namespace, "m")
        cluster.create(job_path("MPIJob", namespace), mpijob())
        kubelet = all_running(cluster, namespace)
        # Evicted: the kubelet fails the pod with reason Evicted; Workers restart Never.
        kubelet.set("m-worker-1", "Failed", container="worker", exit_code=137, reason="Evicted")
        failed = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Failed") and job, what="Failed"
        )
        message = (condition(failed, "Failed") or {}).get("message", "")
        assert "Worker replica(s) failed: worker-1 exited with code 137 (Evicted)" in message


def test_ssh_mode_mounts_a_generated_key_pair(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces") as operator:
        job = mpijob(remoteShell="ssh", sshAuthMountPath="/home/mpi/.ssh")
        cluster.create(job_path("MPIJob", namespace), job)
        secret = eventually(
            lambda: cluster.get_or_none(f"/api/v1/namespaces/{namespace}/secrets/m-ssh"),
            what="the key Secret",
        )
        assert secret["type"] == "kubernetes.io/ssh-auth"
        assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}
        private = base64.b64decode(secret["data"]["ssh-privatekey"]).decode()
        assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
        eventually(
            lambda: pod_names(cluster, namespace) == {"m-worker-0", "m-worker-1"}, what="workers"
        )
        worker = cluster.get(f"/api/v1/namespaces/{namespace}/pods/m-worker-0")
        assert "command" not in worker["spec"]["containers"][0]  # the image's sshd
        assert worker["spec"]["hostname"] == "m-worker-0"
        assert worker["spec"]["subdomain"] == "m"
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        assert cluster.get_or_none(f"{rbac}/roles/m-launcher") is None
        # The operator logs at DEBUG here, and still never the key.
        log = operator.log()
        key_body = private.splitlines()[1]
        assert key_body not in log and secret["data"]["ssh-privatekey"] not in log


def test_switching_the_remote_shell_swaps_the_launchers_role_for_keys(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = cluster.namespace()
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    secret = f"/api/v1/namespaces/{namespace}/secrets/m-ssh"
    access = [
        f"{rbac}/roles/m-launcher",
        f"{rbac}/rolebindings/m-launcher",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/m-launcher",
    ]
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("MPIJob", namespace, "m")
        cluster.create(job_path("MPIJob", namespace), mpijob())
        eventually(lambda: all(cluster.get_or_none(p) for p in access), what="exec access")

        shell = "kubemill.dev/remote-shell"
        cluster.patch(path, {"metadata": {"annotations": {shell: "ssh"}}})
        eventually(lambda: cluster.get_or_none(secret), what="the key Secret")
        eventually(lambda: not any(cluster.get_or_none(p) for p in access), what="access gone")

        cluster.patch(path, {"metadata": {"annotations": {shell: "exec"}}})
        eventually(lambda: all(cluster.get_or_none(p) for p in access), what="access again")
        eventually(lambda: cluster.get_or_none(secret) is None, what="the keys gone")


def test_an_upstream_mpijob_keeps_restart_counts_in_an_annotation(
    cluster: Cluster, tmp_path: Path
) -> None:
    # mpi-operator's v2beta1 CRD has no place for kubemill's restart counts in the status.
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces", "--serve-upstream-groups"):
        job = mpijob()
        job["apiVersion"] = "kubeflow.org/v2beta1"
        job["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
        cluster.create(job_path("MPIJob", namespace, upstream=True), job)
        path = job_path("MPIJob", namespace, "m", upstream=True)
        kubelet = all_running(cluster, namespace)
        kubelet.set("m-worker-1", "Failed", container="worker", exit_code=137, reason="Evicted")
        restarted = eventually(
            lambda: (j := cluster.get(path)) and is_true(j, "Restarting") and j, what="Restarting"
        )
        recorded = json.loads(restarted["metadata"]["annotations"][RESTARTS_ANNOTATION])
        assert recorded["Worker"]["restarts"] == 1
