"""The test cluster refuses (or prunes) what a real kube-apiserver refuses (or prunes).

Every test sends a request a real API server would reject or change, and checks the
answer: the status code, the ``Status`` body's reason and field paths, and what is stored.
No operator runs here; the test is the only client.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from kubemill.kinds import crds
from support.kmock_cluster import APPLY_PATCH, SERVICE_CIDR, ApiError, ClusterThread
from support.operator_jobs import tfjob
from support.operator_support import container_status
from support.upstream_crds import kubeflow_crd
from support.waiting import eventually

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture(scope="module")
def served() -> Iterator[ClusterThread]:
    with ClusterThread() as cluster:
        for crd in crds():
            cluster.create(CRDS, crd)
        cluster.create(CRDS, kubeflow_crd("PyTorchJob"))
        yield cluster


@pytest.fixture
def ns(served: ClusterThread) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    served.create("/api/v1/namespaces", {"metadata": {"name": name}})
    return name


def tfjobs(ns: str, name: str = "") -> str:
    base = f"/apis/kubemill.dev/v1/namespaces/{ns}/tfjobs"
    return f"{base}/{name}" if name else base


def pods(ns: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{ns}/pods"
    return f"{base}/{name}" if name else base


def refused(call: Any, *args: Any, status: int = 422, **kwargs: Any) -> dict[str, Any]:
    """Send the request, expect an error ``status``; the Status body it came with."""
    with pytest.raises(ApiError) as caught:
        call(*args, **kwargs)
    assert caught.value.status == status, caught.value.body
    body: dict[str, Any] = json.loads(caught.value.body)
    assert body["kind"] == "Status" and body["code"] == status
    return body


def fields(status: dict[str, Any]) -> dict[str, str]:
    """field path -> cause message of a 422 Status."""
    return {c["field"]: c["message"] for c in status["details"]["causes"]}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"]}]},
    }
    body["spec"].update(spec)
    return body


# --- custom resources: schema validation ---------------------------------------------------------


def test_a_custom_resource_that_breaks_its_schema_is_refused_with_every_field_path(
    served: ClusterThread, ns: str
) -> None:
    job = tfjob("bad", workers=1, run_policy={"backoffLimit": -1, "cleanPodPolicy": "Sometimes"})
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"
    status = refused(served.create, tfjobs(ns), job)
    assert status["reason"] == "Invalid"
    assert status["details"] == {
        "name": "bad",
        "group": "kubemill.dev",
        "kind": "TFJob",
        "causes": status["details"]["causes"],
    }
    assert fields(status) == {
        "spec.runPolicy.backoffLimit": "Invalid value: -1: spec.runPolicy.backoffLimit in body "
        "should be greater than or equal to 0",
        "spec.runPolicy.cleanPodPolicy": 'Unsupported value: "Sometimes": supported values: '
        '"None", "Running", "All"',
        "spec.tfReplicaSpecs.Worker.replicas": 'Invalid value: "string": '
        'spec.tfReplicaSpecs.Worker.replicas in body must be of type integer: "string"',
    }
    assert status["message"].startswith('TFJob.kubemill.dev "bad" is invalid: [')
    assert served.get_or_none(tfjobs(ns, "bad")) is None


def test_required_fields_min_properties_and_formats_are_checked(
    served: ClusterThread, ns: str
) -> None:
    no_spec = {"apiVersion": "kubemill.dev/v1", "kind": "TFJob", "metadata": {"name": "a"}}
    assert fields(refused(served.create, tfjobs(ns), no_spec)) == {"spec": "Required value"}
    empty = tfjob("b")
    empty["spec"]["tfReplicaSpecs"] = {}
    assert (
        "should have at least 1 properties"
        in fields(refused(served.create, tfjobs(ns), empty))["spec.tfReplicaSpecs"]
    )
    served.create(tfjobs(ns), tfjob("c", workers=1))
    when = {"status": {"startTime": "yesterday"}}
    status = refused(served.patch, tfjobs(ns, "c") + "/status", when)
    assert fields(status) == {
        "status.startTime": 'Invalid value: "yesterday": status.startTime in body must be of '
        'type date-time: "yesterday"'
    }


def test_a_patch_that_makes_the_object_invalid_is_refused_and_nothing_changes(
    served: ClusterThread, ns: str
) -> None:
    created = served.create(tfjobs(ns), tfjob("p", workers=1))
    patch = {"spec": {"tfReplicaSpecs": {"Worker": {"restartPolicy": "Sometimes"}}}}
    status = refused(served.patch, tfjobs(ns, "p"), patch)
    assert list(fields(status)) == ["spec.tfReplicaSpecs.Worker.restartPolicy"]
    assert served.get(tfjobs(ns, "p")) == created


def test_an_update_is_validated_and_must_carry_a_resource_version(
    served: ClusterThread, ns: str
) -> None:
    created = served.create(tfjobs(ns), tfjob("u", workers=1))
    bad = copy.deepcopy(created)
    bad["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": -5}
    status = refused(served.request, "PUT", tfjobs(ns, "u"), bad)
    assert list(fields(status)) == ["spec.runPolicy.ttlSecondsAfterFinished"]
    unconditional = copy.deepcopy(created)
    del unconditional["metadata"]["resourceVersion"]
    status = refused(served.request, "PUT", tfjobs(ns, "u"), unconditional)
    assert fields(status) == {
        "metadata.resourceVersion": "Invalid value: 0: must be specified for an update"
    }


def test_status_writes_are_validated_against_the_status_schema(
    served: ClusterThread, ns: str
) -> None:
    served.create(tfjobs(ns), tfjob("st", workers=1))
    status = refused(
        served.patch,
        tfjobs(ns, "st") + "/status",
        {"status": {"conditions": [{"type": "Exploded", "status": "True"}]}},
    )
    assert list(fields(status)) == ["status.conditions[0].type"]


# --- custom resources: pruning ---------------------------------------------------------------


def test_unknown_fields_are_pruned_except_where_the_schema_preserves_them(
    served: ClusterThread, ns: str
) -> None:
    job = tfjob("prune", workers=1)
    job["spec"]["bogus"] = 1
    job["spec"]["runPolicy"] = {"backoffLimit": 1, "retries": 3, "suspend": None}
    container = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["madeUp"] = "x"
    container["securityContext"] = {"runAsUser": 1000, "futureField": True}
    job["metadata"]["bogus"] = "dropped"
    job["metadata"]["labels"] = {"kept": "yes"}
    job["extra"] = {"root": "level"}
    stored = served.create(tfjobs(ns), job)
    assert "bogus" not in stored["spec"] and "extra" not in stored
    assert stored["spec"]["runPolicy"] == {"backoffLimit": 1}  # unknown and null: gone
    kept = stored["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert "madeUp" not in kept
    assert kept["securityContext"] == {"runAsUser": 1000, "futureField": True}
    assert "bogus" not in stored["metadata"] and stored["metadata"]["labels"] == {"kept": "yes"}
    assert served.get(tfjobs(ns, "prune")) == stored


def test_kubeflow_status_keeps_only_the_published_replica_status_fields(
    served: ClusterThread, ns: str
) -> None:
    path = f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "up"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "template": {
                        "spec": {"containers": [{"name": "pytorch", "image": "example:latest"}]}
                    }
                }
            }
        },
    }
    served.create(path, job)
    counts = {"active": 1, "succeeded": 0, "failed": 0, "restarts": 2, "retiredRestarts": 1}
    written = served.patch(f"{path}/up/status", {"status": {"replicaStatuses": {"Master": counts}}})
    assert written["status"]["replicaStatuses"] == {
        "Master": {"active": 1, "succeeded": 0, "failed": 0}
    }


# --- the status subresource ------------------------------------------------------------------


def test_status_changes_only_through_the_status_subresource(served: ClusterThread, ns: str) -> None:
    job = tfjob("sub", workers=1)
    job["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    created = served.create(tfjobs(ns), job)
    assert "status" not in created  # a create ignores the status too
    main = served.patch(tfjobs(ns, "sub"), {"status": {"startTime": "2026-01-01T00:00:00Z"}})
    assert "status" not in main
    assert main["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    written = served.patch(
        tfjobs(ns, "sub") + "/status",
        {
            "metadata": {"labels": {"sneaky": "yes"}},
            "spec": {"runPolicy": {"suspend": True}},
            "status": {"startTime": "2026-01-01T00:00:00Z"},
        },
    )
    assert written["status"] == {"startTime": "2026-01-01T00:00:00Z"}
    assert written["spec"] == created["spec"] and "labels" not in written["metadata"]
    assert written["metadata"]["generation"] == 1


# --- built-in kinds --------------------------------------------------------------------------


def test_built_in_kinds_are_validated_against_the_official_schemas(
    served: ClusterThread, ns: str
) -> None:
    status = refused(served.create, pods(ns), {"metadata": {"name": "empty"}, "spec": {}})
    assert fields(status) == {"spec.containers": "Required value"}
    assert status["details"]["kind"] == "Pod"
    wrong = pod("wrong")
    wrong["spec"]["containers"][0]["ports"] = [{"containerPort": "http"}]
    assert list(fields(refused(served.create, pods(ns), wrong))) == [
        "spec.containers[0].ports[0].containerPort"
    ]
    config = {"metadata": {"name": "cm"}, "data": {"n": 1}}
    status = refused(served.create, f"/api/v1/namespaces/{ns}/configmaps", config)
    assert list(fields(status)) == ["data.n"]
    service = {"metadata": {"name": "Upper"}, "spec": {"ports": [{"port": 80}]}}
    status = refused(served.create, f"/api/v1/namespaces/{ns}/services", service)
    assert "DNS-1035 label" in fields(status)["metadata.name"]


def test_unknown_fields_of_built_in_kinds_are_dropped(served: ClusterThread, ns: str) -> None:
    body = pod("extra")
    body["spec"]["madeUp"] = True
    body["spec"]["containers"][0]["alsoMadeUp"] = 1
    body["metadata"]["notMeta"] = "x"
    stored = served.create(pods(ns), body)
    assert "madeUp" not in stored["spec"] and "alsoMadeUp" not in stored["spec"]["containers"][0]
    assert "notMeta" not in stored["metadata"]
    assert stored["status"] == {"phase": "Pending"}


# --- services: cluster IPs ----------------------------------------------------------------------


def services(ns: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{ns}/services"
    return f"{base}/{name}" if name else base


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


def test_a_service_gets_a_free_cluster_ip_in_the_range_unless_headless(
    served: ClusterThread, ns: str
) -> None:
    first = served.create(services(ns), service("one"))["spec"]
    second = served.create(services(ns), service("two", type="NodePort"))["spec"]
    headless = served.create(services(ns), service("none", clusterIP="None"))["spec"]
    named = served.create(services(ns), service("ext", type="ExternalName", externalName="a.b"))
    for spec in (first, second):
        assert ipaddress.ip_address(spec["clusterIP"]) in SERVICE_CIDR
        assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert first["clusterIP"] != second["clusterIP"]
    # The first address of the range is the kubernetes Service's.
    assert str(SERVICE_CIDR[1]) not in (first["clusterIP"], second["clusterIP"])
    assert (headless["clusterIP"], headless["clusterIPs"]) == ("None", ["None"])
    assert "clusterIP" not in named["spec"]
    # What a reader sees is what the create answered.
    assert served.get(services(ns, "one"))["spec"]["clusterIP"] == first["clusterIP"]


def test_a_cluster_ip_asked_for_must_be_valid_free_and_in_range(
    served: ClusterThread, ns: str
) -> None:
    taken = served.create(services(ns), service("taken"))["spec"]["clusterIP"]
    path = "spec.clusterIPs[0]"
    status = refused(served.create, services(ns), service("dup", clusterIP=taken))
    assert "provided IP is already allocated" in fields(status)[path]
    status = refused(served.create, services(ns), service("far", clusterIP="192.168.0.9"))
    assert "provided IP is not in the valid range" in fields(status)[path]
    status = refused(served.create, services(ns), service("bad", clusterIP="ten"))
    assert "must be a valid IP address" in fields(status)[path]
    assert served.get_or_none(services(ns, "dup")) is None
    served.delete(services(ns, "taken"))
    # Free again once its Service is gone.
    again = served.create(services(ns), service("dup", clusterIP=taken))
    assert again["spec"]["clusterIP"] == taken


def test_an_update_keeps_the_cluster_ip_and_may_not_change_it(
    served: ClusterThread, ns: str
) -> None:
    created = served.create(services(ns), service("kept"))
    address = created["spec"]["clusterIP"]
    replaced = copy.deepcopy(created)
    del replaced["spec"]["clusterIP"], replaced["spec"]["clusterIPs"]
    replaced["spec"]["ports"] = [{"port": 81}]
    updated = served.request("PUT", services(ns, "kept"), replaced)["spec"]
    assert (updated["clusterIP"], updated["clusterIPs"], updated["ports"][0]["port"]) == (
        address,
        [address],
        81,
    )
    other = next(str(ip) for ip in SERVICE_CIDR.hosts() if str(ip) != address)
    status = refused(served.patch, services(ns, "kept"), {"spec": {"clusterIP": other}})
    assert fields(status)["spec.clusterIPs[0]"].endswith("may not change once set")
    assert served.get(services(ns, "kept"))["spec"]["clusterIP"] == address


# --- concurrency, namespaces, names ----------------------------------------------------------


def test_a_stale_resource_version_gets_409_on_patch_update_and_delete(
    served: ClusterThread, ns: str
) -> None:
    created = served.create(tfjobs(ns), tfjob("cc", workers=1))
    stale = created["metadata"]["resourceVersion"]
    served.patch(tfjobs(ns, "cc"), {"metadata": {"labels": {"a": "b"}}})
    status = refused(
        served.patch,
        tfjobs(ns, "cc") + "/status",
        {"metadata": {"resourceVersion": stale}, "status": {"startTime": "2026-01-01T00:00:00Z"}},
        status=409,
    )
    assert status["reason"] == "Conflict"
    refused(served.request, "PUT", tfjobs(ns, "cc"), created, status=409)
    refused(
        served.request,
        "DELETE",
        tfjobs(ns, "cc"),
        {"preconditions": {"resourceVersion": stale}},
        status=409,
    )
    assert served.get(tfjobs(ns, "cc"))["metadata"]["labels"] == {"a": "b"}


def test_a_create_in_a_missing_namespace_is_404_until_the_namespace_exists(
    served: ClusterThread,
) -> None:
    missing = f"nope-{uuid.uuid4().hex[:6]}"
    status = refused(served.create, pods(missing), pod("p"), status=404)
    assert status["reason"] == "NotFound"
    assert status["message"] == f'namespaces "{missing}" not found'
    refused(served.create, tfjobs(missing), tfjob("j"), status=404)
    served.create("/api/v1/namespaces", {"metadata": {"name": missing}})
    assert served.create(pods(missing), pod("p"))["metadata"]["namespace"] == missing
    for existing in ("default", "kube-system"):
        assert served.get(f"/api/v1/namespaces/{existing}")["metadata"]["name"] == existing


def test_generate_name_makes_a_fresh_name_per_create(served: ClusterThread, ns: str) -> None:
    body = pod("")
    body["metadata"] = {"generateName": "gen-"}
    names = {served.create(pods(ns), body)["metadata"]["name"] for _ in range(3)}
    assert len(names) == 3
    assert all(n.startswith("gen-") and len(n) == len("gen-") + 5 for n in names)
    status = refused(served.create, pods(ns), {**body, "metadata": {}})
    assert fields(status) == {"metadata.name": "Required value: name or generateName is required"}


def test_names_and_uids_are_immutable(served: ClusterThread, ns: str) -> None:
    created = served.create(tfjobs(ns), tfjob("same", workers=1))
    renamed = copy.deepcopy(created)
    renamed["metadata"]["name"] = "other"
    status = refused(served.request, "PUT", tfjobs(ns, "same"), renamed, status=400)
    assert "does not match the name on the URL" in status["message"]
    refused(served.patch, tfjobs(ns, "same"), {"metadata": {"uid": str(uuid.uuid4())}}, status=409)
    assert served.get(tfjobs(ns, "same"))["metadata"]["uid"] == created["metadata"]["uid"]


# --- pods ------------------------------------------------------------------------------------


def test_a_pod_spec_changes_only_where_kubernetes_allows(served: ClusterThread, ns: str) -> None:
    served.create(pods(ns), pod("imm", activeDeadlineSeconds=60))
    containers = [{"name": "main", "image": "busybox", "command": ["false"]}]
    status = refused(served.patch, pods(ns, "imm"), {"spec": {"containers": containers}})
    assert list(fields(status)) == ["spec"]
    assert fields(status)["spec"].startswith("Forbidden: pod updates may not change fields")
    status = refused(served.patch, pods(ns, "imm"), {"spec": {"activeDeadlineSeconds": 120}})
    assert list(fields(status)) == ["spec.activeDeadlineSeconds"]
    status = refused(served.patch, pods(ns, "imm"), {"spec": {"nodeName": "node-9"}})
    assert list(fields(status)) == ["spec"]  # only a binding places a pod
    containers[0].update(image="busybox:2", command=["true"])
    changed = served.patch(
        pods(ns, "imm"), {"spec": {"containers": containers, "activeDeadlineSeconds": 30}}
    )
    assert changed["spec"]["containers"][0]["image"] == "busybox:2"
    assert changed["spec"]["activeDeadlineSeconds"] == 30


def test_deleting_a_running_pod_leaves_it_terminating_until_its_kubelet_finishes(
    served: ClusterThread, ns: str
) -> None:
    served.create(pods(ns), pod("run", terminationGracePeriodSeconds=45))
    served.bind(ns, "run")
    answer = served.delete(pods(ns, "run"))
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 45
    still = served.get(pods(ns, "run"))
    assert still["metadata"]["deletionTimestamp"]
    assert served.cluster.terminating(ns) == ["run"]
    served.delete(pods(ns, "run"))  # a second delete changes nothing
    assert served.get(pods(ns, "run"))["metadata"] == still["metadata"]
    assert served.finish_terminating(ns) == ["run"]
    assert served.get_or_none(pods(ns, "run")) is None


def test_a_zero_grace_delete_an_unscheduled_pod_and_a_finished_pod_go_at_once(
    served: ClusterThread, ns: str
) -> None:
    served.create(pods(ns), pod("forced"))
    served.bind(ns, "forced")
    served.delete(pods(ns, "forced"))
    served.delete(pods(ns, "forced"), grace=0)
    assert served.get_or_none(pods(ns, "forced")) is None
    served.create(pods(ns), pod("unscheduled"))
    served.delete(pods(ns, "unscheduled"))
    assert served.get_or_none(pods(ns, "unscheduled")) is None
    served.create(pods(ns), pod("done"))
    served.bind(ns, "done")
    served.patch(pods(ns, "done") + "/status", {"status": {"phase": "Succeeded"}})
    served.delete(pods(ns, "done"))
    assert served.get_or_none(pods(ns, "done")) is None


def test_finalizers_hold_a_deleted_object_until_they_are_removed(
    served: ClusterThread, ns: str
) -> None:
    body = tfjob("fin", workers=1)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    served.create(tfjobs(ns), body)
    served.delete(tfjobs(ns, "fin"))
    held = served.get(tfjobs(ns, "fin"))
    assert held["metadata"]["deletionTimestamp"]
    status = refused(
        served.patch,
        tfjobs(ns, "fin"),
        {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}},
    )
    assert list(fields(status)) == ["metadata.finalizers"]
    served.patch(tfjobs(ns, "fin"), {"metadata": {"finalizers": None}})
    assert served.get_or_none(tfjobs(ns, "fin")) is None

    # A pod goes once its kubelet is done *and* its finalizers are gone, in either order.
    held_pod = pod("held")
    held_pod["metadata"]["finalizers"] = ["example.com/hold"]
    served.create(pods(ns), held_pod)
    served.bind(ns, "held")
    served.delete(pods(ns, "held"))
    served.patch(pods(ns, "held"), {"metadata": {"finalizers": None}})
    assert served.get(pods(ns, "held"))["metadata"]["deletionGracePeriodSeconds"] == 30
    served.create(pods(ns), {**held_pod, "metadata": {"name": "held2", "finalizers": ["x/y"]}})
    served.bind(ns, "held2")
    served.delete(pods(ns, "held2"))
    assert served.finish_terminating(ns) == ["held"]
    assert served.get(pods(ns, "held2"))["metadata"]["deletionGracePeriodSeconds"] == 0
    served.patch(pods(ns, "held2"), {"metadata": {"finalizers": None}})
    assert served.get_or_none(pods(ns, "held2")) is None


def test_the_garbage_collector_deletes_dependents_gracefully_and_a_kubelet_can_finish_them(
    served: ClusterThread, ns: str
) -> None:
    owner = served.create(tfjobs(ns), tfjob("own", workers=1))
    ref = {
        "apiVersion": "kubemill.dev/v1",
        "kind": "TFJob",
        "name": "own",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    for name in ("child-a", "child-b"):
        body = pod(name)
        body["metadata"]["ownerReferences"] = [ref]
        served.create(pods(ns), body)
    served.bind(ns, "child-a")
    served.delete(tfjobs(ns, "own"))
    assert served.get_or_none(pods(ns, "child-b")) is None  # never scheduled: gone at once
    assert served.cluster.terminating(ns) == ["child-a"]
    served.cluster.kubelet_finishes_after = 0.05
    try:
        served.create(pods(ns), pod("later"))
        served.bind(ns, "later")
        served.delete(pods(ns, "later"))
        assert served.get(pods(ns, "later"))["metadata"]["deletionTimestamp"]
        eventually(lambda: served.get_or_none(pods(ns, "later")) is None, what="kubelet")
    finally:
        served.cluster.kubelet_finishes_after = None
    assert served.get(pods(ns, "child-a"))["metadata"]["deletionTimestamp"]


def test_a_crd_without_a_schema_is_refused(served: ClusterThread) -> None:
    crd = copy.deepcopy(next(c for c in crds() if c["spec"]["names"]["kind"] == "TFJob"))
    crd["metadata"]["name"] = "tfjobs.example.com"
    crd["spec"]["group"] = "example.com"
    del crd["spec"]["versions"][0]["schema"]
    status = refused(served.create, CRDS, crd)
    assert fields(status) == {
        "spec.versions[0].schema.openAPIV3Schema": "Required value: schemas are required"
    }


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                    "port": {"x-kubernetes-int-or-string": True},
                                    "note": {"type": "string", "nullable": True},
                                    "label": {"type": "string"},
                                    "mode": {
                                        "type": "string",
                                        "anyOf": [{"enum": ["a", "b"]}, {"pattern": "^x-"}],
                                    },
                                    "ratio": {
                                        "type": "number",
                                        "allOf": [{"minimum": 0}, {"maximum": 1}],
                                    },
                                    "template": {
                                        "type": "object",
                                        "x-kubernetes-embedded-resource": True,
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}
"""A CRD using the structural-schema keywords kubemill's own CRDs do not (all at once)."""


def test_int_or_string_nullable_embedded_resources_any_of_and_all_of(
    served: ClusterThread, ns: str
) -> None:
    served.create(CRDS, WIDGET_CRD)
    widgets = f"/apis/example.com/v1/namespaces/{ns}/widgets"

    def widget(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": spec,
        }

    status = refused(served.create, widgets, widget("w", size=11, port=True, mode="c", ratio=2))
    found = fields(status)
    assert set(found) == {"spec.size", "spec.port", "spec.mode", "spec.ratio"}, found
    assert found["spec.size"].endswith("should be less than or equal to 10")
    assert found["spec.port"].endswith('must be of type integer,string: "boolean"')
    assert found["spec.ratio"].endswith("should be less than or equal to 1")

    template = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inner", "bogus": 1},
        "data": {"a": "b"},
    }
    stored = served.create(
        widgets,
        widget("ok", size=3, port="http", note=None, label=None, mode="x-1", template=template),
    )
    assert stored["spec"] == {
        "size": 3,
        "port": "http",
        "note": None,  # nullable: kept
        "mode": "x-1",
        "template": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "inner"},
            "data": {"a": "b"},
        },
    }
    no_kind = widget("nokind", size=1, template={"apiVersion": "v1", "data": {}})
    assert fields(refused(served.create, widgets, no_kind)) == {
        "spec.template.kind": "Required value: must not be empty"
    }
    assert fields(refused(served.create, widgets, widget("nosize"))) == {
        "spec.size": "Required value"
    }


# --- pods/exec -------------------------------------------------------------------------------

V4 = "v4.channel.k8s.io"


def running_pod(
    served: ClusterThread, ns: str, name: str, *, env: list[dict[str, Any]] | None = None
) -> None:
    """A pod bound to a node whose kubelet reports its container running."""
    body = pod(name)
    body["spec"]["containers"][0]["env"] = env or []
    served.create(pods(ns), body)
    served.bind(ns, name)
    status = {"phase": "Running", "containerStatuses": [container_status("main", phase="Running")]}
    served.patch(pods(ns, name) + "/status", {"status": status})


def exec_path(ns: str, name: str, *command: str, **flags: str) -> str:
    query = [("command", word) for word in command] + list(flags.items())
    return f"{pods(ns, name)}/exec?{urllib.parse.urlencode(query)}"


def open_exec(
    served: ClusterThread, path: str, protocols: tuple[str, ...] = (V4,)
) -> websocket.WebSocket:
    return websocket.create_connection(
        "ws" + served.url.removeprefix("http") + path, subprotocols=list(protocols), timeout=60
    )


def channels(ws: websocket.WebSocket) -> list[tuple[int, bytes]]:
    """Every frame until the server closes, as (channel, bytes), adjacent ones joined."""
    frames: list[tuple[int, bytes]] = []
    while True:
        opcode, data = ws.recv_data()
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return frames
        channel, payload = data[0], bytes(data[1:])
        if frames and frames[-1][0] == channel:
            frames[-1] = (channel, frames[-1][1] + payload)
        else:
            frames.append((channel, payload))


def streams(frames: list[tuple[int, bytes]]) -> dict[int, bytes]:
    joined: dict[int, bytes] = {}
    for channel, payload in frames:
        joined[channel] = joined.get(channel, b"") + payload
    return joined


def exec_calls(served: ClusterThread, ns: str) -> list[tuple[str, str, str | None, int]]:
    return [
        (c.verb, c.resource, c.name, c.status)
        for c in served.calls()
        if c.namespace == ns and c.subresource == "exec"
    ]


def test_exec_is_refused_as_the_api_server_and_kubelet_refuse_it(
    served: ClusterThread, ns: str
) -> None:
    def message(path: str, status: int) -> str:
        body = refused(served.request, "GET", path, status=status)
        return str(body["message"])

    assert message(exec_path(ns, "ghost", "true", stdout="true"), 404) == 'pods "ghost" not found'
    served.create(pods(ns), pod("unbound"))
    assert "does not have a host assigned" in message(
        exec_path(ns, "unbound", "true", stdout="true"), 400
    )
    served.bind(ns, "unbound")  # bound, still Pending: its container does not run
    assert 'container not found ("main")' in message(
        exec_path(ns, "unbound", "true", stdout="true"), 400
    )
    served.create(pods(ns), pod("done"))
    served.bind(ns, "done")
    served.patch(pods(ns, "done") + "/status", {"status": {"phase": "Succeeded"}})
    assert "completed pod; current phase is Succeeded" in message(
        exec_path(ns, "done", "true", stdout="true"), 400
    )
    running_pod(served, ns, "up")
    assert message(exec_path(ns, "up", "true", stdout="true", container="side"), 400) == (
        "container side is not valid for pod up"
    )
    assert message(exec_path(ns, "up", stdout="true"), 400) == (
        "you must specify at least one command for the container"
    )
    assert message(exec_path(ns, "up", "true"), 400) == (
        "you must specify at least 1 of stdin, stdout, stderr"
    )
    assert message(exec_path(ns, "up", "true", stdout="yes"), 400).startswith(
        'stdout: Invalid value: "yes"'
    )
    assert message(exec_path(ns, "up", "true", stdout="true"), 400) == "Upgrade request required"
    post = refused(served.request, "POST", exec_path(ns, "up", "true", stdout="1"), status=400)
    assert post["message"] == "Upgrade request required"
    two = pod("two")
    two["spec"]["containers"].append({"name": "side", "image": "busybox"})
    served.create(pods(ns), two)
    assert message(exec_path(ns, "two", "true", stdout="1"), 400) == (
        "a container name must be specified for pod two, choose one of: [main side]"
    )
    with pytest.raises(websocket.WebSocketBadStatusException) as caught:
        open_exec(served, exec_path(ns, "up", "true", stdout="1"), protocols=("base64.k8s.io",))
    assert caught.value.status_code == 400
    # Logged as the real server's audit logs them, with the pod's name: ``get`` on
    # ``pods/exec`` for a GET (RBAC checks ``create`` on it as well), ``create`` for the POST.
    assert [(verb, resource) for verb, resource, _, _ in exec_calls(served, ns)] == [
        *[("get", "pods/exec")] * 9,
        ("create", "pods/exec"),
        *[("get", "pods/exec")] * 2,
    ]
    assert {(c.method, c.verbs_checked) for c in served.calls() if c.subresource == "exec"} == {
        ("GET", ("get", "create")),
        ("POST", ("create",)),
    }
    assert [(name, code) for _, _, name, code in exec_calls(served, ns)][:2] == [
        ("ghost", 404),
        ("unbound", 400),
    ]


def test_exec_streams_stdout_stderr_and_a_final_status_over_v4(
    served: ClusterThread, ns: str
) -> None:
    running_pod(served, ns, "talk")
    script = "echo out; echo err >&2; echo more; exit 3"
    # kubernetes clients offer v5 first; the test server answers v4, as older servers do
    ws = open_exec(
        served,
        exec_path(ns, "talk", "/bin/sh", "-c", script, stdout="true", stderr="true"),
        protocols=("v5.channel.k8s.io", V4),
    )
    assert ws.getsubprotocol() == V4
    frames = channels(ws)
    assert frames[-1][0] == 3 and all(channel != 3 for channel, _ in frames[:-1])
    assert streams(frames)[1] == b"out\nmore\n" and streams(frames)[2] == b"err\n"
    assert json.loads(frames[-1][1]) == {
        "metadata": {},
        "status": "Failure",
        # containerd's wording: Go prints the argv as [a b c]
        "message": "command terminated with non-zero exit code: error executing command "
        f"[/bin/sh -c {script}], exit code 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }
    ws = open_exec(served, exec_path(ns, "talk", "echo", "fine", stdout="true", stderr="true"))
    frames = channels(ws)
    assert frames == [(1, b"fine\n"), (3, b'{"metadata":{},"status":"Success"}')]
    # stdin on channel 0; a signal's death is 128 + the signal, as the runtime reports it
    ws = open_exec(served, exec_path(ns, "talk", "head", "-c", "5", stdin="1", stdout="1"))
    ws.send_binary(b"\x00hello, more than five")
    assert streams(channels(ws))[1] == b"hello"
    ws = open_exec(served, exec_path(ns, "talk", "/bin/sh", "-c", "kill -9 $$", stdout="1"))
    cause = json.loads(streams(channels(ws))[3])["details"]["causes"][0]
    assert cause == {"reason": "ExitCode", "message": "137"}
    # with a tty (none here) stderr is the terminal too: one stream
    ws = open_exec(
        served,
        exec_path(ns, "talk", "/bin/sh", "-c", "echo a >&2", stdout="1", stderr="1", tty="1"),
    )
    assert streams(channels(ws))[1] == b"a\n"
    ws = open_exec(served, exec_path(ns, "talk", "no-such-program", stdout="1", stderr="1"))
    found = streams(channels(ws))
    assert b"no-such-program" in found[2]
    assert json.loads(found[3])["details"]["causes"][0]["message"] == "127"
    assert all(code == 101 for _, _, _, code in exec_calls(served, ns))


def test_exec_runs_in_the_pods_own_environment(served: ClusterThread, ns: str) -> None:
    env = [
        {"name": "ROLE", "value": "worker"},
        {"name": "FROM_FIELD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    running_pod(served, ns, "env-a", env=env)
    running_pod(served, ns, "env-b")
    served.cluster.exec_environment[(ns, "env-b")] = {"ADDED_BY_TEST": "yes"}
    show = (
        'echo "$HOSTNAME|$ROLE|${FROM_FIELD-unset}|${ADDED_BY_TEST-unset}|$PWD|$TMPDIR|'
        '$OMPI_MCA_btl_vader_backing_directory"'
    )

    def seen(name: str) -> list[str]:
        ws = open_exec(served, exec_path(ns, name, "/bin/sh", "-c", show, stdout="1"))
        return streams(channels(ws))[1].decode().strip().split("|")

    a, b = seen("env-a"), seen("env-b")
    assert a[:4] == ["env-a", "worker", "unset", "unset"]
    assert b[:4] == ["env-b", "", "unset", "yes"]
    assert a[5] == a[6] and b[5] == b[6]  # the TMPDIR is the vader backing directory
    assert len({a[4], a[5], b[4], b[5]}) == 4  # a working dir and a TMPDIR per pod
    assert seen("env-a") == a  # the same pod keeps them


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_exec_processes_stop_when_the_client_closes_and_when_the_cluster_stops(
    served: ClusterThread, ns: str
) -> None:
    running_pod(served, ns, "sleepy")
    start = exec_path(ns, "sleepy", "/bin/sh", "-c", "sleep 300 & echo $!; wait", stdout="1")
    ws = open_exec(served, start)
    _, first = ws.recv_data()
    pid = int(first[1:])
    assert alive(pid)
    ws.close()
    eventually(lambda: not alive(pid), what="the exec'd process to stop")

    with ClusterThread() as other:
        running_pod(other, "default", "sleepy")
        ws = open_exec(other, start.replace(ns, "default"))
        _, first = ws.recv_data()
        pid = int(first[1:])
        assert alive(pid)
        root = other.cluster.exec_root
        assert root is not None and root.is_dir()
    assert not alive(pid)
    assert not root.exists()
    ws.close()


# --- server-side apply -----------------------------------------------------------------------


def apply(
    served: ClusterThread, path: str, body: Any, *, manager: str | None = "kubemill", **params: str
) -> Any:
    """``PATCH`` with ``application/apply-patch+yaml``, as kubectl apply --server-side."""
    if manager is not None:
        params["fieldManager"] = manager
    return served.request("PATCH", path, body, params=params, content_type=APPLY_PATCH)


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """manager -> its fieldsV1."""
    return {e["manager"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_apply_needs_a_field_manager(served: ClusterThread, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    status = refused(apply, served, path, config_map("c", a="1"), manager=None)
    assert status["details"]["kind"] == "PatchOptions"
    assert fields(status) == {"fieldManager": "Required value: is required for apply patch"}
    assert served.get_or_none(path) is None


def test_apply_creates_a_missing_object_and_a_repeated_apply_changes_nothing(
    served: ClusterThread, ns: str
) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    created = served.request(
        "PATCH", path, config_map("c", a="1"), params={"fieldManager": "kubemill"},
        content_type=APPLY_PATCH,
    )  # fmt: skip
    assert created["data"] == {"a": "1"}
    assert owners(created) == {"kubemill": {"f:data": {"f:a": {}}}}
    assert created["metadata"]["managedFields"][0]["operation"] == "Apply"
    last = served.cluster._last_rv

    again = apply(served, path, config_map("c", a="1"))

    assert again == served.get(path)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert served.cluster._last_rv == last


def test_apply_answers_201_when_it_creates(served: ClusterThread, ns: str) -> None:
    url = f"{served.url}/api/v1/namespaces/{ns}/configmaps/c?fieldManager=m"
    request = urllib.request.Request(
        url, data=json.dumps(config_map("c", a="1")).encode(), method="PATCH"
    )
    request.add_header("Content-Type", APPLY_PATCH)
    with urllib.request.urlopen(request, timeout=10) as created:
        assert created.status == 201
    with urllib.request.urlopen(request, timeout=10) as updated:
        assert updated.status == 200


def test_apply_removes_what_its_manager_stopped_applying_unless_another_owns_it(
    served: ClusterThread, ns: str
) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    apply(served, path, config_map("c", a="1", b="2", c="3"))
    apply(served, path, config_map("c", c="3"), manager="other")

    after = apply(served, path, config_map("c", a="1"))

    assert after["data"] == {"a": "1", "c": "3"}  # b went; c stays, "other" applies it
    assert owners(after) == {"other": {"f:data": {"f:c": {}}}, "kubemill": {"f:data": {"f:a": {}}}}


def test_a_value_another_manager_owns_is_a_conflict_unless_forced(
    served: ClusterThread, ns: str
) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    apply(served, path, config_map("c", a="1", b="2"))
    served.request(
        "PATCH", path, {"data": {"a": "edited"}}, params={"fieldManager": "kubectl-edit"},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    edited = served.get(path)
    assert owners(edited)["kubectl-edit"] == {"f:data": {"f:a": {}}}
    assert edited["metadata"]["managedFields"][-1]["operation"] == "Update"

    status = refused(apply, served, path, config_map("c", a="1", b="2"), status=409)

    assert status["reason"] == "Conflict"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-edit" using v1',
            "field": ".data.a",
        }
    ]
    assert served.get(path)["data"]["a"] == "edited"
    # The same value as the other manager's is no conflict: the field is shared.
    apply(served, path, config_map("c", a="edited", b="2"))

    forced = apply(served, path, config_map("c", a="1", b="2"), force="true")

    assert forced["data"] == {"a": "1", "b": "2"}
    assert "kubectl-edit" not in owners(forced)


def test_apply_options_and_body_are_checked(served: ClusterThread, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    status = refused(
        served.request, "PATCH", path, {"data": {}}, params={"force": "true"},
        content_type="application/merge-patch+json", status=422,
    )  # fmt: skip
    assert fields(status) == {"force": "Forbidden: may not be specified for non-apply patch"}
    refused(apply, served, path, {**config_map("c"), "kind": "Secret"}, status=400)
    refused(apply, served, path, config_map("other"), status=400)
    refused(apply, served, path, {"metadata": {"name": "c"}}, status=400)
    managed = config_map("c")
    managed["metadata"]["managedFields"] = []
    refused(apply, served, path, managed, status=400)
    unsupported = refused(apply, served, path, config_map("c"), dryRun="Some")
    assert "dryRun" in fields(unsupported)
    assert served.get_or_none(path) is None


def test_an_applied_custom_resource_is_validated(served: ClusterThread, ns: str) -> None:
    job = tfjob("t")
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"

    status = refused(apply, served, tfjobs(ns, "t"), job)

    assert "spec.tfReplicaSpecs.Worker.replicas" in fields(status)
    assert served.get_or_none(tfjobs(ns, "t")) is None


def test_a_dry_run_apply_answers_with_the_result_and_stores_nothing(
    served: ClusterThread, ns: str
) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    would = apply(served, path, config_map("c", a="1"), dryRun="All")
    assert would["data"] == {"a": "1"}
    assert served.get_or_none(path) is None

    stored = apply(served, path, config_map("c", a="1"))
    changed = apply(served, path, config_map("c", a="2"), dryRun="All")

    assert changed["data"] == {"a": "2"}
    assert served.get(path) == stored
    refused(served.delete, path + "?dryRun=All", status=400)  # only apply takes dryRun here
    assert served.get(path) == stored


def test_namespaces_take_apply_and_delete(served: ClusterThread) -> None:
    name = f"s-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"a": "b"}},
    }
    created = apply(served, f"/api/v1/namespaces/{name}", body)
    assert created["metadata"]["labels"] == {"a": "b"}
    assert served.get(f"/api/v1/namespaces/{name}")["metadata"]["labels"] == {"a": "b"}
    served.create(f"/api/v1/namespaces/{name}/configmaps", config_map("c"))

    terminating = served.delete(f"/api/v1/namespaces/{name}")

    # No namespace controller: a namespace holding objects stays, Terminating, closed.
    assert terminating["status"]["phase"] == "Terminating"
    status = refused(
        served.create, f"/api/v1/namespaces/{name}/configmaps", config_map("d"), status=403
    )
    assert "being terminated" in status["message"]
    served.delete(f"/api/v1/namespaces/{name}/configmaps/c")
    served.delete(f"/api/v1/namespaces/{name}")
    assert served.get_or_none(f"/api/v1/namespaces/{name}") is None


def test_a_role_binding_before_its_role_is_not_found_and_a_protected_group_needs_approval(
    served: ClusterThread, ns: str
) -> None:
    """Two rules the real kube-apiserver taught this server (tests/cluster): the escalation
    check of a creator without `bind` looks the bound Role up, and a CRD in a `*.k8s.io`
    group needs the `api-approved.kubernetes.io` annotation."""
    bindings = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"
    binding = {
        "metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
    }
    refused(served.create, bindings, binding, status=404)
    served.create(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        {"metadata": {"name": "r"}, "rules": []},
    )
    served.create(bindings, binding)

    crd = copy.deepcopy(kubeflow_crd("PyTorchJob"))
    crd["spec"]["group"] = "examples.k8s.io"
    crd["metadata"]["name"] = f"pytorchjobs.{crd['spec']['group']}"
    status = refused(served.create, CRDS, crd)
    assert "api-approved.kubernetes.io" in status["message"]
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, testing only"}
    served.create(CRDS, crd)
