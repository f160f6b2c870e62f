"""The exact pods, services and PodGroups the operator sends, as the builders make them."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from samples import elastic_pytorchjob, pytorchjob, tfjob

from kubemill.core import CreateChild, CreatePod, DeletePod, RecordEvent
from kubemill.core.model import CreatePodGroup
from kubemill.kinds import load_one, plan_for
from kubemill.substrates.kubernetes.build import (
    GangKind,
    GangScheduler,
    Owner,
    UnsupportedPlanError,
    build_for_action,
    build_pod,
    build_pod_group,
    build_service,
    replica_selector,
)
from kubemill.substrates.kubernetes.network import KubernetesNetwork
from kubemill.substrates.kubernetes.render import plan_on_kubernetes, render_job


def by_name(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def env_of(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for c in pod["spec"]["containers"]:
        if c["name"] == container:
            return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}
    raise KeyError(container)


# --- network ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "index", "port", "qualified", "expected"),
    [
        pytest.param("Worker", 0, 2222, True, "mnist-worker-0.team-a.svc:2222", id="qualified"),
        pytest.param("PS", 3, 2222, True, "mnist-ps-3.team-a.svc:2222", id="ps-lowercased"),
        pytest.param("Master", 0, 23456, False, "mnist-master-0:23456", id="short"),
    ],
)
def test_network_endpoints(
    rtype: str, index: int, port: int, qualified: bool, expected: str
) -> None:
    network = KubernetesNetwork("mnist", "team-a")
    assert str(network.endpoint(rtype, index, port, qualified=qualified)) == expected


# --- pods ---------------------------------------------------------------------------------------


def test_tfjob_pods_exact_shape() -> None:
    job = load_one({**tfjob(), "metadata": {"name": "mnist", "namespace": "team-a", "uid": "u-1"}})
    pods = by_name(render_job(job), "Pod")
    assert list(pods) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    worker = pods["mnist-worker-1"]
    assert worker["apiVersion"] == "v1"
    assert worker["metadata"] == {
        "name": "mnist-worker-1",
        "namespace": "team-a",
        "labels": {
            "team": "vision",
            "kubemill.dev/operator-name": "kubemill",
            "kubemill.dev/job-name": "mnist",
            "kubemill.dev/replica-type": "worker",
            "kubemill.dev/replica-index": "1",
        },
        "annotations": {"note": "keep me"},
        "ownerReferences": [
            {
                "apiVersion": "kubemill.dev/v1",
                "kind": "TFJob",
                "name": "mnist",
                "uid": "u-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    assert pods["mnist-chief-0"]["metadata"]["labels"]["kubemill.dev/job-role"] == "master"
    assert "kubemill.dev/job-role" not in worker["metadata"]["labels"]
    # ExitCode on the Worker replica: the pod never restarts in place.
    assert worker["spec"]["restartPolicy"] == "Never"
    assert "schedulerName" not in worker["spec"]
    assert "hostname" not in worker["spec"] and "subdomain" not in worker["spec"]
    container = worker["spec"]["containers"][0]
    assert container["ports"] == [{"containerPort": 2222, "name": "tfjob-port"}]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": 1},
    }
    names = [e["name"] for e in container["env"]]
    # The user's env first, unchanged; then the framework's, in the Plan's order.
    assert names == [
        "DATA",
        "MY_POD",
        "TF_CONFIG",
        "TF_PS_HOSTS",
        "TF_WORKER_HOSTS",
        "TF_JOB_NAME",
        "TF_TASK_INDEX",
    ]
    env = env_of(worker, "tensorflow")
    assert env["MY_POD"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["TF_WORKER_HOSTS"] == "mnist-worker-0.team-a.svc:2222,mnist-worker-1.team-a.svc:2222"
    assert env["TF_TASK_INDEX"] == "1"


def test_plan_env_is_exactly_what_the_plan_says() -> None:
    job = load_one(pytorchjob())
    plan = plan_on_kubernetes(job)
    for replica in plan.replicas:
        pod = build_pod(job, replica)
        pytorch = next(c for c in pod["spec"]["containers"] if c["name"] == "pytorch")
        assert pytorch["env"] == [v.to_wire() for v in replica.env]
        sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == "sidecar")
        assert "env" not in sidecar
    master = build_pod(job, plan.replica("ddp-master-0"))
    assert env_of(master, "pytorch")["MASTER_ADDR"] == "ddp-master-0"
    assert env_of(master, "pytorch")["RANK"] == "0"
    assert env_of(build_pod(job, plan.replica("ddp-worker-1")), "pytorch")["RANK"] == "2"


@pytest.mark.parametrize(
    ("policy", "pod_policy"),
    [
        pytest.param("Never", "Never", id="never"),
        pytest.param("OnFailure", "OnFailure", id="on-failure"),
        pytest.param("Always", "Always", id="always"),
        pytest.param("ExitCode", "Never", id="exit-code-is-never"),
        pytest.param(None, "OnFailure", id="pytorch-default"),
    ],
)
def test_pod_restart_policy_mapping(policy: str | None, pod_policy: str) -> None:
    doc = pytorchjob()
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        if policy is not None:
            spec["restartPolicy"] = policy
        # A pod-level policy in the template may only agree with it (one that the replica's
        # policy would replace is refused by the api: tests/api/test_refused_fields.py).
        spec["template"]["spec"]["restartPolicy"] = pod_policy
    job = load_one(doc)
    pods = by_name(render_job(job), "Pod")
    assert {p["spec"]["restartPolicy"] for p in pods.values()} == {pod_policy}


def test_operator_labels_win_over_template_labels() -> None:
    doc = pytorchjob()
    template = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    template["metadata"] = {
        "labels": {"kubemill.dev/replica-index": "9", "app": "x"},
        "annotations": {"a": "b"},
    }
    job = load_one(doc)
    pod = build_pod(job, plan_on_kubernetes(job).replica("ddp-worker-0"))
    assert pod["metadata"]["labels"]["kubemill.dev/replica-index"] == "0"
    assert pod["metadata"]["labels"]["app"] == "x"
    assert pod["metadata"]["annotations"] == {"a": "b"}


def test_builders_do_not_mutate_the_job() -> None:
    job = load_one(tfjob())
    before = job.model_dump()
    render_job(job, gang_scheduler="volcano")
    assert job.model_dump() == before


def test_owner_for_upstream_group_and_uid() -> None:
    doc = {**pytorchjob(), "apiVersion": "kubeflow.org/v1"}
    doc["metadata"] = {**doc["metadata"], "uid": "abc"}
    job = load_one(doc)
    owner = Owner.of(job, api_version="kubeflow.org/v1")
    pod = build_pod(job, plan_on_kubernetes(job).replicas[0], owner=owner)
    ref = pod["metadata"]["ownerReferences"][0]
    assert (ref["apiVersion"], ref["kind"], ref["name"], ref["uid"]) == (
        "kubeflow.org/v1",
        "PyTorchJob",
        "ddp",
        "abc",
    )
    # Without a uid (a file, not a cluster object) the uid is empty, never invented.
    assert Owner.of(load_one(pytorchjob())).uid == ""


# --- services -----------------------------------------------------------------------------------


def test_service_exact_shape() -> None:
    job = load_one(pytorchjob())
    service = build_service(job, plan_on_kubernetes(job).replica("ddp-worker-1"))
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "ddp-worker-1",
            "namespace": "default",
            "labels": {
                "kubemill.dev/job-name": "ddp",
                "kubemill.dev/replica-type": "worker",
                "kubemill.dev/replica-index": "1",
                "kubemill.dev/operator-name": "kubemill",
            },
            "ownerReferences": [
                {
                    "apiVersion": "kubemill.dev/v1",
                    "kind": "PyTorchJob",
                    "name": "ddp",
                    "uid": "",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {
                "kubemill.dev/job-name": "ddp",
                "kubemill.dev/replica-type": "worker",
                "kubemill.dev/replica-index": "1",
            },
            "ports": [{"name": "pytorchjob-port", "port": 23456}],
        },
    }


def test_service_selects_exactly_its_pod() -> None:
    job = load_one(tfjob())
    objects = render_job(job)
    pods = by_name(objects, "Pod")
    for name, service in by_name(objects, "Service").items():
        selector = service["spec"]["selector"].items()
        matching = [p for p, pod in pods.items() if selector <= pod["metadata"]["labels"].items()]
        assert matching == [name]


def test_render_order_follows_the_reconcile() -> None:
    job = load_one(tfjob())
    kinds = [o["kind"] for o in render_job(job, gang_scheduler="volcano")]
    assert kinds == ["PodGroup"] + ["Service"] * 4 + ["Pod"] * 4


def test_no_services_when_the_plan_has_none() -> None:
    job = load_one(tfjob())
    plan = dataclasses.replace(plan_on_kubernetes(job), services=False)
    assert build_for_action(job, plan, CreatePod("mnist-ps-0"))["kind"] == "Pod"


def test_actions_that_create_nothing_build_nothing() -> None:
    job = load_one(tfjob())
    plan = plan_on_kubernetes(job)
    assert build_for_action(job, plan, DeletePod("mnist-ps-0")) is None
    assert build_for_action(job, plan, RecordEvent("Normal", "X", "y")) is None


def test_pod_group_action_needs_a_gang_scheduler() -> None:
    job = load_one(tfjob())
    with pytest.raises(UnsupportedPlanError, match="no gang scheduler"):
        build_for_action(job, plan_on_kubernetes(job), CreatePodGroup(name="mnist", min_member=1))


def test_create_child_for_access_the_plan_lacks_is_refused_with_a_reason() -> None:
    job = load_one(tfjob())
    with pytest.raises(UnsupportedPlanError, match="ServiceAccount mnist-sa"):
        build_for_action(job, plan_on_kubernetes(job), CreateChild("ServiceAccount", "mnist-sa"))


def test_replica_selector_for_scale() -> None:
    job = load_one(elastic_pytorchjob())
    plan = plan_on_kubernetes(job)
    selector = replica_selector(plan, "Worker")
    assert selector == "kubemill.dev/job-name=elastic,kubemill.dev/replica-type=worker"
    pods = by_name([build_pod(job, r) for r in plan.replicas], "Pod")
    wanted = dict(part.split("=") for part in selector.split(","))
    assert all(wanted.items() <= p["metadata"]["labels"].items() for p in pods.values())
    assert replica_selector(plan, "Master").endswith("replica-type=master")


# --- gang scheduling ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "scheduler", "api_version"),
    [
        pytest.param(
            "volcano", GangKind.VOLCANO, "volcano", "scheduling.volcano.sh/v1beta1", id="volcano"
        ),
        pytest.param(
            "scheduler-plugins",
            GangKind.SCHEDULER_PLUGINS,
            "scheduler-plugins-scheduler",
            "scheduling.x-k8s.io/v1alpha1",
            id="scheduler-plugins",
        ),
        pytest.param(
            "my-coscheduler",
            GangKind.SCHEDULER_PLUGINS,
            "my-coscheduler",
            "scheduling.x-k8s.io/v1alpha1",
            id="custom-profile",
        ),
    ],
)
def test_gang_scheduler_names(name: str, kind: GangKind, scheduler: str, api_version: str) -> None:
    gang = GangScheduler.named(name)
    assert (gang.kind, gang.scheduler_name, gang.api_version) == (kind, scheduler, api_version)


def test_volcano_pod_markers() -> None:
    job = load_one(tfjob())
    pod = build_pod(
        job, plan_on_kubernetes(job).replica("mnist-ps-0"), gang=GangScheduler.named("volcano")
    )
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"] == {
        "note": "keep me",
        "scheduling.k8s.io/group-name": "mnist",
        "volcano.sh/task-spec": "ps",
    }
    assert "scheduling.x-k8s.io/pod-group" not in pod["metadata"]["labels"]


def test_scheduler_plugins_pod_markers_and_own_scheduler_kept() -> None:
    doc = pytorchjob()
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "mine"
    job = load_one(doc)
    plan = plan_on_kubernetes(job)
    gang = GangScheduler.named("scheduler-plugins")
    master = build_pod(job, plan.replica("ddp-master-0"), gang=gang)
    worker = build_pod(job, plan.replica("ddp-worker-0"), gang=gang)
    assert master["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "ddp"
    assert "annotations" not in master["metadata"]
    assert master["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert worker["spec"]["schedulerName"] == "mine"


def test_volcano_pod_group_shape() -> None:
    doc = tfjob()
    doc["metadata"]["annotations"] = {
        "volcano.sh/preemptable": "false",
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
    }
    job = load_one(doc)
    request = CreatePodGroup(
        name="mnist",
        min_member=3,
        queue="research",
        priority_class="high",
        min_resources=(("cpu", "1500m"), ("memory", "3Gi")),
        schedule_timeout_seconds=60,
    )
    group = build_pod_group(job, request, gang=GangScheduler.named("volcano"))
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["metadata"]["name"] == "mnist"
    assert group["metadata"]["labels"] == {
        "kubemill.dev/job-name": "mnist",
        "kubemill.dev/operator-name": "kubemill",
    }
    assert group["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}
    assert group["metadata"]["ownerReferences"][0]["controller"] is True
    # Volcano has no schedule timeout; it is left out rather than sent and pruned.
    assert group["spec"] == {
        "minMember": 3,
        "queue": "research",
        "priorityClassName": "high",
        "minResources": {"cpu": "1500m", "memory": "3Gi"},
    }


def test_scheduler_plugins_pod_group_shape() -> None:
    job = load_one(elastic_pytorchjob())
    request = CreatePodGroup(
        name="elastic",
        min_member=1,
        queue="ignored",
        priority_class="ignored",
        min_resources=(("cpu", "4"),),
        schedule_timeout_seconds=120,
    )
    group = build_pod_group(job, request, gang=GangScheduler.named("scheduler-plugins"))
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert "annotations" not in group["metadata"]
    assert group["spec"] == {
        "minMember": 1,
        "minResources": {"cpu": "4"},
        "scheduleTimeoutSeconds": 120,
    }


@pytest.mark.parametrize(
    ("scheduler", "spec"),
    [
        pytest.param(
            "volcano",
            {
                "minMember": 1,
                "queue": "research",
                "priorityClassName": "high",
                "minResources": {"cpu": "4", "memory": "8Gi"},
            },
            id="volcano",
        ),
        pytest.param(
            "scheduler-plugins",
            {
                "minMember": 1,
                "minResources": {"cpu": "4", "memory": "8Gi"},
                "scheduleTimeoutSeconds": 120,
            },
            id="scheduler-plugins",
        ),
    ],
)
def test_rendered_pod_group_carries_the_scheduling_policy(
    scheduler: str, spec: dict[str, Any]
) -> None:
    group = render_job(load_one(elastic_pytorchjob()), gang_scheduler=scheduler)[0]
    assert group["kind"] == "PodGroup"
    assert group["spec"] == spec


def test_rendered_pod_group_defaults_to_every_replica() -> None:
    group = render_job(load_one(tfjob()), gang_scheduler="volcano")[0]
    assert group["spec"]["minMember"] == 4
    assert group["spec"]["queue"] == "default"
    assert set(group["spec"]["minResources"]) == {"cpu", "memory"}


# --- the plan the builders get ------------------------------------------------------------------


def test_render_plan_uses_kubernetes_addresses() -> None:
    job = load_one(tfjob())
    direct = plan_for(job, KubernetesNetwork(job.name, job.namespace))
    assert plan_on_kubernetes(job) == direct


def test_gang_does_not_change_env_or_names() -> None:
    job = load_one(tfjob())
    plain = render_job(job)
    gang = render_job(job, gang_scheduler="volcano")
    strip = copy.deepcopy(gang[1:])
    for obj in strip:
        obj["spec"].pop("schedulerName", None)
        ann = obj["metadata"].get("annotations", {})
        ann.pop("scheduling.k8s.io/group-name", None)
        ann.pop("volcano.sh/task-spec", None)
    assert strip == plain
