"""Ways to run the operator: several replicas (Lease), volcano gangs, namespaced scope."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE
from support.kmock_cluster import ApiError
from support.operator_jobs import tfjob
from support.operator_support import (
    Cluster,
    Kubelet,
    Operator,
    is_true,
    job_path,
    running_cluster,
    running_operator,
    summarize,
)
from support.waiting import eventually

LEADER_ARGS = (
    "--all-namespaces",
    "--leader-election",
    "--lease-namespace=kubemill-system",
    "--lease-duration=3",
)


def reporters(cluster: Cluster, namespace: str) -> Counter[str]:
    """Which operator replica posted the events in ``namespace``."""
    events = cluster.list(f"/api/v1/namespaces/{namespace}/events")
    return Counter(e["reportingInstance"] for e in events)


def leading(operator: Operator) -> bool:
    return bool(operator.probe()["kubemill"]["leading"])


def test_two_replicas_act_as_one_and_the_follower_takes_over_when_the_leader_dies(
    tmp_path: Path,
) -> None:
    with running_cluster() as cluster:
        cluster.create("/api/v1/namespaces", {"metadata": {"name": "kubemill-system"}})
        with running_operator(cluster, tmp_path, *LEADER_ARGS, name="alpha") as alpha:
            eventually(lambda: leading(alpha), what="alpha leading")
            with running_operator(cluster, tmp_path, *LEADER_ARGS, name="beta") as beta:
                assert not leading(beta)
                first = cluster.namespace()
                cluster.create(job_path("TFJob", first), tfjob("one", workers=3))
                eventually(
                    lambda: is_true(cluster.get(job_path("TFJob", first, "one")), "Created"),
                    what="Created",
                )
                eventually(lambda: reporters(cluster, first)["alpha"] == 3, what="all events")
                calls = cluster.operator_calls(namespace=first)
                posts = Counter(c.body["metadata"]["name"] for c in calls if c.resource == "pods")
                assert set(posts.values()) == {1}, summarize(calls)  # nobody created twice
                assert reporters(cluster, first) == {"alpha": 3}
                assert not leading(beta)

                alpha.kill()  # no goodbye: beta waits for the Lease to expire
                eventually(lambda: leading(beta), what="beta taking over")
                lease = cluster.get(
                    "/apis/coordination.k8s.io/v1/namespaces/kubemill-system/leases/"
                    "kubemill-operator"
                )
                assert lease["spec"]["holderIdentity"] == "beta"
                second = cluster.namespace()
                cluster.create(job_path("TFJob", second), tfjob("two", workers=1))
                eventually(
                    lambda: is_true(cluster.get(job_path("TFJob", second, "two")), "Created"),
                    what="Created by beta",
                )
                eventually(lambda: reporters(cluster, second) == {"beta": 3}, what="beta's events")
                # beta re-reconciled the first job from its own warm cache: nothing to write.
                late = [c for c in cluster.operator_calls(namespace=first) if c.is_write]
                assert late == [c for c in calls if c.is_write], summarize(late)


PODGROUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
"""Enough of a gang scheduler's PodGroup schema: a v1 CRD must have one."""

VOLCANO_PODGROUP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {
        "group": "scheduling.volcano.sh",
        "scope": "Namespaced",
        "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": PODGROUP_SCHEMA},
            }
        ],
    },
}


def test_volcano_gang_a_pod_group_first_pods_once_it_is_admitted_and_gone_when_done(
    tmp_path: Path,
) -> None:
    with running_cluster() as cluster:
        cluster.create(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", VOLCANO_PODGROUP_CRD
        )
        args = ("--all-namespaces", "--gang-scheduler-name=volcano")
        with running_operator(cluster, tmp_path, *args):
            namespace = cluster.namespace()
            kubelet = Kubelet(cluster, namespace)
            run_policy = {"schedulingPolicy": {"minAvailable": 2, "queue": "research"}}
            manifest = tfjob("gang", workers=2, run_policy=run_policy)
            cluster.create(job_path("TFJob", namespace), manifest)
            groups = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"
            group = eventually(lambda: cluster.get_or_none(f"{groups}/gang"), what="PodGroup")
            assert group["spec"]["minMember"] == 2
            assert group["spec"]["queue"] == "research"
            assert group["metadata"]["ownerReferences"][0]["name"] == "gang"
            pods_url = f"/api/v1/namespaces/{namespace}/pods"
            assert cluster.list(pods_url) == []  # volcano has not admitted the group yet

            # Acting as volcano: the group is admitted.
            cluster.patch(f"{groups}/gang/status", {"status": {"phase": "Inqueue"}})
            names = {"gang-chief-0", "gang-worker-0", "gang-worker-1"}
            pods = eventually(
                lambda: (
                    (p := {x["metadata"]["name"]: x for x in cluster.list(pods_url)})
                    and set(p) == names
                    and p
                ),
                what="pods after admission",
            )
            for pod in pods.values():
                assert pod["spec"]["schedulerName"] == "volcano"
                assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "gang"
            for name in sorted(names):
                kubelet.set(name, "Running", container="tensorflow")
            kubelet.set("gang-chief-0", "Succeeded", container="tensorflow", exit_code=0)
            eventually(
                lambda: is_true(cluster.get(job_path("TFJob", namespace, "gang")), "Succeeded")
            )
            eventually(lambda: cluster.get_or_none(f"{groups}/gang") is None, what="group gone")
            group_calls = [
                (c.method, c.status)
                for c in cluster.operator_calls(namespace=namespace)
                if c.plural == "podgroups" and c.is_write
            ]
            assert group_calls == [("POST", 201), ("DELETE", 200)]


def test_a_namespaced_operator_watches_and_touches_only_its_namespaces(tmp_path: Path) -> None:
    with running_cluster() as cluster:
        mine, other = cluster.namespace(), cluster.namespace()
        cluster.create(job_path("TFJob", other), tfjob("elsewhere", workers=1))
        with running_operator(cluster, tmp_path, f"--namespace={mine}") as operator:
            cluster.create(job_path("TFJob", mine), tfjob("here", workers=1))
            eventually(
                lambda: is_true(cluster.get(job_path("TFJob", mine, "here")), "Created"),
                what="the job in its namespace",
            )
            assert cluster.list(f"/api/v1/namespaces/{other}/pods") == []
            assert not cluster.get(job_path("TFJob", other, "elsewhere")).get("status")
            calls = [c for c in cluster.calls() if c.plural and not c.from_tests]
            # Every list and watch is scoped to the namespace: a Role there is enough. Its
            # own namespace holds its history records (the Role beside the Lease's).
            own = [c for c in calls if c.namespace == DEFAULT_NAMESPACE]
            assert {(c.plural, c.verb) for c in own} == {("configmaps", "list")}
            served = [c for c in calls if c not in own]
            assert {c.namespace for c in served} == {mine}, summarize(served)
            assert operator.probe()["kubemill"]["leading"]


SCHEDULER_PLUGINS_PODGROUP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {
        "group": "scheduling.x-k8s.io",
        "scope": "Namespaced",
        "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": PODGROUP_SCHEMA},
            }
        ],
    },
}


def test_scheduler_plugins_gang_labels_pods_with_their_pod_group_without_waiting(
    tmp_path: Path,
) -> None:
    with running_cluster() as cluster:
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        cluster.create(crds, SCHEDULER_PLUGINS_PODGROUP_CRD)
        args = ("--all-namespaces", "--gang-scheduler-name=scheduler-plugins")
        with running_operator(cluster, tmp_path, *args):
            namespace = cluster.namespace()
            run_policy = {"schedulingPolicy": {"scheduleTimeoutSeconds": 60}}
            cluster.create(
                job_path("TFJob", namespace), tfjob("co", workers=1, run_policy=run_policy)
            )
            groups = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
            group = eventually(lambda: cluster.get_or_none(f"{groups}/co"), what="PodGroup")
            assert group["spec"]["minMember"] == 2
            assert group["spec"]["scheduleTimeoutSeconds"] == 60
            pods_url = f"/api/v1/namespaces/{namespace}/pods"
            pods = eventually(lambda: len(p := cluster.list(pods_url)) == 2 and p, what="pods")
            for pod in pods:
                assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "co"
                assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"


LEASE = "/apis/coordination.k8s.io/v1/namespaces/kubemill-system/leases/kubemill-operator"


def test_a_leader_whose_lease_another_takes_stops_leading_and_exits(tmp_path: Path) -> None:
    """Renewals are writes at the resourceVersion read: once another holder renews the Lease,
    the leader's renewals stop succeeding, and after the renew deadline it stops."""
    with running_cluster() as cluster:
        cluster.create("/api/v1/namespaces", {"metadata": {"name": "kubemill-system"}})
        with running_operator(cluster, tmp_path, *LEADER_ARGS, name="alpha") as alpha:
            eventually(lambda: leading(alpha), what="alpha leading")
            spec = cluster.get(LEASE)["spec"]
            assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("alpha", 3)
            assert spec["leaseTransitions"] == 0 and spec["renewTime"].endswith("Z")
            renewed = spec["renewTime"]
            eventually(lambda: cluster.get(LEASE)["spec"]["renewTime"] != renewed, what="renewal")

            def intrude() -> bool:
                lease = cluster.get(LEASE)
                lease["spec"]["holderIdentity"] = "intruder"
                lease["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                try:
                    cluster.request("PUT", LEASE, lease)  # at the version read, as alpha
                except ApiError as exc:
                    assert exc.status == 409, exc  # alpha renewed in between: read again
                    return False
                return True

            eventually(intrude, what="the intruder's write")
            assert alpha.process is not None
            alpha.process.wait(timeout=30)  # renew deadline 2 s, then the operator stops
            assert "lost the lease kubemill-operator: stopping" in alpha.log()
            assert cluster.get(LEASE)["spec"]["holderIdentity"] == "intruder"
