"""`kubemill render` of MPIJobs: the seed's v1alpha2 (exec mode) and a v2beta1 (ssh mode).

What the operator creates, in order, each valid for Kubernetes (kubernetes-validate): the
ConfigMap with ``hostfile`` and ``discover_hosts.sh``, the worker pods before the launcher,
the launcher's ``OMPI_MCA_orte_default_hostfile``, and per mode the launcher's Role (exec)
or the job's SSH key Secret (ssh), whose private key stays out of the output unless asked.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from kubemill.engines.mpi.api import MPIJob
from kubemill.kinds import load_one
from kubemill.sdk.manifests import load_path
from kubemill.substrates.kubernetes.build import HOST_ONLY_COMMAND
from kubemill.substrates.kubernetes.render import render_job
from support.manifest_checks import k8s_errors

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "examples" / "seed" / "mpijob-v1alpha2.yaml"

V2BETA1 = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "hpc"},
    "spec": {
        "slotsPerWorker": 2,
        "launcherCreationPolicy": "WaitForWorkersReady",
        "sshAuthMountPath": "/home/mpiuser/.ssh",
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "launcher", "image": "mpi-pi", "command": ["mpirun", "pi"]}
                        ]
                    }
                },
            },
            "Worker": {
                "replicas": 3,
                "template": {"spec": {"containers": [{"name": "worker", "image": "mpi-pi"}]}},
            },
        },
    },
}


def seed_job() -> MPIJob:
    [job] = load_path(SEED)
    assert isinstance(job, MPIJob)
    return job


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in by_kind(objects, kind) if o["metadata"]["name"] == name)


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize(
    "job",
    [pytest.param(seed_job(), id="seed-v1alpha2"), pytest.param(load_one(V2BETA1), id="v2beta1")],
)
def test_every_rendered_object_is_valid_kubernetes(job: MPIJob) -> None:
    objects = render_job(job)
    assert objects
    for obj in objects:
        assert k8s_errors(obj) == []


def test_seed_renders_the_exec_design() -> None:
    objects = render_job(seed_job())
    order = [(o["kind"], o["metadata"]["name"]) for o in objects]
    pods = [name for kind, name in order if kind == "Pod"]
    assert pods == [
        "tensorflow-mnist-worker-0",
        "tensorflow-mnist-worker-1",
        "tensorflow-mnist-launcher-0",
    ]
    # Files and the launcher's access exist before the launcher that uses them.
    launcher_at = order.index(("Pod", "tensorflow-mnist-launcher-0"))
    for child in [
        ("ConfigMap", "tensorflow-mnist-config"),
        ("Role", "tensorflow-mnist-launcher"),
        ("RoleBinding", "tensorflow-mnist-launcher"),
        ("ServiceAccount", "tensorflow-mnist-launcher"),
        ("Service", "tensorflow-mnist"),
    ]:
        assert order.index(child) < launcher_at, child
    assert not by_kind(objects, "Secret")

    config = named(objects, "ConfigMap", "tensorflow-mnist-config")["data"]
    assert config["hostfile"] == (
        "tensorflow-mnist-worker-0.tensorflow-mnist.default.svc slots=1\n"
        "tensorflow-mnist-worker-1.tensorflow-mnist.default.svc slots=1\n"
    )
    assert config["discover_hosts.sh"].startswith("#!/bin/sh\n")
    assert (
        "echo tensorflow-mnist-worker-1.tensorflow-mnist.default.svc:1"
        in (config["discover_hosts.sh"])
    )
    assert "def pod_name" in config["kubexec"]  # the agent's own source

    role = named(objects, "Role", "tensorflow-mnist-launcher")
    exec_rules = [r for r in role["rules"] if r["resources"] == ["pods/exec"]]
    assert exec_rules == [
        {
            "apiGroups": [""],
            "resources": ["pods/exec"],
            "verbs": ["get", "create"],
            "resourceNames": ["tensorflow-mnist-worker-0", "tensorflow-mnist-worker-1"],
        }
    ]

    launcher = named(objects, "Pod", "tensorflow-mnist-launcher-0")
    assert launcher["spec"]["serviceAccountName"] == "tensorflow-mnist-launcher"
    assert launcher["spec"]["subdomain"] == "tensorflow-mnist"
    env = env_of(launcher)
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_plm_rsh_agent"] == "/etc/mpi/kubexec"
    mounts = launcher["spec"]["containers"][0]["volumeMounts"]
    assert any(m["mountPath"] == "/etc/mpi" and m["readOnly"] for m in mounts)

    worker = named(objects, "Pod", "tensorflow-mnist-worker-0")
    container = worker["spec"]["containers"][0]
    # The seed's `command: [""]`: a host that waits for orted, ending at once on SIGTERM.
    assert container["command"] == list(HOST_ONLY_COMMAND)
    assert "args" not in container
    assert worker["spec"]["hostname"] == "tensorflow-mnist-worker-0"
    assert "serviceAccountName" not in worker["spec"]
    assert container["resources"]["limits"] == {"cpu": 2, "memory": "4Gi"}
    # mpirun passes its plm_rsh_agent to each orted, which stops where the path is missing.
    worker_mounts = container["volumeMounts"]
    assert any(m["mountPath"] == "/etc/mpi" and m["readOnly"] for m in worker_mounts)

    service = named(objects, "Service", "tensorflow-mnist")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"kubemill.dev/job-name": "tensorflow-mnist"}


def test_v2beta1_renders_ssh_keys_redacted_unless_asked() -> None:
    job = load_one(V2BETA1)
    objects = render_job(job)
    assert not by_kind(objects, "Role")
    secret = named(objects, "Secret", "pi-ssh")
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["data"] == {"ssh-privatekey": "", "ssh-publickey": ""}
    assert "PRIVATE KEY" not in str(objects)

    shown = named(render_job(job, show_secrets=True), "Secret", "pi-ssh")["data"]
    private = base64.b64decode(shown["ssh-privatekey"]).decode()
    public = base64.b64decode(shown["ssh-publickey"]).decode()
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert public.startswith("ecdsa-sha2-nistp521 ") and public.endswith(" kubemill:hpc/pi\n")

    for name in ("pi-launcher-0", "pi-worker-0"):
        pod = named(objects, "Pod", name)
        volume = next(v for v in pod["spec"]["volumes"] if "secret" in v)
        assert volume["secret"]["secretName"] == "pi-ssh"
        paths = {(i["key"], i["path"], i["mode"]) for i in volume["secret"]["items"]}
        assert paths == {
            ("ssh-privatekey", "id_rsa", 0o600),
            ("ssh-publickey", "id_rsa.pub", 0o644),
            ("ssh-publickey", "authorized_keys", 0o644),
        }
        mounts = pod["spec"]["containers"][0]["volumeMounts"]
        assert any(m["mountPath"] == "/home/mpiuser/.ssh" for m in mounts)

    worker = named(objects, "Pod", "pi-worker-0")
    assert "command" not in worker["spec"]["containers"][0]  # the image runs sshd
    launcher_env = env_of(named(objects, "Pod", "pi-launcher-0"))
    assert launcher_env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert launcher_env["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10"
    hostfile = named(objects, "ConfigMap", "pi-config")["data"]["hostfile"]
    assert hostfile.splitlines() == [f"pi-worker-{i}.pi.hpc.svc slots=2" for i in range(3)]
