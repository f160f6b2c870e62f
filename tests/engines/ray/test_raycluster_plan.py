"""A RayCluster's Plan: on Kubernetes what KubeRay builds (validated objects, argv lists,
the head Service), locally every node on its own loopback ports and short temp dir; Ready,
the worker counts and HeadPodReady decided by the core's pass."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kubemill.api import ConditionType, ManifestError
from kubemill.core import reconcile
from kubemill.core.model import CreatePod, Observed, ObservedPod, WriteFiles
from kubemill.engines.ray.api.auth import AuthOptions
from kubemill.engines.ray.api.raycluster import (
    HEAD,
    RayCluster,
    RayClusterStatus,
    client_addresses,
)
from kubemill.engines.ray.framework.raycluster import (
    CLIENT_PORT,
    DASHBOARD_PORT,
    GCS_PORT,
    Ray,
)
from kubemill.engines.ray.framework.rayjob import RayJobs
from kubemill.engines.ray.local import (
    TEMP_ROOT,
    USAGE_STATS_ENV,
    WORKER_PORTS,
    local_job_plan,
    local_plan,
)
from kubemill.frameworks.plan import Plan, ServicePolicy
from kubemill.frameworks.remote import SecretFile
from kubemill.kinds import engine_for, load_one
from kubemill.substrates.kubernetes.render import REDACTED_ANNOTATION, render_job
from kubemill.substrates.local.file_sets import write_file_set
from support import manifest_checks
from support.framework_networks import LoopbackNetwork

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def cluster(*, workers: int = 2, groups: int = 1, **head_params: str) -> RayCluster:
    job = load_one(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "ns", "uid": "u1"},
            "spec": {
                "headGroupSpec": {
                    "serviceType": "NodePort",
                    "rayStartParams": {"num-cpus": "0", **head_params},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": f"group{g}",
                        "replicas": workers,
                        "rayStartParams": {"num-cpus": "1"},
                        "template": {
                            "spec": {"containers": [{"name": "ray-worker", "image": "ray"}]}
                        },
                    }
                    for g in range(groups)
                ],
            },
        }
    )
    assert isinstance(job, RayCluster)
    return job


def command(plan: Plan, name: str) -> list[str]:
    return plan.replica(name).template.spec.containers[0].command or []


def test_the_rendered_objects_are_what_kuberay_builds_and_pass_kubernetes_validate() -> None:
    objects = render_job(cluster(groups=2))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Service", "rc-head-svc"),
        ("Pod", "rc-head-0"),
        ("Pod", "rc-group0-0"),
        ("Pod", "rc-group0-1"),
        ("Pod", "rc-group1-0"),
        ("Pod", "rc-group1-1"),
    ]
    assert [e for o in objects for e in manifest_checks.k8s_errors(o)] == []
    service = objects[0]["spec"]
    assert service["type"] == "NodePort"
    assert {p["name"]: p["port"] for p in service["ports"]} == {
        "gcs-server": GCS_PORT,
        "dashboard": DASHBOARD_PORT,
        "client": CLIENT_PORT,
        "metrics": 8080,
    }
    head = objects[1]["spec"]["containers"][0]
    assert head["command"][:4] == ["ray", "start", "--head", "--block"]
    assert "--port=6379" in head["command"] and "--num-cpus=0" in head["command"]
    assert "args" not in head
    worker = objects[2]["spec"]["containers"][0]
    assert worker["command"][:4] == [
        "ray",
        "start",
        "--block",
        "--address=rc-head-svc.ns.svc.cluster.local:6379",
    ]
    assert objects[2]["metadata"]["labels"]["ray.io/group"] == "group0"
    assert objects[2]["spec"]["restartPolicy"] == "Always"


def test_the_planner_waits_for_the_head_and_needs_every_node_ready() -> None:
    plan = Ray().plan(cluster(workers=2), LoopbackNetwork())
    assert [(r.name, r.stage) for r in plan.replicas] == [
        ("rc-head-0", 0),
        ("rc-group0-0", 1),
        ("rc-group0-1", 1),
    ]
    assert plan.start_gate == "ready"
    assert plan.outcome == ServicePolicy(HEAD, 1, also_ready=(("group0", 2),))


def test_a_suspended_cluster_renders_nothing() -> None:
    job = cluster()
    job.spec.suspend = True
    assert render_job(job) == []


def test_locally_every_node_has_its_own_ports_on_loopback_and_a_short_temp_dir() -> None:
    # The head's ports its params give are a pod's: here every port is this machine's.
    job = cluster(**{"dashboard-host": "0.0.0.0", "dashboard-port": "8300"})
    network = LoopbackNetwork()
    plan = local_plan(job, Ray().plan(job, network), network)
    gcs = network.endpoint(HEAD, 0, GCS_PORT).port
    seen_ports: set[str] = set()
    temp_dirs = set()
    for rep in plan.replicas:
        argv = command(plan, rep.name)
        flags = dict(f.removeprefix("--").partition("=")[::2] for f in argv[2:])
        assert flags["node-ip-address"] == "127.0.0.1"
        assert "disable-usage-stats" in flags and flags["disable-usage-stats"] == ""
        ports = [
            flags[k]
            for k in flags
            if (k.endswith("-port") and k != "ray-client-server-port") or k == "port"
        ]
        ports += flags["worker-port-list"].split(",")
        assert len(flags["worker-port-list"].split(",")) == WORKER_PORTS
        assert not seen_ports & set(ports), rep.name  # no port shared between nodes
        seen_ports |= set(ports)
        # Ray's sockets live under it: <temp>/session_<date>_<pid>/sockets/plasma_store.
        assert flags["temp-dir"].startswith(TEMP_ROOT + "/")
        assert len(flags["temp-dir"]) + 70 < 107
        temp_dirs.add(flags["temp-dir"])
        if rep.replica_type == HEAD:
            assert flags["port"] == str(gcs)
            assert flags["dashboard-host"] == "127.0.0.1"  # not the manifest's 0.0.0.0
            assert flags["dashboard-port"] == str(network.endpoint(HEAD, 0, DASHBOARD_PORT).port)
        else:
            assert flags["address"] == f"127.0.0.1:{gcs}"
        probe = rep.template.spec.containers[0].readiness_probe
        assert probe is not None and probe["exec"]["command"][0] == "curl"
    assert len(temp_dirs) == 3
    assert engine_for("RayCluster").local.env == USAGE_STATS_ENV


def _pod(name: str, rtype: str, index: int, *, ready: bool) -> ObservedPod:
    return ObservedPod(
        name=name, replica_type=rtype, index=index, phase="Running", ready=ready, started=NOW
    )


def test_the_core_decides_ready_and_kuberays_status_fields() -> None:
    job = cluster(workers=2)
    network = LoopbackNetwork()
    plan = local_plan(job, Ray().plan(job, network), network)
    first = reconcile(job, plan, Observed(), NOW)
    assert [a.name for a in first.actions if isinstance(a, CreatePod)] == ["rc-head-0"]
    job.status = first.status
    pods = [
        _pod("rc-head-0", HEAD, 0, ready=True),
        _pod("rc-group0-0", "group0", 0, ready=True),
        _pod("rc-group0-1", "group0", 1, ready=False),
    ]
    waiting = reconcile(job, plan, Observed(pods=tuple(pods)), NOW).status
    assert isinstance(waiting, RayClusterStatus)
    assert not waiting.is_true(ConditionType.READY)
    assert (waiting.ready_worker_replicas, waiting.available_worker_replicas) == (1, 2)
    assert waiting.head_pod_ready is True and waiting.state is None and waiting.endpoint is None
    job.status = waiting
    pods[2] = _pod("rc-group0-1", "group0", 1, ready=True)
    ready = reconcile(job, plan, Observed(pods=tuple(pods)), NOW).status
    assert isinstance(ready, RayClusterStatus)
    assert ready.is_true(ConditionType.READY) and ready.state == "ready"
    assert ready.desired_worker_replicas == ready.ready_worker_replicas == 2
    dashboard = network.endpoint(HEAD, 0, DASHBOARD_PORT).port
    assert ready.endpoint == f"http://127.0.0.1:{dashboard}"
    assert ready.endpoints["client"] == str(network.endpoint(HEAD, 0, CLIENT_PORT).port)
    assert ready.head is not None and ready.head.pod_ip == "127.0.0.1"
    assert not ready.finished


def _token_written(plan: Plan, job: RayCluster, root: Path) -> Path:
    """Where the core's first pass has the substrate write the job's token (written now)."""
    [action] = [
        a for a in reconcile(job, plan, Observed(), NOW).actions if isinstance(a, WriteFiles)
    ]
    assert action.secret and action.name == "rc"  # KubeRay's name, on both substrates
    write_file_set(root, action, owner="ns/rc")
    return root / action.name / "auth_token"


def test_locally_every_ray_process_uses_the_jobs_own_token_which_only_the_substrate_sees(
    tmp_path: Path,
) -> None:
    job = cluster(workers=2)
    network = LoopbackNetwork()
    plan = local_plan(job, Ray().plan(job, network), network)
    path = "/tmp/job/files/rc/auth_token"
    for rep in plan.replicas:
        env = {var.name: var.value for var in rep.env}
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == path
        assert env["RAY_AUTH_TOKEN"] == ""  # a token in the user's environment is not it
    # The token is generated by the substrate when it writes the set: 256 random bits,
    # readable by its owner only, another one for another job, and never in the Plan.
    token = _token_written(plan, job, tmp_path / "a")
    assert token.stat().st_mode & 0o777 == 0o600
    value = token.read_text(encoding="utf-8")
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    assert value != _token_written(plan, job, tmp_path / "b").read_text(encoding="utf-8")
    assert value not in repr(plan)
    # The status says where it is (a client's RAY_AUTH_TOKEN_PATH), never what it is.
    status = reconcile(job, plan, Observed(), NOW).status
    assert isinstance(status, RayClusterStatus) and status.auth_token_file == path
    # On Kubernetes nothing of it without authOptions: KubeRay's own objects.
    assert not Ray().plan(job, network).files
    # With authOptions on Kubernetes the set is the same one (once), the env the local one.
    job.spec.auth_options = AuthOptions(mode="token")
    plan = local_plan(job, Ray().plan(job, network), network)
    assert [f.name for f in plan.files] == ["rc"]
    assert {v.name: v.value for v in plan.replicas[0].env}["RAY_AUTH_TOKEN_PATH"] == path


def test_a_local_rayjobs_submitter_and_the_substrates_requests_use_the_token() -> None:
    job = load_one(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "ns", "uid": "u2"},
            "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": cluster().spec},
        }
    )
    network = LoopbackNetwork()
    plan = local_job_plan(job, RayJobs().plan(job, network), network)
    assert [f.name for f in plan.files] == ["rj"]
    path = "/tmp/job/files/rj/auth_token"
    assert {rep.replica_type for rep in plan.replicas} >= {HEAD, "Submitter"}
    for rep in plan.replicas:
        env = {var.name: var.value for var in rep.env}
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == path
    assert plan.remote is not None and plan.remote.bearer_token is not None
    assert (plan.remote.bearer_token.file_set, plan.remote.bearer_token.file) == (
        "rj",
        "auth_token",
    )


def _auth(job: RayCluster, **options: str) -> RayCluster:
    wire = job.to_wire()
    wire["spec"]["authOptions"] = options
    loaded = load_one(wire)
    assert isinstance(loaded, RayCluster)
    return loaded


TOKEN_FROM_SECRET = {"secretKeyRef": {"name": "rc", "key": "auth_token"}}


def _ray_env(pod: dict[str, Any]) -> dict[str, Any]:
    container = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_on_kubernetes_authoptions_token_makes_kuberays_secret_and_env_render_hides_it() -> None:
    job = _auth(cluster(workers=2), mode="token")
    assert job.to_wire()["spec"]["authOptions"] == {"mode": "token"}
    objects = render_job(job)
    assert [e for o in objects for e in manifest_checks.k8s_errors(o)] == []
    [secret] = [o for o in objects if o["kind"] == "Secret"]
    # KubeRay's Secret: the cluster's name, the key auth_token; its value left out of render.
    assert secret["metadata"]["name"] == "rc" and secret["data"] == {"auth_token": ""}
    assert REDACTED_ANNOTATION in secret["metadata"]["annotations"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["rc-head-0", "rc-group0-0", "rc-group0-1"]
    for pod in pods:  # every Ray container: the mode, and the token from the Secret
        env = _ray_env(pod)
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"] == TOKEN_FROM_SECRET
    # Shown when asked: a generated 256-bit token, and nowhere else in what is sent.
    shown = render_job(job, show_secrets=True)
    [secret] = [o for o in shown if o["kind"] == "Secret"]
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    assert token not in repr([o for o in shown if o["kind"] != "Secret"])
    # The status names the Secret (never the token); so do the client hints.
    plan = Ray().plan(job, LoopbackNetwork())
    status = reconcile(job, plan, Observed(), NOW).status
    assert isinstance(status, RayClusterStatus) and status.auth_token_secret == "rc"
    assert status.auth_token_file is None
    hints = client_addresses(job, status)
    hint = hints["token (in the client's environment)"]
    assert "kubectl get secret rc -n ns" in hint and ".data.auth_token" in hint
    assert hints["ray.init(address=...)"] == "ray://rc-head-svc.ns.svc.cluster.local:10001"


def test_on_kubernetes_no_authoptions_or_mode_disabled_is_no_auth_as_kuberays() -> None:
    for job in (cluster(), _auth(cluster(), mode="disabled")):
        objects = render_job(job)
        assert not [o for o in objects if o["kind"] == "Secret"]
        for pod in (o for o in objects if o["kind"] == "Pod"):
            assert not {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"} & set(_ray_env(pod))
        status = reconcile(job, Ray().plan(job, LoopbackNetwork()), Observed(), NOW).status
        assert isinstance(status, RayClusterStatus) and status.auth_token_secret is None
        assert "token (in the client's environment)" not in client_addresses(job, status)
    # mode defaults to token once authOptions is given, as KubeRay's.
    assert _auth(cluster()).spec.token_auth


def test_authoptions_fields_kubemill_does_not_honour_are_refused_at_their_path() -> None:
    cases = {
        "secretName": ("my-token", "spec.authOptions.secretName"),
        "enableK8sTokenAuth": (True, "spec.authOptions.enableK8sTokenAuth"),
        "mode": ("oauth", "spec.authOptions.mode"),
    }
    for field, (value, path) in cases.items():
        wire = cluster().to_wire()
        wire["spec"]["authOptions"] = {field: value}
        with pytest.raises(ManifestError) as caught:
            load_one(wire)
        assert path in [e.path for e in caught.value.errors], caught.value.errors


def test_on_kubernetes_a_rayjobs_submitter_and_the_operators_reader_use_the_token() -> None:
    spec = _auth(cluster(), mode="token").spec
    job = load_one(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "ns", "uid": "u2"},
            "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": spec},
        }
    )
    objects = render_job(job)
    assert [e for o in objects for e in manifest_checks.k8s_errors(o)] == []
    [secret] = [o for o in objects if o["kind"] == "Secret"]
    assert secret["metadata"]["name"] == "rj"
    plan = RayJobs().plan(job, LoopbackNetwork())
    assert {rep.replica_type for rep in plan.replicas} == {HEAD, "group0", "Submitter"}
    for rep in plan.replicas:
        env = {v.name: v for v in rep.env}
        assert env["RAY_AUTH_MODE"].value == "token"
        source = env["RAY_AUTH_TOKEN"].value_from
        assert source is not None and source.secret_key_ref == {"name": "rj", "key": "auth_token"}
    assert plan.remote is not None and plan.remote.bearer_token == SecretFile("rj", "auth_token")


def test_the_client_hint_names_the_secret_even_where_the_status_field_was_pruned() -> None:
    # KubeRay's own CRD (its group served by KubeRay's install) has no authTokenSecret.
    job = _auth(cluster(), mode="token")
    status = reconcile(job, Ray().plan(job, LoopbackNetwork()), Observed(), NOW).status
    assert isinstance(status, RayClusterStatus)
    pruned = status.model_copy(update={"auth_token_secret": None})
    hint = client_addresses(job, pruned)["token (in the client's environment)"]
    assert "kubectl get secret rc -n ns" in hint
