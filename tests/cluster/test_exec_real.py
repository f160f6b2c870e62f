"""``pods/exec`` through the real API server to the node stand-in's exec endpoint.

Three clients, as they reach a 1.36 kubelet: kubemill's exec agent (kubexec, the MPI
launcher's remote shell) and the Python client's ``kubernetes.stream`` (both WebSocket,
offering v5 then v4), and the built kubectl (WebSocket v5). The command runs for real on
this machine in the container's environment; stdout, stderr and the exit status come back
on their channels; closing the stream stops the command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.control_plane import ControlPlane
from support.node import NodeStandIn
from support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
KUBEXEC = ROOT / "src" / "kubemill" / "engines" / "mpi" / "agent.py"
WAIT = 60.0
"""Upper bound on the scheduler and the node acting: a hang guard."""


@pytest.fixture(scope="module")
def played_pod(control_plane: ControlPlane, node: NodeStandIn) -> tuple[str, str]:
    """A running pod (its own command not run: the node plays it) to exec into."""
    namespace = control_plane.new_namespace("exec")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "target"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "example/idle:1",
                    "command": ["sleep", "infinity"],
                    "env": [
                        {"name": "GREETING", "value": "hello"},
                        {"name": "PHRASE", "value": "$(GREETING) world"},
                        {
                            "name": "POD_NAMESPACE",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                        },
                    ],
                }
            ],
        },
    }
    control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    eventually(lambda: node.running(namespace, "target"), timeout=WAIT, what="the pod running")
    eventually(
        lambda: node.pod(namespace, "target")["status"].get("phase") == "Running",
        timeout=WAIT,
        what="the pod's Running status",
    )
    return namespace, "target"


def admin_api(plane: ControlPlane) -> Any:
    """The Python client's CoreV1Api, as admin of ``plane``."""
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(str(plane.admin_kubeconfig)))  # type: ignore[no-untyped-call]


def kubexec(plane: ControlPlane, namespace: str, pod: str, *words: str) -> Any:
    """kubemill's exec agent, as mpirun runs it (``kubexec <host> <words>``), as admin."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["KUBECONFIG"] = str(plane.admin_kubeconfig)
    env["KUBEMILL_EXEC_CONTAINER"] = "main"
    host = f"{pod}.{pod}.{namespace}.svc"
    return subprocess.run(
        [sys.executable, str(KUBEXEC), host, *words],
        capture_output=True,
        env=env,
        timeout=WAIT,
        check=False,
    )


def test_kubexec_relays_stdout_stderr_and_the_exit_code(
    control_plane: ControlPlane, played_pod: tuple[str, str]
) -> None:
    namespace, pod = played_pod
    done = kubexec(control_plane, namespace, pod, "printf", "'%s|'", '"$PHRASE"', "$HOSTNAME")
    assert (done.returncode, done.stderr) == (0, b""), done.stderr
    assert done.stdout == b"hello world|target|"
    done = kubexec(
        control_plane, namespace, pod, "echo", "to-err", ">&2;", "echo", "out;", "exit 3"
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out\n", b"to-err\n")
    # Not a pod of this node: the kubelet's 404 comes back through the API server.
    done = kubexec(control_plane, namespace, "nosuch", "true")
    assert done.returncode == 255
    assert b"kubexec: nosuch:" in done.stderr and b"404" in done.stderr, done.stderr


def test_the_python_clients_stream_gets_v5_with_stdin_or_v4_and_the_status(
    control_plane: ControlPlane, played_pod: tuple[str, str]
) -> None:
    from kubernetes.stream import stream

    namespace, pod = played_pod
    api = admin_api(control_plane)
    ws = stream(
        api.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        command=["sh", "-c", "tr a-z A-Z; echo done >&2; exit 7"],
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    try:
        assert ws.subprotocol == "v5.channel.k8s.io"
        ws.write_stdin("piped input\n")
        ws.close_channel(0)  # v5's half-close: the command reads end of file
        ws.run_forever(timeout=WAIT)
        assert ws.read_stdout() == "PIPED INPUT\n"
        assert ws.read_stderr() == "done\n"
        assert ws.returncode == 7
    finally:
        ws.close()
    # A client offering v4 only (older Python clients) is proxied as it is, and gets v4.
    ws = stream(
        api.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        command=["sh", "-c", "echo four; exit 5"],
        stdout=True,
        stderr=True,
        stdin=False,
        tty=False,
        _preload_content=False,
        _headers={"sec-websocket-protocol": "v4.channel.k8s.io"},
    )
    try:
        assert ws.subprotocol == "v4.channel.k8s.io"
        ws.run_forever(timeout=WAIT)
        assert (ws.read_stdout(), ws.returncode) == ("four\n", 5)
    finally:
        ws.close()


def test_kubectl_exec_runs_the_command_and_exits_with_its_code(
    control_plane: ControlPlane, played_pod: tuple[str, str]
) -> None:
    namespace, pod = played_pod
    done = control_plane.kubectl(
        "exec",
        "-n",
        namespace,
        pod,
        "--",
        "sh",
        "-c",
        "echo $GREETING; echo oops >&2; exit 4",
        check=False,
    )
    assert (done.returncode, done.stdout) == (4, "hello\n")
    assert done.stderr == "oops\ncommand terminated with exit code 4\n"
    done = control_plane.kubectl(
        "exec", "-i", "-n", namespace, pod, "--", "wc", "-c", stdin="12345"
    )
    assert done.stdout.strip() == "5"


def test_closing_the_stream_stops_the_command(
    control_plane: ControlPlane, played_pod: tuple[str, str], tmp_path: Path
) -> None:
    from kubernetes.stream import stream

    namespace, pod = played_pod
    pid_file = tmp_path / "pid"
    api = admin_api(control_plane)
    ws = stream(
        api.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        command=["sh", "-c", f"echo $$ > {pid_file}; echo started; exec sleep 600"],
        stdout=True,
        stderr=True,
        stdin=False,
        tty=False,
        _preload_content=False,
    )
    eventually(lambda: ws.update(timeout=1) or "started" in ws.peek_stdout(), what="started")
    pid = int(pid_file.read_text())
    assert Path(f"/proc/{pid}").exists()
    ws.close()
    eventually(lambda: not alive(pid), timeout=WAIT, what=f"the command (pid {pid}) stopped")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_what_the_api_server_sends_the_node(
    control_plane: ControlPlane, node: NodeStandIn, played_pod: tuple[str, str]
) -> None:
    """Measured, not assumed: with ExtendWebSocketsToKubelet declared (as a 1.36 kubelet
    declares it), each client's own WebSocket handshake reaches the node, as a GET of
    /exec/... with the command as repeated query parameters; without it, the API server
    turns kubectl's v5 WebSocket into SPDY/3.1 (a POST), which the stand-in does not serve."""
    namespace, pod = played_pod
    served = control_plane.request("GET", f"/api/v1/nodes/{control_plane.node}")
    assert served["status"]["declaredFeatures"] == ["ExtendWebSocketsToKubelet"]
    base = f"/exec/{namespace}/{pod}/main?"

    def last_request() -> dict[str, str]:
        return node.exec_requests[-1]

    assert kubexec(control_plane, namespace, pod, "true").returncode == 0
    assert last_request() == {
        "method": "GET",
        "path": base + "command=%2Fbin%2Fsh&command=-c&command=true&error=1&output=1",
        "upgrade": "websocket",
        "protocols": "v5.channel.k8s.io,v4.channel.k8s.io",
    }
    control_plane.kubectl("exec", "-n", namespace, pod, "--", "true")
    assert last_request() == {
        "method": "GET",
        "path": base + "command=true&error=1&output=1",
        "upgrade": "websocket",
        "protocols": "v5.channel.k8s.io",
    }
    status = f"/api/v1/nodes/{control_plane.node}/status"
    undeclare = {"status": {"declaredFeatures": None}}
    merge = "application/merge-patch+json"
    control_plane.request("PATCH", status, undeclare, identity="node", content_type=merge)
    try:
        done = control_plane.kubectl("exec", "-n", namespace, pod, "--", "true", check=False)
        assert done.returncode != 0
        assert last_request()["method"] == "POST"
        assert last_request()["upgrade"].startswith("SPDY/3.1")
    finally:
        declare = {"status": {"declaredFeatures": ["ExtendWebSocketsToKubelet"]}}
        control_plane.request("PATCH", status, declare, identity="node", content_type=merge)
