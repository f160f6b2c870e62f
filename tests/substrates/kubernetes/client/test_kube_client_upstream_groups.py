"""Jobs in the upstream groups the operator serves (``--serve-upstream-groups``): the client
finds a KubeRay ``ray.io/v1`` RayCluster or a Kubeflow ``kubeflow.org/v1`` PyTorchJob that
kubectl applied, and reads, watches, patches, scales and deletes it in that group; ``list``
shows it beside kubemill's own. A group the cluster does not serve is never asked (one
discovery request says which are), and is no error.

Against the kmock cluster over HTTP, as a user would; the test applies the upstream objects
as kubectl would.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.kinds import load_one
from kubemill.sdk import JobClient
from kubemill.substrates.base import JobNotFound, SubmitOptions, SubstrateError
from kubemill.substrates.kubernetes.build import Owner, build_pod
from kubemill.substrates.kubernetes.client import KubernetesBackend, load_job
from kubemill.substrates.kubernetes.render import plan_on_kubernetes
from support.kube_client_support import (
    SEED_PYTORCHJOB,
    ClientClusterThread,
    Operator,
    running,
    status_body,
)
from support.upstream_crds import upstream_crd

EXAMPLES = Path(__file__).parents[4] / "examples"


def ray_cluster(name: str) -> dict[str, Any]:
    """The RayCluster example as KubeRay's users write it, in ``ray.io/v1``."""
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / "ray" / "raycluster.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["apiVersion"] = "ray.io/v1"
    doc["metadata"] = {"name": name}
    return doc


def pytorch_job(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SEED_PYTORCHJOB)
    doc["metadata"] = {"name": name}
    return doc


UPSTREAM = [
    pytest.param("RayCluster", "rayclusters", "ray.io", "v1", ray_cluster, id="ray.io"),
    pytest.param("PyTorchJob", "pytorchjobs", "kubeflow.org", "v1", pytorch_job, id="kubeflow.org"),
]


def serve(cluster: ClientClusterThread, *kinds: tuple[str, str, str]) -> None:
    """The upstream CRDs of ``(kind, group, version)`` installed, as KubeRay's or Kubeflow's
    install leaves them (the operator serves those objects with --serve-upstream-groups)."""
    cluster.cluster.install_crds([upstream_crd(*k) for k in kinds])


def apply(
    cluster: ClientClusterThread, group: str, version: str, plural: str, ns: str, body: Any
) -> dict[str, Any]:
    """The object created in its upstream group, as ``kubectl apply`` would."""
    created: dict[str, Any] = cluster.create(
        f"/apis/{group}/{version}/namespaces/{ns}/{plural}", body
    )
    return created


def play_pods(cluster: ClientClusterThread, path: str) -> list[dict[str, Any]]:
    """The pods the operator builds for the job at ``path``, created as it would."""
    job = load_job(cluster.get(path))
    return [
        cluster.create(
            f"/api/v1/namespaces/{job.namespace}/pods", build_pod(job, r, owner=Owner.of(job))
        )
        for r in plan_on_kubernetes(job).replicas
    ]


def calls_to(cluster: ClientClusterThread, plural: str, since: int = 0) -> list[tuple[str, str]]:
    """(method, group) of each request the client made for ``plural`` (watches as WATCH)."""
    return [
        ("WATCH" if c.watch else c.method, str(c.group))
        for c in cluster.client_calls()[since:]
        if c.plural == plural
    ]


@pytest.mark.parametrize(("kind", "plural", "group", "version", "manifest"), UPSTREAM)
def test_a_job_in_a_served_upstream_group_is_found_listed_patched_and_deleted_there(
    cluster: ClientClusterThread,
    backend: KubernetesBackend,
    operator: Operator,
    kind: str,
    plural: str,
    group: str,
    version: str,
    manifest: Any,
) -> None:
    cluster.create_namespaces("ml")
    serve(cluster, (kind, group, version))
    created = apply(cluster, group, version, plural, "ml", manifest("up"))
    backend.submit(load_one(ray_cluster("ours")), SubmitOptions(namespace="ml"))

    view = backend.get("up", "ml")
    assert (view.kind, view.name, view.job.metadata.uid) == (kind, "up", created["metadata"]["uid"])
    # Shown (`describe`, `get -o yaml`) in the group and version it was found in.
    assert view.job.api_version == view.job.to_wire()["apiVersion"] == f"{group}/{version}"
    # Looked for in kubemill's group first (not there), then found in the upstream one.
    assert calls_to(cluster, plural)[-2:] == [("GET", "kubemill.dev"), ("GET", group)]
    # Its replicas and logs, from the pods it controls.
    first = play_pods(cluster, f"/apis/{group}/{version}/namespaces/ml/{plural}/up")[0]
    pod, container = first["metadata"]["name"], first["spec"]["containers"][0]["name"]
    cluster.patch(
        f"/api/v1/namespaces/ml/pods/{pod}/status", {"status": running(container, ip="10.0.0.7")}
    )
    operator.start_log("ml", pod, container).write("upstream says hello")
    assert (pod, "Running") in [(r.name, r.phase) for r in backend.get("up", "ml").replicas]
    lines = backend.logs("up", "ml", replica=pod)
    assert [(line.replica, line.text) for line in lines] == [(pod, "upstream says hello")]

    listed = backend.list("ml")
    assert sorted((v.kind, v.name) for v in listed) == sorted(
        [(kind, "up"), ("RayCluster", "ours")]
    )
    assert [v.name for v in backend.list()].count("up") == 1

    before = len(cluster.client_calls())
    backend.wait("up", "ml", timeout=0.3)  # not finished: watched in its group until then
    backend.suspend("up", "ml")
    backend.events("up", "ml")
    after = calls_to(cluster, plural, before)
    assert ("WATCH", group) in after and ("PATCH", group) in after, after
    assert {g for method, g in after if method != "GET"} == {group}, after
    stored = cluster.get(f"/apis/{group}/{version}/namespaces/ml/{plural}/up")
    assert load_one(stored).run_policy.suspend is True

    before = len(cluster.client_calls())
    backend.delete("up", "ml")
    assert ("DELETE", group) in calls_to(cluster, plural, before)
    assert cluster.get_or_none(f"/apis/{group}/{version}/namespaces/ml/{plural}/up") is None
    assert [v.name for v in backend.list("ml")] == ["ours"]
    with pytest.raises(JobNotFound, match=f"{group}/{version}"):
        backend.get("up", "ml")


def test_the_sdk_scales_a_kuberay_ray_cluster_in_its_group(
    cluster: ClientClusterThread, kubeconfig: Path
) -> None:
    cluster.create_namespaces("ml")
    serve(cluster, ("RayCluster", "ray.io", "v1"))
    apply(cluster, "ray.io", "v1", "rayclusters", "ml", ray_cluster("rc"))
    client = JobClient("kubernetes", kubeconfig=str(kubeconfig), namespace="ml")

    view = client.scale("rc", 3)

    assert [g.count for g in view.job.spec.worker_group_specs] == [3]
    stored = cluster.get("/apis/ray.io/v1/namespaces/ml/rayclusters/rc")
    assert stored["apiVersion"] == "ray.io/v1"
    assert stored["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    assert ("PATCH", "ray.io") in calls_to(cluster, "rayclusters")
    client.delete("rc")
    assert cluster.get_or_none("/apis/ray.io/v1/namespaces/ml/rayclusters/rc") is None


@pytest.mark.parametrize(("kind", "plural", "group", "version", "manifest"), UPSTREAM)
def test_a_group_the_cluster_does_not_serve_is_never_asked_and_is_no_error(
    cluster: ClientClusterThread,
    backend: KubernetesBackend,
    kind: str,
    plural: str,
    group: str,
    version: str,
    manifest: Any,
) -> None:
    cluster.create_namespaces("ml")
    backend.submit(load_one(ray_cluster("ours")), SubmitOptions(namespace="ml"))

    with pytest.raises(JobNotFound) as missing:
        backend.get("up", "ml")
    assert "kubemill.dev/v1)" in str(missing.value)
    assert group not in str(missing.value)
    assert [v.name for v in backend.list("ml")] == ["ours"]
    assert backend.get("ours", "ml").kind == "RayCluster"
    with pytest.raises(JobNotFound, match=f"does not serve {plural}.{group}"):
        backend.get(f"{plural}.{group}/up", "ml")
    with pytest.raises(JobNotFound):
        backend.delete("up", "ml")

    asked = {c.group for c in cluster.client_calls() if c.plural}
    assert group not in asked, asked
    discovery = [c for c in cluster.client_calls() if c.path == "/apis"]
    assert len(discovery) == 1  # read once for the client's life


def test_a_served_group_without_the_kinds_crd_is_no_error(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    """KubeRay's group served for RayClusters only (no RayJob CRD): looking for a name
    among RayJobs too, and listing them, is a 404 the client passes over."""
    cluster.create_namespaces("ml")
    serve(cluster, ("RayCluster", "ray.io", "v1"))
    apply(cluster, "ray.io", "v1", "rayclusters", "ml", ray_cluster("rc"))
    assert backend.get("rc", "ml").kind == "RayCluster"
    assert [v.name for v in backend.list("ml")] == ["rc"]
    with pytest.raises(JobNotFound, match=r"ray\.io/v1"):
        backend.get("other", "ml")


def test_a_name_in_our_group_and_in_an_upstream_one_is_ours_unless_qualified(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    cluster.create_namespaces("ml")
    serve(cluster, ("RayCluster", "ray.io", "v1"))
    upstream = apply(cluster, "ray.io", "v1", "rayclusters", "ml", ray_cluster("rc"))
    ours = backend.submit(load_one(ray_cluster("rc")), SubmitOptions(namespace="ml"))
    assert ours.job.metadata.uid != upstream["metadata"]["uid"]

    assert backend.get("rc", "ml").job.metadata.uid == ours.job.metadata.uid
    assert backend.get("raycluster/rc", "ml").job.metadata.uid == ours.job.metadata.uid
    qualified = backend.get("rayclusters.ray.io/rc", "ml")
    assert qualified.job.metadata.uid == upstream["metadata"]["uid"]
    assert (
        backend.get("rayclusters.kubemill.dev/rc", "ml").job.metadata.uid == ours.job.metadata.uid
    )
    # Both listed: two objects, two jobs.
    assert sorted(v.job.metadata.uid for v in backend.list("ml")) == sorted(
        [ours.job.metadata.uid, upstream["metadata"]["uid"]]
    )

    backend.delete("rc", "ml")  # ours, and ours only
    assert cluster.get_or_none("/apis/kubemill.dev/v1/namespaces/ml/rayclusters/rc") is None
    assert cluster.get_or_none("/apis/ray.io/v1/namespaces/ml/rayclusters/rc") is not None
    assert backend.get("rc", "ml").job.metadata.uid == upstream["metadata"]["uid"]


def test_a_name_in_our_group_is_ours_whatever_kind_shares_it_upstream(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    """Found in our group, a name costs no request upstream (nor discovery); upstream jobs
    of different kinds sharing a name are an error naming each, qualified."""
    cluster.create_namespaces("ml")
    serve(cluster, ("PyTorchJob", "kubeflow.org", "v1"), ("TFJob", "kubeflow.org", "v1"))
    apply(cluster, "kubeflow.org", "v1", "pytorchjobs", "ml", pytorch_job("x"))
    backend.submit(load_one(ray_cluster("x")), SubmitOptions(namespace="ml"))
    before = len(cluster.client_calls())

    assert backend.get("x", "ml").kind == "RayCluster"
    asked = [c.path for c in cluster.client_calls()[before:]]
    assert not [p for p in asked if not p.startswith(("/apis/kubemill.dev/", "/api/v1/"))], asked
    assert backend.get("pytorchjob/x", "ml").kind == "PyTorchJob"

    tf = pytorch_job("y")
    tf["kind"] = "TFJob"
    tf["spec"] = {"tfReplicaSpecs": tf["spec"].pop("pytorchReplicaSpecs")}
    tf["spec"]["tfReplicaSpecs"].pop("Master")
    for container in tf["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]:
        container["name"] = "tensorflow"
    apply(cluster, "kubeflow.org", "v1", "tfjobs", "ml", tf)
    apply(cluster, "kubeflow.org", "v1", "pytorchjobs", "ml", pytorch_job("y"))
    with pytest.raises(
        SubstrateError, match=r"say which: tfjobs\.kubeflow\.org/y or pytorchjobs\.kubeflow\.org/y"
    ):
        backend.get("y", "ml")
    assert backend.get("tfjobs.kubeflow.org/y", "ml").kind == "TFJob"


def test_an_upstream_object_kubemill_cannot_load_is_left_out_of_the_listing(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    """Another operator's RayCluster using the in-tree autoscaler (which kubemill refuses)
    does not hide the other jobs; ``get`` of it says what is wrong, with the field path."""
    cluster.create_namespaces("ml")
    serve(cluster, ("RayCluster", "ray.io", "v1"))
    theirs = ray_cluster("autoscaled")
    theirs["spec"]["enableInTreeAutoscaling"] = True
    apply(cluster, "ray.io", "v1", "rayclusters", "ml", theirs)
    apply(cluster, "ray.io", "v1", "rayclusters", "ml", ray_cluster("rc"))

    assert [v.name for v in backend.list("ml")] == ["rc"]
    with pytest.raises(SubstrateError, match=r"spec\.enableInTreeAutoscaling"):
        backend.get("autoscaled", "ml")


def test_an_upstream_group_rbac_does_not_let_us_read_is_passed_over(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    """A cluster serving Kubeflow's group for its own operator, and a user whose RBAC grants
    kubemill's group alone: kubemill's jobs are found and listed as before; a name found
    nowhere says which upstream resources could not be read."""
    cluster.create_namespaces("ml")
    serve(cluster, ("PyTorchJob", "kubeflow.org", "v1"))
    refused = cluster.answer(
        "GET",
        r"^/apis/kubeflow\.org/",
        403,
        status_body(403, "Forbidden", 'pytorchjobs.kubeflow.org is forbidden: User "u"'),
    )
    backend.submit(load_one(ray_cluster("ours")), SubmitOptions(namespace="ml"))

    assert backend.get("ours", "ml").kind == "RayCluster"
    assert [v.name for v in backend.list("ml")] == ["ours"]
    with pytest.raises(JobNotFound, match=r"not allowed to read [a-z]+\.kubeflow\.org"):
        backend.get("other", "ml")
    assert refused.hits >= 2  # asked (the listing, the lookup), refused, passed over


def test_a_listing_loads_each_object_once(
    cluster: ClientClusterThread, backend: KubernetesBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing's filter of upstream objects, the replicas' plan and the view all read
    the job: one load (a whole validation) serves them."""
    from kubemill.substrates.kubernetes.client import kinds

    cluster.create_namespaces("ml")
    serve(cluster, ("RayCluster", "ray.io", "v1"))
    apply(cluster, "ray.io", "v1", "rayclusters", "ml", ray_cluster("rc"))
    backend.submit(load_one(pytorch_job("ours")), SubmitOptions(namespace="ml"))
    loaded: list[str] = []

    def counted(raw: Any) -> Any:
        loaded.append(raw["metadata"]["name"])
        return load_job(raw)

    monkeypatch.setattr(kinds, "load_job", counted)
    assert sorted(v.name for v in backend.list("ml")) == ["ours", "rc"]
    assert sorted(loaded) == ["ours", "rc"]
