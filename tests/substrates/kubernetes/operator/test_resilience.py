"""The operator when things go wrong: killed mid-reconcile, API errors, expired watches.

Each test gets a cluster and operator(s) of its own, since it bends the API server.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from support.kmock_cluster import Fault, Gate
from support.operator_jobs import tfjob
from support.operator_support import (
    Kubelet,
    Operator,
    is_true,
    job_path,
    running_cluster,
    running_operator,
    summarize,
)
from support.waiting import eventually


@pytest.mark.parametrize(
    "held_requests_land",
    [
        pytest.param(True, id="held-creates-land-after-the-kill"),
        pytest.param(False, id="held-creates-never-land"),
    ],
)
def test_an_operator_killed_mid_reconcile_leaves_no_duplicate_or_lost_child(
    tmp_path: Path, held_requests_land: bool
) -> None:
    with running_cluster() as cluster:
        namespace = cluster.namespace()
        # Let one pod create through, hold the others inside the API server.
        gate = Gate(method="POST", plural="pods", namespace=namespace, skip=1)
        gate.drop = not held_requests_land
        cluster.cluster.gates.append(gate)
        first = Operator(cluster, tmp_path, "--all-namespaces", name="first").start()
        try:
            cluster.create(job_path("TFJob", namespace), tfjob("crash", workers=3))
            eventually(lambda: gate.held == 3, what="three pod creates held")
            first.kill()
        finally:
            first.stop()
        gate.open()
        path = job_path("TFJob", namespace, "crash")
        assert not (cluster.get(path).get("status") or {}), "killed before writing any status"
        names = {"crash-chief-0", "crash-worker-0", "crash-worker-1", "crash-worker-2"}
        before_restart = len(cluster.calls())

        with running_operator(cluster, tmp_path, "--all-namespaces", name="second"):
            eventually(
                lambda: (
                    {
                        p["metadata"]["name"]
                        for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")
                    }
                    == names
                ),
                what="every pod",
            )
            eventually(lambda: is_true(cluster.get(path), "Created"), what="Created")
            services = cluster.list(f"/api/v1/namespaces/{namespace}/services")
            assert {s["metadata"]["name"] for s in services} == names

        calls = cluster.operator_calls(namespace=namespace)
        created = Counter(
            c.body["metadata"]["name"]
            for c in calls
            if c.method == "POST" and c.plural == "pods" and c.status == 201
        )
        assert created == dict.fromkeys(names, 1), summarize(calls)  # each pod created once
        # The restarted operator started from a full cache: it never tried an existing child.
        after = [c for c in calls[before_restart:] if c.method == "POST" and c.plural != "events"]
        assert [c for c in after if c.status != 201] == [], summarize(after)
        if held_requests_land:
            assert not [c for c in calls[before_restart:] if c.plural == "pods" and c.is_write]


def test_api_errors_are_retried_and_watches_come_back_after_410_gone(tmp_path: Path) -> None:
    with (
        running_cluster() as cluster,
        running_operator(cluster, tmp_path, "--all-namespaces") as operator,
    ):
        namespace = cluster.namespace()
        kubelet = Kubelet(cluster, namespace)
        faults = [
            Fault(500, method="POST", plural="pods", namespace=namespace, times=2),
            Fault(503, method="POST", plural="services", namespace=namespace, times=1),
            Fault(409, method="PATCH", plural="tfjobs", subresource="status", namespace=namespace),
        ]
        cluster.cluster.faults.extend(faults)
        cluster.create(job_path("TFJob", namespace), tfjob("flaky", workers=1))
        path = job_path("TFJob", namespace, "flaky")
        eventually(lambda: is_true(cluster.get(path), "Created"), what="Created")
        names = {"flaky-chief-0", "flaky-worker-0"}
        pods_url = f"/api/v1/namespaces/{namespace}/pods"
        eventually(lambda: {p["metadata"]["name"] for p in cluster.list(pods_url)} == names)
        assert [f.hits for f in faults] == [2, 1, 1]

        calls = cluster.operator_calls(namespace=namespace)
        pod_posts = [(c.body["metadata"]["name"], c.status) for c in calls if c.resource == "pods"]
        assert sorted(status for _, status in pod_posts) == [201, 201, 500, 500]
        assert Counter(name for name, s in pod_posts if s == 201) == dict.fromkeys(names, 1)
        status_patches = [c.status for c in calls if c.resource == "tfjobs/status"]
        assert status_patches[:2] == [409, 200], status_patches
        metrics = operator.metrics()
        assert metrics['kubemill_api_errors_total{code="500",resource="pods",verb="create"}'] == 2
        assert metrics['kubemill_api_errors_total{code="409",resource="tfjobs",verb="patch"}'] == 1

        # The API server forgets history and drops every watch: kopf resumes from versions
        # that are gone, gets 410 Gone, lists again and watches from there.
        lists_before = sum(1 for c in cluster.calls() if c.verb == "list")
        cluster.call(cluster.cluster.compact)
        cluster.call(cluster.cluster.drop_watches)
        eventually(lambda: cluster.cluster.expired_watches >= 1, what="a 410 Gone")
        eventually(
            lambda: sum(1 for c in cluster.calls() if c.verb == "list") > lists_before,
            what="a fresh list after 410",
        )
        # ... and still sees what happens next.
        for pod in sorted(names):
            kubelet.set(pod, "Running", container="tensorflow")
        eventually(lambda: is_true(cluster.get(path), "Running"), what="Running after 410")
