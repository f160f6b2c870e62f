"""MPIJobs through the real control plane: the seed's v1alpha2 form (the exec agent) from the
SDK, and mpi-operator's v2beta1 form (SSH, ``launcherCreationPolicy: WaitForWorkersReady``)
in its own group, applied by kubectl. The workers come first and the launcher after them,
the hostfile is a ConfigMap, the SSH keys a Secret; the launcher's exit decides the job."""

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


def test_the_seeds_v1alpha2_mpijob_runs_its_launcher_after_its_workers(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    manifest = yaml.safe_load((ROOT / "examples" / "seed" / "mpijob-v1alpha2.yaml").read_text())
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(manifest)
    launcher = workers_first_then_the_launcher(control_plane, node, namespace, "tensorflow-mnist")
    configmaps = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")["items"]
    hostfiles = [c for c in configmaps if "hostfile" in c.get("data", {})]
    assert hostfiles, [c["metadata"]["name"] for c in configmaps]
    assert "tensorflow-mnist-worker-0" in hostfiles[0]["data"]["hostfile"]
    # The exec agent: mpirun's remote shell execs into the workers through the API.
    env = {e["name"]: e.get("value") for e in launcher["spec"]["containers"][0].get("env", [])}
    assert any("plm_rsh_agent" in name.lower() for name in env), sorted(env)
    node.finish(namespace, launcher["metadata"]["name"], 0)
    eventually(
        lambda: client.get("tensorflow-mnist").phase == "Succeeded", timeout=WAIT, what="Succeeded"
    )
    # cleanPodPolicy Running: the workers still running are stopped.
    eventually(
        lambda: not [n for n in pods(control_plane, namespace) if "worker" in n],
        timeout=WAIT,
        what="the workers stopped",
    )


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
