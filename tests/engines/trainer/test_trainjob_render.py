"""A TrainJob on Kubernetes: the example renders into objects Kubernetes' own schemas accept,
the pods carrying torchrun's variables, and the example is valid for the generated CRD."""

from __future__ import annotations

from typing import Any

import yaml

from kubemill.kinds import crds
from kubemill.sdk.manifests import load_path
from kubemill.substrates.kubernetes.render import render_job
from support.e2e_support import EXAMPLES
from support.manifest_checks import crd_validator, k8s_errors

EXAMPLE = EXAMPLES / "trainjob" / "trainjob.yaml"


def test_the_example_renders_into_valid_pods_and_services() -> None:
    (job,) = load_path(EXAMPLE)
    objects = render_job(job)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Service", "torch-allreduce-node-0"),
        ("Service", "torch-allreduce-node-1"),
        ("Pod", "torch-allreduce-node-0"),
        ("Pod", "torch-allreduce-node-1"),
    ]
    assert [e for o in objects for e in k8s_errors(o)] == []
    for rank, pod in enumerate(o for o in objects if o["kind"] == "Pod"):
        (container,) = pod["spec"]["containers"]
        assert container["command"] == ["torchrun", "allreduce.py"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {
            "PET_NNODES": "2",
            "PET_NPROC_PER_NODE": "1",
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": "torch-allreduce-node-0",
            "PET_MASTER_PORT": "29500",
        }
        assert pod["spec"]["restartPolicy"] == "OnFailure"


def test_the_example_is_valid_for_the_trainjob_crd() -> None:
    (crd,) = (c for c in crds() if c["spec"]["names"]["kind"] == "TrainJob")
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    # The CRD serves kubemill's group; upstream's group has the same schema.
    ours = {**doc, "apiVersion": "kubemill.dev/v1"}
    assert [e.message for e in crd_validator(crd).iter_errors(ours)] == []
    bad = {**ours, "spec": {**ours["spec"], "trainer": {"numNodes": 0}}}
    assert [e.message for e in crd_validator(crd).iter_errors(bad)] != []


def test_the_jax_example_renders_pods_with_the_coordinator() -> None:
    (job,) = load_path(EXAMPLES / "trainjob" / "jax.yaml")
    objects = render_job(job)
    assert [e for o in objects for e in k8s_errors(o)] == []
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["jax-psum-node-0", "jax-psum-node-1"]
    for rank, pod in enumerate(pods):
        (container,) = pod["spec"]["containers"]
        assert container["ports"] == [{"name": "trainjob-port", "containerPort": 6666}]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {
            "JAX_NUM_PROCESSES": "2",
            "JAX_PROCESS_ID": str(rank),
            "JAX_COORDINATOR_ADDRESS": "jax-psum-node-0:6666",
            "JAX_COORDINATOR_PORT": "6666",
            "JAX_DISTRIBUTED_BACKEND": "gloo",
        }


def test_the_mpi_example_renders_hosts_a_hostfile_and_a_key_pair() -> None:
    (job,) = load_path(EXAMPLES / "trainjob" / "mpi.yaml")
    objects = render_job(job)
    assert [e for o in objects for e in k8s_errors(o)] == []
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objects)
    assert ("ConfigMap", "mpi-allreduce-mpi-hostfile") in kinds
    assert ("Secret", "mpi-allreduce-mpi-ssh-auth") in kinds
    assert ("Service", "mpi-allreduce") in kinds
    pods = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
    assert sorted(pods) == [
        "mpi-allreduce-launcher-0",
        "mpi-allreduce-trainer-node-0",
        "mpi-allreduce-trainer-node-1",
    ]
    (launcher,) = pods["mpi-allreduce-launcher-0"]["spec"]["containers"]
    assert launcher["command"] == ["mpirun", "-np", "2", "python", "mpi_allreduce.py"]
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    mounts = {m["mountPath"] for m in launcher["volumeMounts"]}
    assert {"/etc/mpi", "/home/mpiuser/.ssh"} <= mounts
    for name in ("mpi-allreduce-trainer-node-0", "mpi-allreduce-trainer-node-1"):
        pod = pods[name]
        assert pod["spec"]["subdomain"] == "mpi-allreduce"
        (node,) = pod["spec"]["containers"]
        assert node["command"] == ["/usr/sbin/sshd"]  # the runtime's: mpirun's ssh reaches it
        assert "/home/mpiuser/.ssh" in {m["mountPath"] for m in node["volumeMounts"]}
    (config,) = (o for o in objects if o["kind"] == "ConfigMap")
    assert config["data"]["hostfile"].splitlines() == [
        f"mpi-allreduce-trainer-node-{i}.mpi-allreduce.default.svc slots=1" for i in range(2)
    ]
