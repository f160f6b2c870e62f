"""The node stand-in's container runtime: a played pod's commands as local processes.

:class:`NodeStandIn` (tests/support/node.py) starts a process here for what ``kubectl exec``
asks of a pod, and, when a test opts in (``run_commands``), for each container's own
command. No image exists: the "image" is this machine with the tests' Python first on
``PATH``. What a container gets, as the kubelet would give it:

- **argv**: ``command`` + ``args`` after ``$(VAR)`` expansion over the container's env; an
  exec's argv as the API server passed it. Never a shell string.
- **env**: ``PATH`` and ``HOME`` (the image's), ``HOSTNAME`` (the pod's name), the
  ``kubernetes`` service's variables (``KUBERNETES_SERVICE_HOST``/``PORT``: the real API
  server's loopback address, as kube-proxy would route the service's cluster IP), then the
  container's ``env`` (``value`` with ``$(VAR)`` expansion, ``fieldRef``, ``configMapKeyRef``,
  ``secretKeyRef``).
- **volumes** at their ``mountPath``/``subPath``: ``configMap``, ``secret``, ``emptyDir``,
  ``downwardAPI``, ``hostPath`` and ``projected`` (its ``serviceAccountToken`` from the real
  TokenRequest API, bound to the pod, as the kubelet asks for it: so the automounted
  ``kube-api-access`` volume holds the pod's ServiceAccount's real token, the cluster CA and
  the namespace). They are read through the API as the node (the Node authorizer allows
  what the pod references), written under the pod's own directory, and mounted in a mount
  namespace of the process's own by :mod:`support.pod_enter`. The pod's ``/etc/resolv.conf``
  names no reachable server (there is no cluster DNS; look-ups fail at once on loopback and
  nothing leaves the machine).
- the process leads its own process group, so stopping it stops what it started.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubemill.substrates.local.expansion import expand
from support.control_plane import ControlPlane

Pod = dict[str, Any]
ENTER = str(Path(__file__).with_name("pod_enter.py"))
VOLUME_WAIT = 30.0
"""Seconds a volume's ConfigMap or Secret may take to appear (or the node to be allowed to
read it: the Node authorizer learns a new pod's references from its own watch)."""
RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


class PodRuntimeError(Exception):
    """A container cannot start: the reason, for the container's status and the test."""


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool


@dataclass
class Sandbox:
    """A pod's directory: its volumes, and each container's mounts."""

    root: Path
    mounts: dict[str, list[Mount]] = field(default_factory=dict)
    spawns: int = 0


class PodRuntime:
    """Processes for the pods of ``plane``'s Node (see the module docstring)."""

    def __init__(self, plane: ControlPlane, root: Path) -> None:
        self.plane = plane
        self.root = root
        self._lock = threading.Lock()
        self._sandboxes: dict[str, Sandbox] = {}
        self._preparing: dict[str, threading.Lock] = {}

    # --- what the stand-in asks ---

    def spawn(
        self,
        pod: Pod,
        container: str,
        argv: list[str],
        *,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> subprocess.Popen[bytes]:
        """``argv`` running in ``container`` of ``pod``; OSError (with the reason) when it
        cannot start, as a runtime's exec fails."""
        spec = container_spec(pod, container)
        try:
            sandbox = self.sandbox(pod)
            env = self.environment(pod, spec)
        except PodRuntimeError as exc:
            raise OSError(str(exc)) from None
        with self._lock:
            sandbox.spawns += 1
            scratch = sandbox.root / "spawns" / str(sandbox.spawns)
        scratch.mkdir(parents=True)
        cwd = spec.get("workingDir") or str(sandbox.root / "cwd")
        read_end, write_end = os.pipe()
        enter = {
            "mounts": [
                {"source": str(m.source), "target": m.target, "readOnly": m.read_only}
                for m in sandbox.mounts.get(container, [])
            ],
            "scratch": str(scratch),
            "cwd": cwd,
            "errfd": write_end,
        }
        pipe = subprocess.PIPE
        try:
            process = subprocess.Popen(
                [sys.executable, ENTER, json.dumps(enter), *argv],
                stdin=pipe if stdin else subprocess.DEVNULL,
                stdout=pipe if stdout else subprocess.DEVNULL,
                stderr=pipe if stderr else subprocess.DEVNULL,
                env=env,
                pass_fds=(write_end,),
                start_new_session=True,
            )
        finally:
            os.close(write_end)
        with os.fdopen(read_end, "rb") as errors:
            failure = errors.read().decode(errors="replace")
        if failure:
            process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
            raise OSError(failure)
        return process

    def command(self, pod: Pod, container: str) -> list[str]:
        """The container's own argv (``command`` + ``args``, expanded), or [] when it has
        none to run here (no image gives it an entrypoint: the seed's ``command: [""]``)."""
        spec = container_spec(pod, container)
        argv = [*(spec.get("command") or []), *(spec.get("args") or [])]
        if not argv or not argv[0]:
            return []
        env = self.environment(pod, spec)
        return [expand(word, env) for word in argv]

    def forget(self, uid: str) -> None:
        """The pod is gone: its directory goes too."""
        with self._lock:
            sandbox = self._sandboxes.pop(uid, None)
        if sandbox is not None:
            shutil.rmtree(sandbox.root, ignore_errors=True)

    # --- the pod's world ---

    def sandbox(self, pod: Pod) -> Sandbox:
        """The pod's directory with its volumes written (once per pod)."""
        uid = pod["metadata"]["uid"]
        with self._lock:
            gate = self._preparing.setdefault(uid, threading.Lock())
        with gate:
            with self._lock:
                if uid in self._sandboxes:
                    return self._sandboxes[uid]
            meta = pod["metadata"]
            root = self.root / f"{meta['namespace']}_{meta['name']}_{uid}"
            (root / "cwd").mkdir(parents=True, exist_ok=True)
            (root / "etc").mkdir(exist_ok=True)
            (root / "etc" / "resolv.conf").write_text(RESOLV_CONF)
            volumes = {v["name"]: self._volume(pod, v, root / "volumes") for v in volumes_of(pod)}
            sandbox = Sandbox(root)
            for container in pod["spec"]["containers"]:
                mounts = [Mount(root / "etc" / "resolv.conf", "/etc/resolv.conf", True)]
                for mount in container.get("volumeMounts", []):
                    source = volumes[mount["name"]]
                    if mount.get("subPath"):
                        source = source / mount["subPath"]
                    mounts.append(Mount(source, mount["mountPath"], bool(mount.get("readOnly"))))
                sandbox.mounts[container["name"]] = mounts
            with self._lock:
                self._sandboxes[uid] = sandbox
            return sandbox

    def environment(self, pod: Pod, container: dict[str, Any]) -> dict[str, str]:
        port = str(self.plane.state.apiserver_port) if self.plane.state else ""
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": os.environ.get("HOME", "/root"),
            "HOSTNAME": pod["metadata"]["name"],
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": port,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
        }
        own: dict[str, str] = {}
        namespace = pod["metadata"]["namespace"]
        for var in container.get("env", []):
            name = var["name"]
            if "valueFrom" not in var:
                own[name] = expand(var.get("value", ""), own)
                continue
            source = var["valueFrom"]
            if "fieldRef" in source:
                own[name] = field_value(pod, source["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                own[name] = self._read("configmaps", namespace, ref["name"])["data"][ref["key"]]
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                data = self._read("secrets", namespace, ref["name"])["data"][ref["key"]]
                own[name] = base64.b64decode(data).decode()
            else:
                raise PodRuntimeError(f"env {name}: {sorted(source)} is not played by the node")
        return env | own

    def _volume(self, pod: Pod, volume: dict[str, Any], root: Path) -> Path:
        name = str(volume["name"])
        target = root / name
        namespace = pod["metadata"]["namespace"]
        if "emptyDir" in volume:
            target.mkdir(parents=True)
        elif "hostPath" in volume:
            return Path(str(volume["hostPath"]["path"]))
        elif "configMap" in volume or "secret" in volume:
            kind = "configMap" if "configMap" in volume else "secret"
            source = volume[kind]
            object_name = source.get("name") or source.get("secretName")
            files = self._keys(kind, namespace, object_name, source.get("items"))
            write_files(target, files, source.get("defaultMode", 0o644))
        elif "downwardAPI" in volume:
            source = volume["downwardAPI"]
            files = [
                (item["path"], field_value(pod, item["fieldRef"]["fieldPath"]).encode(), None)
                for item in source.get("items", [])
            ]
            write_files(target, files, source.get("defaultMode", 0o644))
        elif "projected" in volume:
            files = []
            for part in volume["projected"].get("sources", []):
                files += self._projected(pod, part)
            write_files(target, files, volume["projected"].get("defaultMode", 0o644))
        else:
            raise PodRuntimeError(f"volume {name}: its kind is not played by the node stand-in")
        return target

    def _projected(self, pod: Pod, part: dict[str, Any]) -> list[tuple[str, bytes, int | None]]:
        namespace = pod["metadata"]["namespace"]
        if "serviceAccountToken" in part:
            source = part["serviceAccountToken"]
            return [(source["path"], self._token(pod, source).encode(), None)]
        if "configMap" in part or "secret" in part:
            kind = "configMap" if "configMap" in part else "secret"
            return self._keys(kind, namespace, part[kind]["name"], part[kind].get("items"))
        if "downwardAPI" in part:
            return [
                (item["path"], field_value(pod, item["fieldRef"]["fieldPath"]).encode(), None)
                for item in part["downwardAPI"].get("items", [])
            ]
        raise PodRuntimeError(f"projected source {sorted(part)} is not played by the node")

    def _token(self, pod: Pod, source: dict[str, Any]) -> str:
        """The pod's ServiceAccount's token, bound to the pod, as the kubelet requests it."""
        meta = pod["metadata"]
        account = pod["spec"].get("serviceAccountName") or "default"
        spec: dict[str, Any] = {
            "expirationSeconds": int(source.get("expirationSeconds", 3600)),
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        }
        if source.get("audience"):
            spec["audiences"] = [source["audience"]]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
        answer = self._as_node("POST", path, body)
        return str(answer["status"]["token"])

    def _keys(
        self, kind: str, namespace: str, name: str, items: list[dict[str, Any]] | None
    ) -> list[tuple[str, bytes, int | None]]:
        resource = "configmaps" if kind == "configMap" else "secrets"
        found = self._read(resource, namespace, name)
        data: dict[str, bytes] = {}
        for key, value in (found.get("data") or {}).items():
            data[key] = base64.b64decode(value) if resource == "secrets" else value.encode()
        for key, value in (found.get("binaryData") or {}).items():
            data[key] = base64.b64decode(value)
        if items is None:
            return [(key, value, None) for key, value in data.items()]
        return [(i["path"], data[i["key"]], i.get("mode")) for i in items]

    def _read(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        return self._as_node("GET", f"/api/v1/namespaces/{namespace}/{resource}/{name}")  # type: ignore[no-any-return]

    def _as_node(self, method: str, path: str, body: Any = None) -> Any:
        """A request as the node, again while the object is missing or the Node authorizer
        has not yet seen the pod that references it."""
        deadline = time.monotonic() + VOLUME_WAIT
        while True:
            try:
                return self.plane.request(method, path, body, identity="node")
            except urllib.error.HTTPError as exc:
                if exc.code not in (403, 404) or time.monotonic() > deadline:
                    raise PodRuntimeError(f"{method} {path}: {exc.code} {exc.msg}") from None
            time.sleep(0.1)


def container_spec(pod: Pod, name: str) -> dict[str, Any]:
    for container in pod["spec"]["containers"]:
        if container["name"] == name:
            return container  # type: ignore[no-any-return]
    raise PodRuntimeError(f"pod {pod['metadata']['name']} has no container {name!r}")


def volumes_of(pod: Pod) -> list[dict[str, Any]]:
    return pod["spec"].get("volumes") or []


def field_value(pod: Pod, path: str) -> str:
    """A ``fieldRef``'s value, for the fields the downward API offers."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": status.get("hostIP", "127.0.0.1"),
        "status.podIP": status.get("podIP", ""),
    }
    if path in simple:
        return str(simple[path])
    for prefix, mapping in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(f"{prefix}['") and path.endswith("']"):
            return str((meta.get(mapping) or {}).get(path[len(prefix) + 2 : -2], ""))
    raise PodRuntimeError(f"fieldRef {path!r} is not played by the node stand-in")


def write_files(target: Path, files: list[tuple[str, bytes, int | None]], default: int) -> None:
    """A volume's files, each with its mode (the item's, else the volume's default)."""
    target.mkdir(parents=True, exist_ok=True)
    for relative, content, mode in files:
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode if mode is not None else default)
