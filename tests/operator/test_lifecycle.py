"""The operator through a job's life, against kmock: each test asserts calls and final state.

One cluster and one operator (``--all-namespaces --serve-upstream-groups``) serve the whole
module; every test works in a namespace of its own and looks only at the calls made there.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from operator_jobs import pytorchjob, tfjob
from operator_support import (
    Cluster,
    Kubelet,
    Operator,
    eventually,
    is_true,
    job_path,
    summarize,
    writes,
)

from kubemill.api import load_one
from kubemill.substrates.kubernetes.render import render_job


def pods_of(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def services_of(cluster: Cluster, namespace: str) -> set[str]:
    items = cluster.list(f"/api/v1/namespaces/{namespace}/services")
    return {s["metadata"]["name"] for s in items}


def event_reasons(cluster: Cluster, namespace: str) -> Counter[str]:
    return Counter(e["reason"] for e in cluster.list(f"/api/v1/namespaces/{namespace}/events"))


def wait_pods(cluster: Cluster, namespace: str, names: set[str]) -> dict[str, dict[str, Any]]:
    return eventually(
        lambda: (pods := pods_of(cluster, namespace)) and set(pods) == names and pods,
        what=f"pods {sorted(names)}",
    )


def wait_condition(cluster: Cluster, path: str, kind: str) -> dict[str, Any]:
    return eventually(
        lambda: (job := cluster.get(path)) and is_true(job, kind) and job,
        what=f"{kind} on {path}",
    )


def assert_idle_pass_writes_nothing(
    cluster: Cluster, operator: Operator, namespace: str, kind: str, name: str
) -> None:
    """Touch the job (a label) and check the reconcile it causes writes nothing at all."""
    before = len(cluster.calls())
    path = job_path(kind, namespace, name)
    touched = cluster.patch(path, {"metadata": {"labels": {"touched": str(before)}}})
    version = touched["metadata"]["resourceVersion"]
    eventually(
        lambda: operator.reconciled(namespace, name, version),
        what=f"a reconcile of {name} at resourceVersion {version}",
    )
    after = [c for c in cluster.calls()[before:] if not c.from_tests]
    assert writes(after) == [], summarize(writes(after))


def test_a_job_gets_one_pod_and_one_headless_service_per_replica_exactly_as_rendered(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    created = cluster.create(job_path("TFJob", namespace), tfjob("train", ps=1, workers=2))
    names = {"train-chief-0", "train-ps-0", "train-worker-0", "train-worker-1"}
    wait_pods(cluster, namespace, names)
    eventually(lambda: services_of(cluster, namespace) == names, what="services")
    job = wait_condition(cluster, job_path("TFJob", namespace, "train"), "Created")

    calls = writes(cluster.operator_calls(namespace=namespace))
    posted = {
        (c.plural, c.body["metadata"]["name"]): c.body
        for c in calls
        if c.method == "POST" and c.plural in ("pods", "services")
    }
    counts = Counter((c.method, c.resource) for c in calls)
    # Each child exactly once, the status written once (Created); nothing else but events.
    assert counts[("POST", "pods")] == 4 and counts[("POST", "services")] == 4, summarize(calls)
    assert counts[("PATCH", "tfjobs/status")] == 1, summarize(calls)
    assert set(counts) == {
        ("POST", "pods"),
        ("POST", "services"),
        ("PATCH", "tfjobs/status"),
        ("POST", "events"),
    }, summarize(calls)

    # The bodies sent are exactly what `kubemill render` prints for the stored job.
    rendered = {
        ("pods" if o["kind"] == "Pod" else "services", o["metadata"]["name"]): o
        for o in render_job(load_one(created))
    }
    assert posted == rendered

    worker = posted["pods", "train-worker-1"]
    container = worker["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {
            "chief": [f"train-chief-0.{namespace}.svc:2222"],
            "ps": [f"train-ps-0.{namespace}.svc:2222"],
            "worker": [
                f"train-worker-0.{namespace}.svc:2222",
                f"train-worker-1.{namespace}.svc:2222",
            ],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert worker["spec"]["restartPolicy"] == "OnFailure"
    assert worker["metadata"]["labels"] == {
        "team": "ml",
        "kubemill.dev/operator-name": "kubemill",
        "kubemill.dev/job-name": "train",
        "kubemill.dev/replica-type": "worker",
        "kubemill.dev/replica-index": "1",
    }
    assert worker["metadata"]["annotations"] == {"note": "kept"}
    assert worker["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubemill.dev/v1",
            "kind": "TFJob",
            "name": "train",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    service = cluster.get(f"/api/v1/namespaces/{namespace}/services/train-worker-1")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {
        "kubemill.dev/job-name": "train",
        "kubemill.dev/replica-type": "worker",
        "kubemill.dev/replica-index": "1",
    }
    assert job["status"]["replicaStatuses"]["Worker"]["active"] == 0
    reasons = eventually(
        lambda: (r := event_reasons(cluster, namespace))["SuccessfulCreatePod"] == 4 and r,
        what="events",
    )
    assert reasons == {"SuccessfulCreatePod": 4, "SuccessfulCreateService": 4, "TFJobCreated": 1}


def test_pods_running_make_the_job_running_and_an_idle_pass_writes_nothing(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    cluster.create(job_path("PyTorchJob", namespace), pytorchjob("ddp", workers=2))
    names = {"ddp-master-0", "ddp-worker-0", "ddp-worker-1"}
    wait_pods(cluster, namespace, names)
    for pod in sorted(names):
        kubelet.set(pod, "Running", container="pytorch")
    job = wait_condition(cluster, job_path("PyTorchJob", namespace, "ddp"), "Running")
    eventually(
        lambda: (
            cluster.get(job_path("PyTorchJob", namespace, "ddp"))["status"]["replicaStatuses"]
            == {
                "Master": {"active": 1, "succeeded": 0, "failed": 0, "restarts": 0},
                "Worker": {"active": 2, "succeeded": 0, "failed": 0, "restarts": 0},
            }
        ),
        what="replica counts",
    )
    assert job["status"]["startTime"]
    assert_idle_pass_writes_nothing(cluster, operator, namespace, "PyTorchJob", "ddp")
