"""MPIJobs through the real control plane: the seed's v1alpha2 form (the exec agent) from the
SDK, run for real (mpirun, kubexec and the ranks as processes, each orted exec'd into its
worker through the real API server), and mpi-operator's v2beta1 form (SSH,
``launcherCreationPolicy: WaitForWorkersReady``) in its own group, applied by kubectl. The
workers come first and the launcher after them, the hostfile is a ConfigMap, the SSH keys a
Secret; the launcher's exit decides the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.sdk import JobClient
from support.control_plane import ControlPlane
from support.node import NodeStandIn
from support.waiting import eventually

pytestmark = pytest.mark.usefixtures("operator")

ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0
"""Upper bound on the operator and the controllers acting: a hang guard."""

V2BETA1 = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: ring}
spec:
  slotsPerWorker: 2
  launcherCreationPolicy: WaitForWorkersReady
  runPolicy: {cleanPodPolicy: Running}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: example/mpi:1
            command: [mpirun, -np, "4", python, ring.py]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: example/mpi:1
"""


RANKS = """
import os, sys
from mpi4py import MPI
world = MPI.COMM_WORLD
total = world.allreduce(world.rank + 1)
print(f"rank {world.rank}/{world.size} in {os.environ['HOSTNAME']}: sum {total}", flush=True)
sys.exit(int(os.environ.get("FAIL_RANK_EXIT", "0")) if world.rank == 1 else 0)
"""
"""Each rank adds rank + 1 and reports the pod it ran in (its HOSTNAME, given by the node to
the worker it was exec'd into); rank 1 exits with ``$FAIL_RANK_EXIT`` (a worker's env)."""


def exec_mode_mpijob(name: str, *, fail_rank_exit: int = 0) -> dict[str, Any]:
    """The seed's v1alpha2 form (the exec agent; workers with ``command: [""]``) with a
    small mpi4py program for the seed's Horovod one; MPI over loopback TCP only."""
    manifest = yaml.safe_load((ROOT / "examples" / "seed" / "mpijob-v1alpha2.yaml").read_text())
    manifest["metadata"]["name"] = name
    launcher = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    launcher["containers"][0]["args"] = [
        *("-np", "2", "--allow-run-as-root", "-bind-to", "none", "-map-by", "slot"),
        *("-mca", "pml", "ob1", "-mca", "btl", "self,tcp"),
        *("-mca", "btl_tcp_if_include", "lo", "-mca", "oob_tcp_if_include", "lo"),
        *("python", "-c", RANKS),
    ]
    # The launcher's first exit decides (OnFailure, the default, would run mpirun again).
    manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "Never"
    worker = manifest["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["env"] = [{"name": "FAIL_RANK_EXIT", "value": str(fail_rank_exit)}]
    for spec in (launcher, manifest["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]):
        spec["containers"][0].pop("resources")  # 2 cores here, not the seed's 5
    return manifest  # type: ignore[no-any-return]


def pods(plane: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    listing = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    return {p["metadata"]["name"]: p for p in listing}


def workers_first_then_the_launcher(
    plane: ControlPlane, node: NodeStandIn, namespace: str, job: str
) -> dict[str, Any]:
    """The two workers run before any launcher exists; then the launcher runs. Its pod."""
    workers = {f"{job}-worker-0", f"{job}-worker-1"}
    eventually(
        lambda: workers <= set(pods(plane, namespace)),
        timeout=WAIT,
        what="the workers created",
    )
    launchers = [n for n in pods(plane, namespace) if "launcher" in n]
    running = all(node.running(namespace, w) for w in workers)
    assert running or not launchers, "the launcher was created before the workers ran"
    launcher = eventually(
        lambda: next(
            (
                p
                for n, p in pods(plane, namespace).items()
                if "launcher" in n and node.running(namespace, n)
            ),
            None,
        ),
        timeout=WAIT,
        what="the launcher running",
    )
    return launcher  # type: ignore[no-any-return]


def test_a_v2beta1_mpijob_over_ssh_in_its_own_group(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    applied = control_plane.kubectl(
        "apply", "--server-side", "--validate=strict", "-n", namespace, "-f", "-", stdin=V2BETA1
    )
    assert "serverside-applied" in applied.stdout
    launcher = workers_first_then_the_launcher(control_plane, node, namespace, "ring")
    owner = launcher["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    secrets = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/secrets")["items"]
    ssh = [s for s in secrets if s.get("type") == "kubernetes.io/ssh-auth"]
    assert ssh, [s["metadata"]["name"] for s in secrets]
    node.finish(namespace, launcher["metadata"]["name"], 0)
    path = f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/ring"

    def succeeded() -> bool:
        conditions = control_plane.request("GET", path).get("status", {}).get("conditions", [])
        return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)

    eventually(succeeded, timeout=WAIT, what="the upstream MPIJob Succeeded")


@pytest.mark.parametrize("fail_rank_exit", [0, 3], ids=["ranks-agree", "a-rank-fails"])
def test_the_seeds_v1alpha2_mpijob_runs_mpirun_through_the_real_api_servers_exec(
    control_plane: ControlPlane, node: NodeStandIn, fail_rank_exit: int
) -> None:
    """The seed's exec-mode MPIJob with its launcher run for real (the node runs the pods'
    commands in this test's namespace): the workers run before the launcher exists; mpirun
    reads the job's hostfile and runs kubexec from the job's ConfigMap as its remote shell,
    as the launcher's ServiceAccount (the pod's kube-api-access token); each orted reaches
    its worker through the real API server's pods/exec, authorized by the Role the operator
    made, and runs there; the ranks compute; the launcher's exit decides the job."""
    namespace = control_plane.new_namespace("mpi")
    node.run_commands_in(namespace)
    name = "allreduce"
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(exec_mode_mpijob(name, fail_rank_exit=fail_rank_exit))
    launcher = workers_first_then_the_launcher(control_plane, node, namespace, name)
    launcher_name = launcher["metadata"]["name"]
    phase = eventually(
        lambda: client.get(name).phase in ("Succeeded", "Failed") and client.get(name).phase,
        timeout=WAIT,
        what="the job ended",
    )
    log = control_plane.kubectl("logs", "-n", namespace, launcher_name).stdout
    assert phase == ("Failed" if fail_rank_exit else "Succeeded"), log
    ranks = sorted(line for line in log.splitlines() if line.startswith("rank "))
    assert ranks == [f"rank 0/2 in {name}-worker-0: sum 3", f"rank 1/2 in {name}-worker-1: sum 3"]
    state = node.pod(namespace, launcher_name)["status"]["containerStatuses"][0]["state"]
    assert (state["terminated"]["exitCode"] != 0) == bool(fail_rank_exit), state
    # Each exec was the launcher's own: its ServiceAccount, into its workers' container.
    account = f"system:serviceaccount:{namespace}:{name}-launcher"
    execs = {
        (e["objectRef"]["name"], e["verb"], e["responseStatus"]["code"])
        for e in control_plane.audit(account)
        if e.get("stage") == "ResponseComplete" and e["objectRef"].get("subresource") == "exec"
    }
    assert execs == {(f"{name}-worker-{i}", "get", 101) for i in range(2)}, execs
    paths = [r["path"] for r in node.exec_requests if f"/exec/{namespace}/" in r["path"]]
    targets = {tuple(p.split("?")[0].rsplit("/", 2)[1:]) for p in paths}
    assert targets == {(f"{name}-worker-{i}", "mpi-worker") for i in range(2)}
    # cleanPodPolicy Running: the workers, still running, are stopped.
    eventually(
        lambda: not [n for n in pods(control_plane, namespace) if "worker" in n],
        timeout=WAIT,
        what="the workers stopped",
    )
