"""The real control plane itself: version, readiness, the scheduler, the controllers, the
API server's proxy to the node's logs (follow, tail, since, timestamps, limitBytes), and
``scripts/kube-control-plane.sh up``/``down`` (with the node stand-in on the plane it starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.control_plane import PROCESSES, ControlPlane, absent
from support.node import NodeStandIn
from support.real_operator import Refusals, refusals, service_account_kubeconfig
from support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


def pinned_release() -> str:
    for line in (ROOT / "tools" / "kube" / "go.mod").read_text().splitlines():
        if line.strip().startswith("k8s.io/kubernetes "):
            return line.split()[1]
    raise AssertionError("tools/kube/go.mod pins no k8s.io/kubernetes")


def test_the_binaries_tell_the_release_they_were_built_from(control_plane: ControlPlane) -> None:
    release = pinned_release()
    assert control_plane.version() == release
    versions = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert versions["clientVersion"]["gitVersion"] == release
    assert versions["serverVersion"]["gitVersion"] == release
    major, minor = release.removeprefix("v").split(".")[:2]
    assert (versions["serverVersion"]["major"], versions["serverVersion"]["minor"]) == (
        major,
        minor,
    )
    etcd = subprocess.run(
        [control_plane.binary("etcd"), "--version"], capture_output=True, text=True, check=True
    )
    assert "etcd Version: 3.6." in etcd.stdout, etcd.stdout


def test_readyz_and_a_ready_node(control_plane: ControlPlane) -> None:
    assert control_plane.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    node = control_plane.request("GET", f"/api/v1/nodes/{control_plane.node}")
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert not node["spec"].get("taints")


def test_a_deployment_becomes_pods_the_scheduler_binds_and_the_node_plays(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "example:1"}]},
            },
        },
    }
    control_plane.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)

    def pods() -> list[dict[str, object]]:
        listing = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        return [p for p in listing["items"] if p["status"].get("phase") == "Running"]

    running = eventually(lambda: len(pods()) == 2 and pods(), what="2 running pods")
    for pod in running:
        assert pod["spec"]["nodeName"] == control_plane.node  # type: ignore[index]
        owner = pod["metadata"]["ownerReferences"][0]  # type: ignore[index]
        assert owner["kind"] == "ReplicaSet"
        status: dict[str, Any] = pod["status"]  # type: ignore[assignment]
        assert status["podIP"] and status["hostIP"] == "127.0.0.1" and status["startTime"]
        [container] = status["containerStatuses"]
        assert container["ready"] and "running" in container["state"]
        assert container["restartCount"] == 0
    assert len({p["status"]["podIP"] for p in running}) == 2  # type: ignore[index]
    # The node wrote those statuses as itself (the Node authorizer and NodeRestriction
    # let it, for pods bound to it), never as admin.
    writers = {
        e["user"]["username"]
        for e in control_plane.audit(None)
        if e.get("stage") == "ResponseComplete"
        and e.get("objectRef", {}).get("namespace") == namespace
        and e["objectRef"].get("resource") == "pods"
        and e["objectRef"].get("subresource") == "status"
        and e["verb"] in ("patch", "update")
        and e.get("responseStatus", {}).get("code") == 200
    }
    assert writers == {f"system:node:{control_plane.node}"}
    eventually(
        lambda: (
            control_plane.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/web")[
                "status"
            ].get("readyReplicas")
            == 2
        ),
        what="the Deployment to count 2 ready replicas",
    )
    # The namespace controller finalizes the namespace: its pods go through the node's
    # graceful deletion first.
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")
    eventually(
        lambda: absent(control_plane, f"/api/v1/namespaces/{namespace}"),
        timeout=60,
        what=f"namespace {namespace} to be finalized",
    )


def test_logs_reach_the_node_through_the_api_servers_proxy(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "talker", "namespace": namespace},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "example:1"}]},
    }
    control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    eventually(lambda: node.running(namespace, "talker"), what="the pod to run")
    node.write_log(namespace, "talker", "main", "one\ntwo")
    # --since and --since-time: a line written seconds after the others is the only one
    # within the last 2 s, and the only one at or after the whole second before it.
    time.sleep(3)
    cut = datetime.now(tz=UTC).replace(microsecond=0)
    node.write_log(namespace, "talker", "main", "three")
    recent = control_plane.kubectl("logs", "-n", namespace, "talker", "--since=2s").stdout
    assert recent == "three\n"
    after = control_plane.kubectl(
        "logs", "-n", namespace, "talker", f"--since-time={cut.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    ).stdout
    assert after == "three\n"
    logs = control_plane.kubectl("logs", "-n", namespace, "talker")
    assert logs.stdout.splitlines() == ["one", "two", "three"]
    assert control_plane.kubectl("logs", "-n", namespace, "talker", "--tail=1").stdout == "three\n"
    stamped = control_plane.kubectl("logs", "-n", namespace, "talker", "--timestamps").stdout
    assert all(line.split(" ", 1)[1] in ("one", "two", "three") for line in stamped.splitlines())
    limited = control_plane.kubectl("logs", "-n", namespace, "talker", "--limit-bytes=5").stdout
    assert limited == "one\nt"
    follower = subprocess.Popen(
        [
            control_plane.binary("kubectl"),
            "--kubeconfig",
            str(control_plane.admin_kubeconfig),
            "logs",
            "-n",
            namespace,
            "talker",
            "--follow",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        assert [follower.stdout.readline() for _ in range(3)] == ["one\n", "two\n", "three\n"]
        node.write_log(namespace, "talker", "main", "four")
        assert follower.stdout.readline() == "four\n"
        node.finish(namespace, "talker", 0)
        assert follower.wait(timeout=30) == 0
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        if follower.stdout is not None:
            follower.stdout.close()
    finished = node.pod(namespace, "talker")
    assert finished["status"]["phase"] == "Succeeded"


def test_the_script_brings_a_control_plane_up_and_down(
    control_plane_bin: Path, tmp_path: Path
) -> None:
    """The README's commands: `up DIR`, then `kubectl ... get --raw /readyz` says ok, and
    `down DIR` leaves no process."""
    script = str(ROOT / "scripts" / "kube-control-plane.sh")
    where = tmp_path / "plane"
    try:
        up = subprocess.run([script, "up", str(where)], capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stderr
        plane = ControlPlane(where)
        readyz = subprocess.run(
            [
                str(control_plane_bin / "kubectl"),
                "--kubeconfig",
                str(where / "admin.kubeconfig"),
                "get",
                "--raw",
                "/readyz",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert readyz.stdout.strip() == "ok"
        started = dict(plane.state.pids) if plane.state else {}
        assert set(started) == set(PROCESSES)
        # The fixture's node stand-in plays the script's plane too, and its stop ends every
        # thread it started, the watch blocked on its stream included.
        node = NodeStandIn(plane).start()
        try:
            namespace = plane.new_namespace()
            pod = {
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "example:1"}]},
            }
            plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
            eventually(lambda: node.running(namespace, "p"), what="the pod played")
        finally:
            node.stop()
        assert not [thread.name for thread in node.threads() if thread.is_alive()]
    finally:
        down = subprocess.run(
            [script, "down", str(where)], capture_output=True, text=True, timeout=120
        )
    assert down.returncode == 0, down.stdout + down.stderr
    for name, pid in started.items():
        assert not runs(pid), f"{name} (pid {pid}) still runs after down"


def runs(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie left for init to reap is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_audit_log_tells_an_rbac_refusal_from_an_admission_refusal(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    namespace = control_plane.new_namespace()
    account = "probe"
    control_plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": account}}
    )
    role = {
        "metadata": {"name": "pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}],
    }
    binding = {
        "metadata": {"name": "pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    control_plane.request("POST", f"{rbac}/roles", role)
    control_plane.request("POST", f"{rbac}/rolebindings", binding)
    config = service_account_kubeconfig(
        control_plane, tmp_path / "probe.kubeconfig", namespace=namespace, account=account
    )
    # Not granted: the authorizer refuses. Granted, but the pod names a ServiceAccount that
    # does not exist: the ServiceAccount admission plugin refuses, with the same 403.
    secrets = control_plane.kubectl(
        "get", "secrets", "-n", namespace, kubeconfig=config, check=False
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"serviceAccountName": "missing", "containers": [{"name": "c", "image": "x"}]},
    }
    created = control_plane.kubectl(
        "create", "-f", "-", stdin=json.dumps(pod), kubeconfig=config, check=False
    )
    assert secrets.returncode != 0 and created.returncode != 0
    assert "forbidden" in secrets.stderr.lower() and "forbidden" in created.stderr.lower()
    user = f"system:serviceaccount:{namespace}:{account}"

    def told() -> Refusals:
        return refusals(control_plane, user)

    eventually(lambda: told().by_rbac and told().by_admission, timeout=30, what="both refusals")
    assert told().by_rbac == [f"list /secrets in {namespace}"]
    [admission] = told().by_admission
    assert admission.startswith(f"create /pods in {namespace}: ") and "missing" in admission


def test_a_test_session_killed_hard_leaves_no_control_plane_behind(
    control_plane_bin: Path, tmp_path: Path
) -> None:
    """The fixture's processes die with the process that started them: a pytest killed
    with SIGKILL (no teardown runs) leaves no etcd or kube-apiserver holding ports."""
    program = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from support.control_plane import running_control_plane\n"
        "with running_control_plane(Path(sys.argv[1]), Path(sys.argv[2])) as plane:\n"
        "    print('up', flush=True)\n"
        "    time.sleep(600)\n"
    )
    where = tmp_path / "plane"
    session = subprocess.Popen(
        [sys.executable, "-c", program, str(where), str(control_plane_bin)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT / 'src'}"},
    )
    try:
        assert session.stdout is not None
        assert session.stdout.readline().strip() == "up"
        started = ControlPlane(where).alive()
        assert set(started) == set(PROCESSES)
    finally:
        session.kill()
        session.wait()
    try:
        eventually(
            lambda: not [name for name, pid in started.items() if runs(pid)],
            what="every process of the killed session's control plane gone",
        )
    finally:
        ControlPlane(where).down()  # what a failure left (nothing, when the test passes)
