"""The tests' stand-in for the kubelet of the real control plane's Node.

No kubelet or container runtime can run on this machine, so the pods the real kube-scheduler
binds to the Node are played here. :class:`NodeStandIn` does through the real API, with the
node's own identity (``system:node:<name>``: the Node authorizer and NodeRestriction decide
what it may do), what a kubelet does:

- a pod bound to the node starts: its init containers end with 0, its containers run and are
  ready, it gets a pod IP, the host IP and a start time;
- a container ends when a test says so (:meth:`NodeStandIn.finish`): under the pod's
  ``restartPolicy`` it is restarted in place (restart count, last state) or the pod ends
  Succeeded or Failed, as the kubelet decides;
- a deleted pod (a deletion timestamp) has its containers stopped (exit 143, SIGTERM's) after
  :attr:`NodeStandIn.grace` seconds, then is removed with grace 0, as the kubelet does;
- the kubelet's HTTPS endpoint that the API server proxies ``kubectl logs`` to
  (``/containerLogs/<ns>/<pod>/<container>`` with ``follow``, ``tailLines``, ``sinceSeconds``,
  ``sinceTime``, ``timestamps``, ``limitBytes``) serves what a test wrote with
  :meth:`NodeStandIn.write_log` (or what a container's process printed);
- the kubelet's ``exec`` endpoint (``/exec/<ns>/<pod>/<container>``, WebSocket
  ``v5.channel.k8s.io`` and ``v4.channel.k8s.io``; :mod:`support.kubelet_exec`) runs the
  command as a real local process in the container's environment and volumes
  (:mod:`support.pod_runtime`). The Node declares ``ExtendWebSocketsToKubelet``, as a 1.36
  kubelet does, so the API server proxies the client's WebSocket here rather than
  translating it into SPDY.

By default the pods' own commands do not run: a test decides each container's exit
(:meth:`NodeStandIn.finish`). With ``run_commands=True`` each container that has a command
runs it as a process (:mod:`support.pod_runtime`), its output is its log and its exit is the
container's exit; a container without one (the seed's MPI workers' ``command: [""]``) stays
running, for what is exec'd into it.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from support.control_plane import ControlPlane
from support.kubelet_exec import (
    ExecRefused,
    ExecRequest,
    exit_code,
    parse_exec,
    serve_exec,
    stop,
)
from support.pod_runtime import PodRuntime, PodRuntimeError

DECLARED_FEATURES = ["ExtendWebSocketsToKubelet"]
"""What a 1.36 kubelet with default feature gates declares in its Node's status that
changes what the API server sends it: with it, exec WebSockets are proxied to the node as
the client sent them (without it, a v5 exec reaches the node as SPDY)."""

Pod = dict[str, Any]


def stamp(moment: datetime | None = None) -> str:
    return (moment or datetime.now(tz=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerLog:
    """One container's log: (time, line) pairs, and whether it has ended."""

    lines: list[tuple[datetime, str]] = field(default_factory=list)
    ended: bool = False


class NodeStandIn:
    """Plays the pods bound to ``plane``'s Node (see the module docstring)."""

    def __init__(
        self, plane: ControlPlane, *, grace: float = 0.3, run_commands: bool = False
    ) -> None:
        self.plane = plane
        self.grace = grace
        """Seconds a deleted pod takes to stop (its Terminating window)."""
        self.run_commands = run_commands
        """Whether containers run their own commands as processes (see the module doc)."""
        self._command_namespaces: set[str] = set()
        self._root = Path(tempfile.mkdtemp(prefix="kubemill-node-"))
        self.runtime = PodRuntime(plane, self._root)
        self._processes: dict[tuple[str, str], subprocess.Popen[bytes]] = {}
        """Each running container's process, by (pod uid, container)."""
        self._exits: dict[tuple[str, str], int] = {}
        self.exec_requests: list[dict[str, str]] = []
        """What the API server sent the exec endpoint: method, path (with the query), the
        ``Upgrade`` and ``Sec-WebSocket-Protocol`` headers; for tests to see the wire."""
        self.on_start: Callable[[Pod], None] | None = None
        """Called (on the watch thread) once a pod is reported running: a test's script."""
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._pods: dict[tuple[str, str], Pod] = {}
        self._started: set[str] = set()
        """Pods (by uid) the node has taken on: each is started once."""
        self._reported: set[str] = set()
        """Pods (by uid) whose Running status the API server has accepted."""
        self._deleting: set[str] = set()
        self._logs: dict[tuple[str, str, str], ContainerLog] = {}
        self._next_ip = 10
        self._threads: list[threading.Thread] = []
        self._server: http.server.ThreadingHTTPServer | None = None
        self._watch_connection: http.client.HTTPSConnection | None = None
        """The watch's connection while one is open, for :meth:`stop` to end."""

    # --- life ---

    def start(self) -> NodeStandIn:
        self._serve_kubelet_api()
        self._declare_features()
        watcher = threading.Thread(target=self._watch_forever, name="node-watch", daemon=True)
        watcher.start()
        self._threads.append(watcher)
        return self

    def stop(self) -> None:
        """Stop everything it started, and return once its threads have ended (a thread
        still running after 10 s is an error: it would outlive the control plane)."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._lock:
            self._lock.notify_all()
            processes = list(self._processes.values())
            watch = self._watch_connection
        # The watch thread blocks reading its stream (up to the watch's 60 s): shutting the
        # socket down ends that read at once, where closing it from here would not.
        if watch is not None and watch.sock is not None:
            with contextlib.suppress(OSError):
                watch.sock.shutdown(socket.SHUT_RDWR)
        for process in processes:
            stop(process)
        for thread in self._threads:
            thread.join(timeout=10)
        shutil.rmtree(self._root, ignore_errors=True)
        left = [thread.name for thread in self._threads if thread.is_alive()]
        if left:
            raise RuntimeError(f"node stand-in threads still running after stop: {left}")

    def threads(self) -> list[threading.Thread]:
        """The long-lived threads it started (the watch and the kubelet API's server)."""
        return list(self._threads)

    # --- what tests do ---

    def pod(self, namespace: str, name: str) -> Pod:
        return self.plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")  # type: ignore[no-any-return]

    def finish(
        self,
        namespace: str,
        name: str,
        exit_code: int = 0,
        *,
        container: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """The pod's container (its first, unless named) exits with ``exit_code``; the pod is
        restarted in place or ends, as its ``restartPolicy`` says. Whether it restarted."""
        pod = self.pod(namespace, name)
        containers = [c["name"] for c in pod["spec"]["containers"]]
        target = container or containers[0]
        policy = pod["spec"].get("restartPolicy", "Always")
        restart = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses", [])}
        entry = statuses[target]
        terminated = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": entry.get("state", {}).get("running", {}).get("startedAt", stamp()),
            "finishedAt": stamp(),
        }
        if restart:
            entry["restartCount"] = entry.get("restartCount", 0) + 1
            entry["lastState"] = {"terminated": terminated}
            entry["state"] = {"running": {"startedAt": stamp()}}
            entry["ready"] = True
            self._write_status(pod, phase="Running", statuses=list(statuses.values()))
            return True
        entry["state"] = {"terminated": terminated}
        entry["ready"] = False
        entry["started"] = False
        others_done = all("terminated" in s["state"] for s in statuses.values())
        self._end_log(namespace, name, target)
        if not others_done:
            self._write_status(pod, phase="Running", statuses=list(statuses.values()), ready=False)
            return False
        failed = any(s["state"]["terminated"]["exitCode"] != 0 for s in statuses.values())
        self._write_status(
            pod,
            phase="Failed" if failed else "Succeeded",
            statuses=list(statuses.values()),
            ready=False,
        )
        return False

    def write_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Append ``text`` to the container's log, as its process would print it."""
        with self._lock:
            log = self._logs.setdefault((namespace, pod, container), ContainerLog())
            now = datetime.now(tz=UTC)
            log.lines.extend((now, line) for line in text.splitlines())
            self._lock.notify_all()

    def run_commands_in(self, namespace: str) -> None:
        """Pods started from now on in ``namespace`` run their containers' commands (the
        ``run_commands`` opt-in for one test's namespace, on a node the tests share)."""
        with self._lock:
            self._command_namespaces.add(namespace)

    def _runs_commands(self, namespace: str) -> bool:
        with self._lock:
            return self.run_commands or namespace in self._command_namespaces

    def running(self, namespace: str, name: str) -> bool:
        """Whether the stand-in has reported the pod running."""
        with self._lock:
            return self._uid(namespace, name) in self._reported

    # --- the pods ---

    def _uid(self, namespace: str, name: str) -> str:
        pod = self._pods.get((namespace, name))
        return str(pod["metadata"]["uid"]) if pod else ""

    def _watch_forever(self) -> None:
        selector = urllib.parse.quote(f"spec.nodeName={self.plane.node}")
        assert self.plane.state is not None
        while not self._stop.is_set():
            try:
                listing = self.plane.request(
                    "GET", f"/api/v1/pods?fieldSelector={selector}", identity="node"
                )
                for pod in listing["items"]:
                    self._seen(pod)
                version = listing["metadata"]["resourceVersion"]
                path = (
                    f"/api/v1/pods?fieldSelector={selector}&watch=1"
                    f"&resourceVersion={version}&allowWatchBookmarks=true&timeoutSeconds=60"
                )
                connection = http.client.HTTPSConnection(
                    "127.0.0.1",
                    self.plane.state.apiserver_port,
                    context=self.plane.ssl_context("node"),
                    timeout=90,
                )
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._watch_connection = connection
                try:
                    connection.request("GET", path, headers={"Accept": "application/json"})
                    # Connected: a stop() from now on sees the socket and shuts it down.
                    if self._stop.is_set():
                        return
                    stream = connection.getresponse()
                    if stream.status != 200:
                        raise OSError(f"watch answered {stream.status}: {stream.read()[:300]!r}")
                    for line in stream:
                        if self._stop.is_set():
                            return
                        event = json.loads(line)
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._seen(event["object"])
                        elif event["type"] == "DELETED":
                            self._gone(event["object"])
                finally:
                    with self._lock:
                        self._watch_connection = None
                    connection.close()
            except (OSError, http.client.HTTPException, urllib.error.URLError, ValueError) as exc:
                if self._stop.is_set():
                    return
                print(f"node stand-in: watch ended ({exc}); listing again")
                time.sleep(0.2)

    def _seen(self, pod: Pod) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        uid = meta["uid"]
        with self._lock:
            self._pods[key] = pod
            fresh = uid not in self._started
            if fresh:
                self._started.add(uid)
            deleting = "deletionTimestamp" in meta and uid not in self._deleting
            if deleting:
                self._deleting.add(uid)
        if deleting:
            self._spawn(self._terminate, pod)
        elif fresh and pod.get("status", {}).get("phase") in (None, "Pending"):
            self._spawn(self._start_pod, pod)

    def _gone(self, pod: Pod) -> None:
        meta = pod["metadata"]
        with self._lock:
            self._pods.pop((meta["namespace"], meta["name"]), None)
            for container in pod["spec"]["containers"]:
                log = self._logs.get((meta["namespace"], meta["name"], container["name"]))
                if log is not None:
                    log.ended = True
            self._lock.notify_all()
        self.runtime.forget(meta["uid"])

    def _spawn(self, target: Callable[[Pod], None], pod: Pod) -> None:
        def guarded() -> None:
            try:
                target(pod)
            except urllib.error.HTTPError as exc:
                # A pod deleted meanwhile (404) or changed (409): the watch brings what is next.
                if exc.code not in (404, 409):
                    print(
                        f"node stand-in: {target.__name__} of {pod['metadata']['name']}: "
                        f"{exc.code} {exc.read()[:500]!r}"
                    )

        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()

    def _start_pod(self, pod: Pod) -> None:
        with self._lock:
            self._next_ip += 1
            # A loopback address (all of 127/8 is): the operator asks some pods at their
            # IP (a Ray head's job API), and nothing a test does may leave the machine.
            ip = f"127.244.{self._next_ip // 250}.{self._next_ip % 250 + 2}"
        now = stamp()
        init = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": now,
                        "finishedAt": now,
                    }
                },
            }
            for c in pod["spec"].get("initContainers", [])
        ]
        statuses = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ]
        for container in pod["spec"]["containers"]:
            with self._lock:
                self._logs.setdefault(
                    (pod["metadata"]["namespace"], pod["metadata"]["name"], container["name"]),
                    ContainerLog(),
                )
        runs = self._runs_commands(pod["metadata"]["namespace"])
        started = self._start_processes(pod) if runs else {}
        self._write_status(pod, phase="Running", statuses=statuses, init=init, ip=ip, ready=True)
        with self._lock:
            # Only now may a test end its containers: their statuses are there to change.
            self._reported.add(pod["metadata"]["uid"])
        for container, process in started.items():
            if process is None:
                self.finish(
                    pod["metadata"]["namespace"],
                    pod["metadata"]["name"],
                    128,
                    container=container,
                    reason="StartError",
                )
            else:
                self._spawn(self._process_watcher(container, process), pod)
        if self.on_start is not None:
            self.on_start(pod)

    # --- the containers' own processes (run_commands) ---

    def _start_processes(self, pod: Pod) -> dict[str, subprocess.Popen[bytes] | None]:
        """Each container's command started (None where it could not start: its reason is
        in its log); containers without one are left out."""
        started: dict[str, subprocess.Popen[bytes] | None] = {}
        for container in pod["spec"]["containers"]:
            name = container["name"]
            try:
                argv = self.runtime.command(pod, name)
                if argv:
                    started[name] = self._run(pod, name, argv)
            except (OSError, PodRuntimeError) as exc:
                meta = pod["metadata"]
                self.write_log(meta["namespace"], meta["name"], name, f"node stand-in: {exc}")
                started[name] = None
        return started

    def _run(self, pod: Pod, container: str, argv: list[str]) -> subprocess.Popen[bytes]:
        process = self.runtime.spawn(pod, container, argv)
        with self._lock:
            self._processes[(pod["metadata"]["uid"], container)] = process
        return process

    def _process_watcher(
        self, container: str, process: subprocess.Popen[bytes]
    ) -> Callable[[Pod], None]:
        def watch_process(pod: Pod) -> None:
            self._watch_process(pod, container, process)

        return watch_process

    def _watch_process(self, pod: Pod, container: str, process: subprocess.Popen[bytes]) -> None:
        """Relay the process's output to the container's log; at its exit the container
        exits with its code (and runs again if the pod's restartPolicy restarts it)."""
        meta = pod["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        while True:
            readers = [
                threading.Thread(target=self._log_lines, args=(namespace, name, container, pipe))
                for pipe in (process.stdout, process.stderr)
                if pipe is not None
            ]
            for reader in readers:
                reader.start()
            code = exit_code(process.wait())
            for reader in readers:
                reader.join()
            with self._lock:
                self._exits[(uid, container)] = code
                deleting = uid in self._deleting or self._stop.is_set()
            if deleting or not self.finish(namespace, name, code, container=container):
                return
            process = self._run(pod, container, self.runtime.command(pod, container))

    def _log_lines(self, namespace: str, pod: str, container: str, pipe: Any) -> None:
        with pipe:
            for raw in pipe:
                self.write_log(namespace, pod, container, raw.decode(errors="replace"))

    def _terminate(self, pod: Pod) -> None:
        meta = pod["metadata"]
        with self._lock:
            processes = {
                container: process
                for (uid, container), process in self._processes.items()
                if uid == meta["uid"]
            }
        stopping = [
            threading.Thread(target=stop, args=(process, self.grace), daemon=True)
            for process in processes.values()
        ]
        for thread in stopping:
            thread.start()
        time.sleep(self.grace)
        for thread in stopping:
            thread.join()
        namespace, name = meta["namespace"], meta["name"]
        try:
            current = self.pod(namespace, name)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return
            raise
        if current["metadata"]["uid"] != meta["uid"]:
            return
        statuses = current.get("status", {}).get("containerStatuses", [])
        for entry in statuses:
            if "terminated" not in entry.get("state", {}):
                started = entry.get("state", {}).get("running", {}).get("startedAt", stamp())
                with self._lock:
                    # SIGTERM's 143 for a container without a process (or still stopping).
                    code = self._exits.get((meta["uid"], entry["name"]), 143)
                entry["state"] = {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Error" if code else "Completed",
                        "startedAt": started,
                        "finishedAt": stamp(),
                    }
                }
                entry["ready"] = False
            self._end_log(namespace, name, entry["name"])
        if current.get("status", {}).get("phase") not in ("Succeeded", "Failed") and statuses:
            failed = any(e["state"]["terminated"]["exitCode"] != 0 for e in statuses)
            self._write_status(
                current, phase="Failed" if failed else "Succeeded", statuses=statuses, ready=False
            )
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        self.plane.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body, identity="node"
        )

    def _write_status(
        self,
        pod: Pod,
        *,
        phase: str,
        statuses: list[dict[str, Any]],
        init: list[dict[str, Any]] | None = None,
        ip: str | None = None,
        ready: bool | None = None,
    ) -> None:
        meta = pod["metadata"]
        old = pod.get("status", {})
        now = stamp()
        is_ready = ready if ready is not None else phase == "Running"
        conditions = [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": str(is_ready), "lastTransitionTime": now},
            {"type": "ContainersReady", "status": str(is_ready), "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        ]
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": conditions,
            "containerStatuses": statuses,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "startTime": old.get("startTime", now),
        }
        if init is not None:
            status["initContainerStatuses"] = init
        pod_ip = ip or old.get("podIP")
        if pod_ip:
            status["podIP"] = pod_ip
            status["podIPs"] = [{"ip": pod_ip}]
        body = {"metadata": {"uid": meta["uid"]}, "status": status}
        self.plane.request(
            "PATCH",
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
            body,
            identity="node",
            content_type="application/merge-patch+json",
        )

    def _end_log(self, namespace: str, pod: str, container: str) -> None:
        with self._lock:
            self._logs.setdefault((namespace, pod, container), ContainerLog()).ended = True
            self._lock.notify_all()

    # --- the kubelet API the API server proxies to ---

    def _serve_kubelet_api(self) -> None:
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                parts = url.path.strip("/").split("/")
                if len(parts) == 4 and parts[0] == "exec":
                    stand_in._serve_exec(self, url.path, url.query)
                    return
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self.send_error(404, "the node stand-in serves only containerLogs and exec")
                    return
                query = dict(urllib.parse.parse_qsl(url.query))
                stand_in._serve_log(self, parts[1], parts[2], parts[3], query)

            def do_POST(self) -> None:
                # SPDY upgrades come as POST: what the API server sends a node that does not
                # declare ExtendWebSocketsToKubelet, or for a client that asks for SPDY.
                url = urllib.parse.urlsplit(self.path)
                if url.path.startswith("/exec/"):
                    stand_in._serve_exec(self, url.path, url.query)
                    return
                self.send_error(404, "the node stand-in serves only containerLogs and exec")

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        pki = self.plane.pki
        context.load_cert_chain(str(pki.path("kubelet", "crt")), str(pki.path("kubelet", "key")))
        # Only the API server (its kubelet-client certificate, signed by the run's CA) may ask.
        context.load_verify_locations(str(pki.path("ca", "crt")))
        context.verify_mode = ssl.CERT_REQUIRED
        assert self.plane.state is not None
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", self.plane.state.kubelet_port), Handler
        )
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        thread = threading.Thread(target=server.serve_forever, name="node-kubelet-api", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _declare_features(self) -> None:
        """Report in the Node's status the features this node declares, as the kubelet does."""
        self.plane.request(
            "PATCH",
            f"/api/v1/nodes/{self.plane.node}/status",
            {"status": {"declaredFeatures": DECLARED_FEATURES}},
            identity="node",
            content_type="application/merge-patch+json",
        )

    def _serve_exec(
        self, handler: http.server.BaseHTTPRequestHandler, path: str, query: str
    ) -> None:
        seen = {
            "method": handler.command,
            "path": handler.path,
            "upgrade": handler.headers.get("Upgrade", ""),
            "protocols": handler.headers.get("Sec-WebSocket-Protocol", ""),
        }
        with self._lock:
            self.exec_requests.append(seen)
        try:
            request = parse_exec(path, query)
            pod = self._exec_target(request)
            serve_exec(handler, request, lambda r: self._exec_process(pod, r))
        except ExecRefused as exc:
            body = exc.message.encode()
            handler.send_response(exc.code)
            handler.send_header("Content-Type", "text/plain; charset=utf-8")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)

    def _exec_target(self, request: ExecRequest) -> Pod:
        """The pod, if its container runs on this node; else the kubelet's refusal."""
        with self._lock:
            known = self._pods.get((request.namespace, request.pod))
            started = known is not None and known["metadata"]["uid"] in self._reported
        if known is None or not started:
            raise ExecRefused(404, "pod does not exist")
        try:
            pod = self.pod(request.namespace, request.pod)
        except urllib.error.HTTPError:
            raise ExecRefused(404, "pod does not exist") from None
        statuses = {s["name"]: s for s in pod.get("status", {}).get("containerStatuses", [])}
        if request.container not in statuses:
            raise ExecRefused(404, f"container not found ({request.container!r})")
        if "running" not in statuses[request.container].get("state", {}):
            raise ExecRefused(500, f"container {request.container} is not running")
        return pod

    def _exec_process(self, pod: Pod, request: ExecRequest) -> subprocess.Popen[bytes]:
        return self.runtime.spawn(
            pod,
            request.container,
            request.command,
            stdin=request.stdin,
            stdout=request.stdout,
            stderr=request.stderr,
        )

    def _serve_log(
        self,
        handler: http.server.BaseHTTPRequestHandler,
        namespace: str,
        pod: str,
        container: str,
        query: dict[str, str],
    ) -> None:
        key = (namespace, pod, container)
        with self._lock:
            log = self._logs.get(key)
        if log is None:
            handler.send_error(
                404, f"container {container} of {namespace}/{pod} is not on this node"
            )
            return
        follow = query.get("follow") in ("true", "1")
        timestamps = query.get("timestamps") in ("true", "1")
        limit = int(query["limitBytes"]) if "limitBytes" in query else None
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0

        def emit(moment: datetime, line: str) -> bool:
            nonlocal sent
            text = (
                (f"{moment.strftime('%Y-%m-%dT%H:%M:%S.%fZ')} " if timestamps else "") + line + "\n"
            )
            data = text.encode()
            if limit is not None:
                data = data[: max(0, limit - sent)]
            if data:
                handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                handler.wfile.flush()
                sent += len(data)
            return limit is None or sent < limit

        with self._lock:
            lines = list(log.lines)
        since = None
        if "sinceSeconds" in query:
            since = datetime.now(tz=UTC) - timedelta(seconds=int(query["sinceSeconds"]))
        elif "sinceTime" in query:
            # RFC 3339, as the API server passes the client's time on (Z or an offset).
            since = datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00"))
        if since is not None:
            lines = [(t, text) for t, text in lines if t >= since]
        if "tailLines" in query:
            lines = lines[-int(query["tailLines"]) :] if int(query["tailLines"]) else []
        position = len(log.lines)
        with contextlib.suppress(OSError):
            going = all(emit(t, text) for t, text in lines)
            while follow and going and not self._stop.is_set():
                with self._lock:
                    if len(log.lines) == position and not log.ended:
                        self._lock.wait(timeout=0.5)
                    fresh = log.lines[position:]
                    position = len(log.lines)
                    ended = log.ended
                going = all(emit(t, text) for t, text in fresh)
                if ended and not fresh:
                    break
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()


@contextlib.contextmanager
def node_stand_in(
    plane: ControlPlane, *, grace: float = 0.3, run_commands: bool = False
) -> Iterator[NodeStandIn]:
    node = NodeStandIn(plane, grace=grace, run_commands=run_commands).start()
    try:
        yield node
    finally:
        node.stop()
