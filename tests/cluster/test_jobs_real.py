"""Jobs through the real control plane: the operator as its own ServiceAccount, the real
kube-scheduler binding the pods, the node stand-in playing them, the real garbage collector.

Created by the SDK and by `kubectl apply --server-side` (validation on); suspend and resume,
cleanPodPolicy, TTL, in-place restarts under OnFailure; the CLI with --substrate kubernetes;
kubectl's view of the kinds (server-side printer columns, explain, auth can-i).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.kinds import crds
from kubemill.sdk import JobClient
from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE, operator_rules
from kubemill.substrates.kubernetes.restarts import RESTARTS_ANNOTATION
from support.control_plane import ControlPlane, absent
from support.node import NodeStandIn
from support.operator_jobs import mpijob, pytorchjob, tfjob
from support.real_operator import KUBEMILL, SERVICE_ACCOUNT, RealOperator, run_kubemill
from support.waiting import eventually

pytestmark = pytest.mark.usefixtures("operator")

ROOT = Path(__file__).resolve().parents[2]

WAIT = 60.0
"""Upper bound on the operator and the controllers acting: a hang guard."""


def pods(plane: ControlPlane, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    listing = plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=kubemill.dev/job-name%3D{job}"
    )
    return {p["metadata"]["name"]: p for p in listing["items"]}


def job(
    plane: ControlPlane, namespace: str, plural: str, name: str, group: str = "kubemill.dev/v1"
) -> Any:
    return plane.request("GET", f"/apis/{group}/namespaces/{namespace}/{plural}/{name}")


def condition(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c["type"] == kind and c["status"] == "True"
        for c in obj.get("status", {}).get("conditions", [])
    )


def all_running(
    plane: ControlPlane, node: NodeStandIn, namespace: str, job_name: str, count: int
) -> bool:
    current = pods(plane, namespace, job_name)
    return len(current) == count and all(node.running(namespace, name) for name in current)


def test_a_pytorchjob_from_the_sdk_runs_on_the_node_and_succeeds(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(pytorchjob("ddp", workers=2))
    eventually(
        lambda: all_running(control_plane, node, namespace, "ddp", 3),
        timeout=WAIT,
        what="master and 2 workers running",
    )
    for pod in pods(control_plane, namespace, "ddp").values():
        # Bound by the real kube-scheduler, with the env contract the planner wrote.
        assert pod["spec"]["nodeName"] == control_plane.node
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
        assert env["WORLD_SIZE"] == "3"
        assert env["MASTER_ADDR"].startswith("ddp-master-0")
    eventually(lambda: client.get("ddp").phase == "Running", timeout=WAIT, what="the job Running")
    services = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services")["items"]
    assert {s["metadata"]["name"] for s in services} >= {
        "ddp-master-0",
        "ddp-worker-0",
        "ddp-worker-1",
    }
    assert all(s["spec"]["clusterIP"] == "None" for s in services)

    for worker in ("ddp-worker-0", "ddp-worker-1"):
        node.finish(namespace, worker, 0)
    node.finish(namespace, "ddp-master-0", 0)
    eventually(
        lambda: client.get("ddp").phase == "Succeeded", timeout=WAIT, what="the job Succeeded"
    )
    status = job(control_plane, namespace, "pytorchjobs", "ddp")["status"]
    assert condition({"status": status}, "Succeeded")
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1
    assert status["completionTime"]


def test_a_tfjob_applied_by_kubectl_restarts_in_place_and_clean_pod_policy_running_stops_the_rest(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    manifest = tfjob("ps", ps=1, run_policy={"cleanPodPolicy": "Running", "backoffLimit": 3})
    applied = control_plane.kubectl(
        "apply",
        "--server-side",
        "--validate=strict",
        "--field-manager=test",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=yaml.safe_dump(manifest),
    )
    assert "serverside-applied" in applied.stdout
    eventually(
        lambda: all_running(control_plane, node, namespace, "ps", 4),
        timeout=WAIT,
        what="chief, ps and 2 workers running",
    )
    node.finish(namespace, "ps-worker-1", 1)
    eventually(
        lambda: (
            job(control_plane, namespace, "tfjobs", "ps")["status"]["replicaStatuses"][
                "Worker"
            ].get("restarts")
            == 1
        ),
        timeout=WAIT,
        what="the worker's in-place restart counted",
    )
    node.finish(namespace, "ps-chief-0", 0)
    eventually(
        lambda: condition(job(control_plane, namespace, "tfjobs", "ps"), "Succeeded"),
        timeout=WAIT,
        what="the job Succeeded",
    )
    # cleanPodPolicy Running: the PS and workers still running are deleted, through the
    # node's graceful termination; the chief that ended stays.
    eventually(
        lambda: set(pods(control_plane, namespace, "ps")) == {"ps-chief-0"},
        timeout=WAIT,
        what="only the chief left",
    )


def test_the_cli_runs_describes_suspends_resumes_follows_interrupts_and_deletes(
    control_plane: ControlPlane, node: NodeStandIn, tmp_path: Path
) -> None:
    namespace = control_plane.new_namespace()
    cli = ["--substrate", "kubernetes", "-n", namespace]
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    manifest = tmp_path / "pause.yaml"
    manifest.write_text(yaml.safe_dump(pytorchjob("pause")))
    ran = run_kubemill(control_plane, *cli, "run", "--detach", str(manifest))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    eventually(
        lambda: all_running(control_plane, node, namespace, "pause", 2),
        timeout=WAIT,
        what="running",
    )
    first_uids = {p["metadata"]["uid"] for p in pods(control_plane, namespace, "pause").values()}
    assert run_kubemill(control_plane, *cli, "suspend", "pause").returncode == 0
    eventually(
        lambda: not pods(control_plane, namespace, "pause"), timeout=WAIT, what="the pods gone"
    )
    eventually(lambda: client.get("pause").phase == "Suspended", timeout=WAIT, what="Suspended")
    listing = run_kubemill(control_plane, *cli, "get")
    assert "pause" in listing.stdout and "Suspended" in listing.stdout, listing.stdout
    assert run_kubemill(control_plane, *cli, "resume", "pause").returncode == 0
    eventually(
        lambda: all_running(control_plane, node, namespace, "pause", 2),
        timeout=WAIT,
        what="running again",
    )
    assert not first_uids & {
        p["metadata"]["uid"] for p in pods(control_plane, namespace, "pause").values()
    }
    node.write_log(namespace, "pause-master-0", "pytorch", "epoch 1 loss 0.5")
    logs = run_kubemill(
        control_plane, *cli, "logs", "pause", "--replica", "master-0", "--tail", "1"
    )
    assert "epoch 1 loss 0.5" in logs.stdout, logs.stdout + logs.stderr
    described = run_kubemill(control_plane, *cli, "describe", "pause")
    assert described.returncode == 0, described.stderr
    assert "Running" in described.stdout and "pause-master-0" in described.stdout, described.stdout
    # Followed through the API server's proxy to the node until the job ends.
    follower = subprocess.Popen(
        [
            KUBEMILL,
            "--kubeconfig",
            str(control_plane.admin_kubeconfig),
            *cli,
            "logs",
            "pause",
            "--replica",
            "master-0",
            "--follow",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        assert "epoch 1 loss 0.5" in follower.stdout.readline()
        node.write_log(namespace, "pause-master-0", "pytorch", "epoch 2 loss 0.4")
        assert "epoch 2 loss 0.4" in follower.stdout.readline()
        assert run_kubemill(control_plane, *cli, "interrupt", "pause").returncode == 0
        follower.wait(timeout=WAIT)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        if follower.stdout is not None:
            follower.stdout.close()
    eventually(
        lambda: client.get("pause").phase == "Failed", timeout=WAIT, what="Failed (Interrupted)"
    )
    assert client.get("pause").status.conditions[-1].reason == "Interrupted"
    assert run_kubemill(control_plane, *cli, "delete", "pause").returncode == 0
    eventually(
        lambda: absent(
            control_plane, f"/apis/kubemill.dev/v1/namespaces/{namespace}/pytorchjobs/pause"
        ),
        timeout=WAIT,
        what="the job deleted",
    )


def test_ttl_deletes_the_job_and_the_real_garbage_collector_takes_its_children(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(
        pytorchjob("brief", run_policy={"ttlSecondsAfterFinished": 1, "cleanPodPolicy": "None"})
    )
    eventually(
        lambda: all_running(control_plane, node, namespace, "brief", 2),
        timeout=WAIT,
        what="running",
    )
    node.finish(namespace, "brief-worker-0", 0)
    node.finish(namespace, "brief-master-0", 0)
    eventually(
        lambda: absent(
            control_plane, f"/apis/kubemill.dev/v1/namespaces/{namespace}/pytorchjobs/brief"
        ),
        timeout=WAIT,
        what="the job deleted by its TTL",
    )
    # Its pods and services carried ownerReferences to it: the garbage collector deletes them.
    eventually(
        lambda: not pods(control_plane, namespace, "brief"), timeout=WAIT, what="its pods collected"
    )
    services = f"/api/v1/namespaces/{namespace}/services"
    eventually(
        lambda: not control_plane.request("GET", services)["items"],
        timeout=WAIT,
        what="its services collected",
    )


def test_an_upstream_kubeflow_pytorchjob_is_served_with_its_restart_count(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    manifest = pytorchjob("up", api_version="kubeflow.org/v1")
    control_plane.request(
        "POST", f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", manifest
    )
    eventually(
        lambda: all_running(control_plane, node, namespace, "up", 2), timeout=WAIT, what="running"
    )
    for pod in pods(control_plane, namespace, "up").values():
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["apiVersion"], owner["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    node.finish(namespace, "up-worker-0", 1)

    def restarts() -> int:
        upstream = job(control_plane, namespace, "pytorchjobs", "up", group="kubeflow.org/v1")
        worker = upstream.get("status", {}).get("replicaStatuses", {}).get("Worker", {})
        # Kubeflow's ReplicaStatus has no restarts field, and the real server prunes one:
        # the count lives in kubemill's annotation.
        assert "restarts" not in worker
        kept = upstream["metadata"].get("annotations", {}).get(RESTARTS_ANNOTATION, "{}")
        return int(json.loads(kept).get("Worker", {}).get("restarts", 0))

    eventually(lambda: restarts() == 1, timeout=WAIT, what="the restart counted in the annotation")
    node.finish(namespace, "up-master-0", 0)
    eventually(
        lambda: condition(
            job(control_plane, namespace, "pytorchjobs", "up", group="kubeflow.org/v1"), "Succeeded"
        ),
        timeout=WAIT,
        what="the upstream job Succeeded",
    )


def every_kind(namespace: str) -> list[dict[str, Any]]:
    """One manifest of each of kubemill's kinds (kubemill.dev/v1)."""
    manifests = [
        pytorchjob("cols", run_policy={"suspend": True}),
        tfjob("cols", run_policy={"suspend": True}),
        mpijob(runPolicy={"suspend": True}),
    ]
    for example in ("spark-pi.yaml", "scheduled-spark-pi.yaml", "mars-cluster.yaml"):
        manifests.append(yaml.safe_load((ROOT / "examples" / example).read_text()))
    # Suspended too: its schedule (every 10 minutes) would otherwise add a run to the
    # SparkApplications listed when the test crosses the hour's tenth (seen in CI).
    manifests[-2]["spec"]["suspend"] = True
    for example in ("jax-psum.yaml", "xgboost-collective.yaml", "paddle-collective.yaml"):
        manifest = yaml.safe_load((ROOT / "examples" / example).read_text())
        manifest["spec"]["runPolicy"]["suspend"] = True
        manifests.append(manifest)
    trainjob = yaml.safe_load((ROOT / "examples" / "trainjob" / "trainjob.yaml").read_text())
    trainjob["spec"]["suspend"] = True
    manifests.append(trainjob)
    for example in ("raycluster.yaml", "rayjob-sum.yaml"):
        manifest = yaml.safe_load((ROOT / "examples" / "ray" / example).read_text())
        manifest["spec"]["suspend"] = True
        manifests.append(manifest)
    for manifest in manifests:
        manifest["apiVersion"] = "kubemill.dev/v1"
        manifest["metadata"]["namespace"] = namespace
    return manifests


def test_kubectl_prints_the_kinds_columns_explains_them_and_agrees_with_the_rbac(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator
) -> None:
    namespace = control_plane.new_namespace()
    # One object of every kind, suspended where the kind can be (nothing of it runs).
    for manifest in every_kind(namespace):
        control_plane.kubectl(
            "apply", "--server-side", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest)
        )
    for crd in crds():
        # With Kubeflow's CRDs installed too, a plural alone may name kubeflow.org's.
        name = crd["metadata"]["name"]
        columns = [
            c["name"].upper()
            for c in crd["spec"]["versions"][0].get("additionalPrinterColumns", [])
        ]
        printed = control_plane.kubectl("get", name, "-n", namespace).stdout.splitlines()
        assert printed, f"kubectl get {name} printed nothing"
        # Server-side tables: the CRD's printer columns, in order, after NAME.
        assert " ".join(printed[0].split()) == " ".join(["NAME", *columns]), (name, printed[0])
        assert len(printed) == 2, printed
    # `kubectl explain` of every kind shows its CRD's descriptions (the kind's, and its
    # fields' one level down), as the real server publishes them in its OpenAPI v3.
    for crd in crds():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        plural = crd["spec"]["names"]["plural"]
        for path, node in ((plural, schema), (f"{plural}.spec", schema["properties"]["spec"])):
            explained = control_plane.kubectl(
                "explain", path, "--api-version=kubemill.dev/v1"
            ).stdout
            assert f"KIND:       {crd['spec']['names']['kind']}" in explained, explained
            # kubectl wraps the text: compare the words.
            assert " ".join(node["description"].split()) in " ".join(explained.split()), (
                path,
                explained,
            )
    explained = control_plane.kubectl(
        "explain", "pytorchjobs.spec.runPolicy", "--api-version=kubemill.dev/v1"
    ).stdout
    assert "cleanPodPolicy" in explained and "DESCRIPTION" in explained.upper()
    # Every grant the registry derives, as the real authorizer answers for the operator's
    # account; gang-scheduling rules (not asked for at install) and others' resources: no.
    rules = operator_rules(serve_upstream_groups=True, clusterwide=True)
    asked = []
    for rule in rules:
        # A rule of the operator's own namespace (its leader-election Lease) is granted there.
        where = DEFAULT_NAMESPACE if rule.scope == "own-namespace" else namespace
        for group in rule.api_groups:
            for resource in rule.resources:
                base, _, sub = resource.partition("/")
                target = f"{base}.{group}" if group else base
                asked += [(verb, target, sub, where) for verb in rule.verbs]
    answers = can_i(control_plane, asked)
    assert all(answer == "yes" for answer in answers.values()), {
        k: v for k, v in answers.items() if v != "yes"
    }
    refused = [
        ("create", "clusterroles.rbac.authorization.k8s.io", "", namespace),
        ("delete", "nodes", "", namespace),
        ("create", "podgroups.scheduling.volcano.sh", "", namespace),
        ("update", "customresourcedefinitions.apiextensions.k8s.io", "", namespace),
        ("create", "leases.coordination.k8s.io", "", namespace),
    ]
    assert set(can_i(control_plane, refused).values()) == {"no"}
    assert not operator.refused()


Asked = tuple[str, str, str, str]
"""(verb, resource.group, subresource, namespace)"""


def can_i(plane: ControlPlane, asked: list[Asked]) -> dict[Asked, str]:
    """``kubectl auth can-i VERB RESOURCE --as=<the operator's account>`` for each one."""
    answers = {}
    for verb, target, sub, namespace in dict.fromkeys(asked):
        argv = ["auth", "can-i", verb, target, "-n", namespace, f"--as={SERVICE_ACCOUNT}"]
        if sub:
            argv.append(f"--subresource={sub}")
        answers[(verb, target, sub, namespace)] = plane.kubectl(*argv, check=False).stdout.strip()
    return answers


def test_kubectl_scale_changes_a_pytorchjobs_workers_through_the_scale_subresource(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(pytorchjob("elastic", workers=1))
    eventually(
        lambda: all_running(control_plane, node, namespace, "elastic", 2),
        timeout=WAIT,
        what="master and 1 worker running",
    )
    scaled = control_plane.kubectl(
        "scale", "pytorchjobs.kubemill.dev/elastic", "-n", namespace, "--replicas=3"
    )
    assert "scaled" in scaled.stdout
    eventually(
        lambda: all_running(control_plane, node, namespace, "elastic", 4),
        timeout=WAIT,
        what="master and 3 workers running",
    )
    scale = control_plane.request(
        "GET", f"/apis/kubemill.dev/v1/namespaces/{namespace}/pytorchjobs/elastic/scale"
    )
    assert scale["spec"]["replicas"] == 3
    eventually(
        lambda: (
            control_plane.request(
                "GET", f"/apis/kubemill.dev/v1/namespaces/{namespace}/pytorchjobs/elastic/scale"
            )["status"].get("replicas")
            == 3
        ),
        timeout=WAIT,
        what="the scale status counting 3 active workers",
    )


def test_exit_code_137_recreates_the_pod_and_exit_code_1_fails_the_job(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(pytorchjob("codes", policy="ExitCode", run_policy={"backoffLimit": 3}))
    eventually(
        lambda: all_running(control_plane, node, namespace, "codes", 2),
        timeout=WAIT,
        what="master and worker running",
    )
    first = pods(control_plane, namespace, "codes")["codes-worker-0"]
    assert first["spec"]["restartPolicy"] == "Never"
    # 137 (killed) is retryable: the operator deletes the pod and creates it again.
    node.finish(namespace, "codes-worker-0", 137)
    eventually(
        lambda: (
            (again := pods(control_plane, namespace, "codes").get("codes-worker-0"))
            and again["metadata"]["uid"] != first["metadata"]["uid"]
            and node.running(namespace, "codes-worker-0")
        ),
        timeout=WAIT,
        what="the worker's pod created again and running",
    )
    # 1 is permanent: the job fails.
    node.finish(namespace, "codes-worker-0", 1)
    eventually(lambda: client.get("codes").phase == "Failed", timeout=WAIT, what="Failed")
