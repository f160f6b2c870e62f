"""A real Kubernetes control plane on this machine, for kubemill's tests.

``scripts/kube-control-plane.sh up DIR`` and the tests' fixture both run :class:`ControlPlane`:
etcd, kube-apiserver (secure port on 127.0.0.1, certificates made for the run, Node and RBAC
authorization, the usual admission plugins), kube-controller-manager and kube-scheduler, built
from Go modules by ``scripts/kube-control-plane.sh build`` (tools/kube). It registers a Node for
this machine, writes ``DIR/admin.kubeconfig``, and returns once ``/readyz`` says ok. ``down DIR``
stops every process ``up`` started, by the PIDs it recorded in ``DIR/state.json``.

What is not real: no kubelet runs (none can here). A small process of ``up``'s does what a
kubelet does to keep its Node Ready (it renews the node's Lease, as the node), so the real
node-lifecycle controller lifts the new Node's not-ready taint and keeps it schedulable; the
tests' node stand-in (:mod:`support.node`) plays the pods bound to it.

Standard library only, so that the shell script can run it with any Python 3.11.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubemill.substrates.local.spawn import tied_argv

SERVICE_CIDR = "10.96.0.0/12"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
NODE_CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "1000", "ephemeral-storage": "100Gi"}
"""The Node stands for a cluster node, not for this 2-core machine: the tests play many pods
at once, with the requests their manifests ask for, and none of them runs for real."""

READY_TIMEOUT = 120.0
"""Upper bound on the control plane becoming ready: a hang guard, not a performance claim."""

PROCESSES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "node-heartbeat",
)


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports of 127.0.0.1. Bound together: two ports asked for one
    after the other may be the same one (the kernel hands a just-closed port out again)."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def node_name() -> str:
    """This machine's host name as a Node name (a lower-case DNS subdomain)."""
    name = "".join(c if c.isalnum() or c in "-." else "-" for c in socket.gethostname().lower())
    return name.strip("-.")[:63] or "node"


# --- certificates -------------------------------------------------------------------------


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@dataclass(frozen=True)
class Identity:
    """A client or serving certificate signed by the run's CA."""

    name: str
    common_name: str
    organization: str = ""
    alt_names: tuple[str, ...] = ()
    server: bool = False


class Pki:
    """The run's certificates, made with ``openssl`` (argv lists) under ``DIR/pki``."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def path(self, name: str, suffix: str) -> Path:
        return self.dir / f"{name}.{suffix}"

    def make(self, identities: list[Identity]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        ca_key, ca_crt = self.path("ca", "key"), self.path("ca", "crt")
        # RSA, as kubeadm's: Spark's Kubernetes client (fabric8) cannot read an EC key.
        rsa = ["-newkey", "rsa:2048", "-nodes"]
        _openssl(
            "req",
            "-x509",
            *rsa,
            "-keyout",
            str(ca_key),
            "-out",
            str(ca_crt),
            "-days",
            "30",
            "-subj",
            "/CN=kubemill-test-ca",
        )
        for who in identities:
            subject = f"/CN={who.common_name}" + (
                f"/O={who.organization}" if who.organization else ""
            )
            key, csr, crt = (self.path(who.name, s) for s in ("key", "csr", "crt"))
            _openssl("req", *rsa, "-keyout", str(key), "-out", str(csr), "-subj", subject)
            extensions = self.path(who.name, "ext")
            usage = "serverAuth" if who.server else "clientAuth"
            lines = [f"extendedKeyUsage={usage}", "keyUsage=critical,digitalSignature"]
            if who.alt_names:
                lines.append("subjectAltName=" + ",".join(who.alt_names))
            extensions.write_text("\n".join(lines) + "\n")
            _openssl(
                "x509",
                "-req",
                "-in",
                str(csr),
                "-CA",
                str(ca_crt),
                "-CAkey",
                str(ca_key),
                "-CAcreateserial",
                "-days",
                "30",
                "-out",
                str(crt),
                "-extfile",
                str(extensions),
            )
        # The service-account token signing key pair.
        sa_key = self.path("service-account", "key")
        _openssl(
            "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(sa_key)
        )
        _openssl(
            "pkey", "-in", str(sa_key), "-pubout", "-out", str(self.path("service-account", "pub"))
        )


def kubeconfig(
    server: str,
    ca: Path,
    *,
    user: str,
    cert: Path | None = None,
    key: Path | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """A kubeconfig with one cluster, one user (a client certificate or a token), one context."""
    credentials: dict[str, str] = {}
    if cert is not None and key is not None:
        credentials["client-certificate-data"] = base64.b64encode(cert.read_bytes()).decode()
        credentials["client-key-data"] = base64.b64encode(key.read_bytes()).decode()
    if token is not None:
        credentials["token"] = token
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubemill-test",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": user, "context": {"cluster": "kubemill-test", "user": user}}],
        "current-context": user,
    }


# --- the control plane --------------------------------------------------------------------


@dataclass
class State:
    """What ``up`` recorded for ``down`` and for the tests (``DIR/state.json``)."""

    bin: str
    node: str
    etcd_port: int
    apiserver_port: int
    kubelet_port: int
    pids: dict[str, int] = field(default_factory=dict)


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler under ``directory``."""

    def __init__(self, directory: Path, bin_dir: Path | None = None, *, tied: bool = False) -> None:
        self.dir = directory.resolve()
        self.tied = tied
        """Whether the processes die with this one (a test session's fixture: a pytest
        killed hard leaves no etcd or kube-apiserver behind). The ``up`` command leaves
        them running on purpose."""
        self.pki = Pki(self.dir / "pki")
        self.state_path = self.dir / "state.json"
        self.state: State | None = None
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        """What this object started (``down`` from another process has only the PIDs)."""
        if bin_dir is None:
            self.state = State(**json.loads(self.state_path.read_text()))
        else:
            self.state = State(
                bin=str(bin_dir.resolve()),
                node=node_name(),
                etcd_port=0,
                apiserver_port=0,
                kubelet_port=0,
            )
            self._choose_ports()

    # --- what tests read ---

    @property
    def url(self) -> str:
        assert self.state is not None
        return f"https://127.0.0.1:{self.state.apiserver_port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    @property
    def node(self) -> str:
        assert self.state is not None
        return self.state.node

    def binary(self, name: str) -> str:
        assert self.state is not None
        return str(Path(self.state.bin) / name)

    def ssl_context(self, identity: str = "admin") -> ssl.SSLContext:
        """A TLS context trusting the run's CA and presenting ``identity``'s certificate."""
        context = ssl.create_default_context(cafile=str(self.pki.path("ca", "crt")))
        context.load_cert_chain(
            str(self.pki.path(identity, "crt")), str(self.pki.path(identity, "key"))
        )
        return context

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        identity: str = "admin",
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Any:
        """One API request as ``identity``; the decoded JSON answer (HTTPError on 4xx/5xx)."""
        data = (
            None
            if body is None
            else (body if isinstance(body, bytes) else json.dumps(body).encode())
        )
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", content_type)
        req.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(
                req, context=self.ssl_context(identity), timeout=timeout
            ) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            # The API server's Status says why; keep it in the error a test shows.
            answer = exc.read().decode(errors="replace")
            raise urllib.error.HTTPError(
                exc.url, exc.code, f"{method} {path}: {answer}", exc.headers, None
            ) from None
        return json.loads(raw) if raw.startswith((b"{", b"[")) else raw.decode()

    def get_or_none(self, path: str, *, identity: str = "admin") -> Any:
        """The object at ``path``, or None if there is none (404)."""
        try:
            return self.request("GET", path, identity=identity)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def new_namespace(self, prefix: str = "t") -> str:
        """A fresh namespace, returned once the controllers have settled it: the
        ServiceAccount admission plugin refuses pods until the serviceaccount controller
        has made ``default``, and the root-CA publisher adds the ``kube-root-ca.crt``
        ConfigMap a moment later, which a test that compares what a submission created
        must not see appear under it."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        settled = (
            f"/api/v1/namespaces/{name}/serviceaccounts/default",
            f"/api/v1/namespaces/{name}/configmaps/kube-root-ca.crt",
        )
        deadline = time.monotonic() + READY_TIMEOUT
        for path in settled:
            while self.get_or_none(path) is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no {path} after {READY_TIMEOUT:.0f} s")
                time.sleep(0.05)
        return name

    def kubectl(
        self,
        *args: str,
        stdin: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The built kubectl, as admin unless another ``kubeconfig`` is given (argv, no shell)."""
        config = kubeconfig or self.admin_kubeconfig
        argv = [self.binary("kubectl"), "--kubeconfig", str(config), *args]
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
            )
        return done

    # --- up and down ---

    def up(self) -> None:
        """Start everything; ready when it returns. A port another process took between
        choosing it and binding it (the tests run many servers) means new ports, and again."""
        assert self.state is not None
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        self._make_certificates()
        for attempt in range(3):
            self._write_kubeconfigs()
            self._save()
            try:
                self._start()
                return
            except BaseException:
                self.down()
                if attempt == 2 or not self._lost_a_port():
                    raise
            shutil.rmtree(self.dir / "etcd", ignore_errors=True)
            self._choose_ports()

    def _start(self) -> None:
        self._start_etcd()
        self._start_apiserver()
        self._wait_ready()
        self._start_controller_manager()
        self._start_scheduler()
        self._register_node()
        self._spawn(
            "node-heartbeat",
            [sys.executable, str(Path(__file__).resolve()), "heartbeat", str(self.dir)],
        )
        self._wait_schedulable()

    def _lost_a_port(self) -> bool:
        logs = (self.dir / "logs").glob("*.log")
        return any("address already in use" in log.read_text(errors="replace") for log in logs)

    def _choose_ports(self) -> None:
        assert self.state is not None
        etcd, peer, api, kcm, scheduler, kubelet = free_ports(6)
        self._ports = (peer, kcm, scheduler)
        self.state.etcd_port, self.state.apiserver_port, self.state.kubelet_port = (
            etcd,
            api,
            kubelet,
        )
        for log in (self.dir / "logs").glob("*.log"):
            log.rename(log.with_suffix(".log.lost-port"))

    def down(self) -> None:
        """Stop the recorded processes in the reverse order of their start, each by SIGTERM
        to its process group, then SIGKILL if it has not gone in 10 s; none survives."""
        assert self.state is not None
        for name, pid in reversed(list(self.state.pids.items())):
            process = self._processes.get(name)

            def running(process: subprocess.Popen[bytes] | None = process, pid: int = pid) -> bool:
                # Started here: Popen knows (a child not yet exec'd shows our command line).
                return process.poll() is None if process is not None else self._ours(pid)

            for sig, patience in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
                if not running():
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, sig)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)  # not yet the leader of its own session
                deadline = time.monotonic() + patience
                while running() and time.monotonic() < deadline:
                    time.sleep(0.02)
            self._reap(pid)
        self.state.pids = {}
        self._processes = {}
        self._save()

    def alive(self) -> dict[str, int]:
        """The recorded processes still running."""
        assert self.state is not None
        return {name: pid for name, pid in self.state.pids.items() if self._ours(pid)}

    # --- pieces ---

    def _ours(self, pid: int) -> bool:
        """Whether ``pid`` is still the process ``up`` started (not a reused PID)."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            self._reap(pid)
            return False
        return str(self.dir).encode() in cmdline

    @staticmethod
    def _reap(pid: int) -> None:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)

    def _save(self) -> None:
        assert self.state is not None
        self.state_path.write_text(json.dumps(asdict(self.state), indent=2) + "\n")

    def _make_certificates(self) -> None:
        assert self.state is not None
        node = self.state.node
        self.pki.make(
            [
                Identity(
                    "apiserver",
                    "kube-apiserver",
                    server=True,
                    alt_names=(
                        "IP:127.0.0.1",
                        "IP:10.96.0.1",
                        "DNS:localhost",
                        "DNS:kubernetes",
                        "DNS:kubernetes.default",
                        "DNS:kubernetes.default.svc",
                        "DNS:kubernetes.default.svc.cluster.local",
                    ),
                ),
                Identity("admin", "kubemill-admin", "system:masters"),
                Identity("controller-manager", "system:kube-controller-manager"),
                Identity("scheduler", "system:kube-scheduler"),
                Identity("node", f"system:node:{node}", "system:nodes"),
                Identity(
                    "apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"
                ),
                Identity("kubelet", node, server=True, alt_names=("IP:127.0.0.1", f"DNS:{node}")),
            ]
        )

    def _write_kubeconfigs(self) -> None:
        ca = self.pki.path("ca", "crt")
        for identity, path in (
            ("admin", self.admin_kubeconfig),
            ("controller-manager", self.dir / "controller-manager.kubeconfig"),
            ("scheduler", self.dir / "scheduler.kubeconfig"),
            ("node", self.dir / "node.kubeconfig"),
        ):
            config = kubeconfig(
                self.url,
                ca,
                user=identity,
                cert=self.pki.path(identity, "crt"),
                key=self.pki.path(identity, "key"),
            )
            path.write_text(json.dumps(config, indent=2) + "\n")
            path.chmod(0o600)

    def _spawn(self, name: str, argv: list[str]) -> None:
        assert self.state is not None
        log = (self.dir / "logs" / f"{name}.log").open("ab")
        # A session of its own, so that down() can signal the whole group.
        process = subprocess.Popen(
            tied_argv(argv, cwd=self.dir) if self.tied else argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.dir,
        )
        log.close()
        self.state.pids[name] = process.pid
        self._processes[name] = process
        self._save()

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.dir / "logs" / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _start_etcd(self) -> None:
        assert self.state is not None
        peer_port = self._ports[0]
        client = f"http://127.0.0.1:{self.state.etcd_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            [
                self.binary("etcd"),
                "--name",
                "kubemill",
                "--data-dir",
                str(self.dir / "etcd"),
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer,
                "--initial-advertise-peer-urls",
                peer,
                "--initial-cluster",
                f"kubemill={peer}",
                "--initial-cluster-state",
                "new",
                # The data lives for one test run: durability is not worth an fsync per write.
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
                "--listen-metrics-urls",
                "",
            ],
        )

    def _start_apiserver(self) -> None:
        assert self.state is not None
        pki = self.pki
        self._spawn(
            "kube-apiserver",
            [
                self.binary("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.state.etcd_port}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.state.apiserver_port}",
                "--advertise-address=127.0.0.1",
                f"--cert-dir={pki.dir}",
                f"--tls-cert-file={pki.path('apiserver', 'crt')}",
                f"--tls-private-key-file={pki.path('apiserver', 'key')}",
                f"--client-ca-file={pki.path('ca', 'crt')}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki.path('service-account', 'pub')}",
                f"--service-account-signing-key-file={pki.path('service-account', 'key')}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={pki.path('apiserver-kubelet-client', 'crt')}",
                f"--kubelet-client-key={pki.path('apiserver-kubelet-client', 'key')}",
                f"--kubelet-certificate-authority={pki.path('ca', 'crt')}",
                "--kubelet-preferred-address-types=InternalIP",
                # The kubernetes Service's endpoint would be 127.0.0.1, which Endpoints refuse;
                # no pod here reaches the API through that Service.
                "--endpoint-reconciler-type=none",
                # Every request, who made it and what was answered: the tests read it to show an
                # identity (the operator's ServiceAccount) was never refused.
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--profiling=false",
            ],
        )

    @property
    def audit_log(self) -> Path:
        return self.dir / "logs" / "audit.log"

    def audit(self, username: str | None) -> list[dict[str, Any]]:
        """The audit events of requests ``username`` made (everyone's for None), as the API
        server logged them."""
        if not self.audit_log.exists():
            return []
        events = []
        with self.audit_log.open() as log:
            for line in log:
                event = json.loads(line)
                if username is None or event.get("user", {}).get("username") == username:
                    events.append(event)
        return events

    def _write_audit_policy(self) -> Path:
        path = self.dir / "audit-policy.json"
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived", "ResponseStarted"],
            "rules": [{"level": "Metadata"}],
        }
        path.write_text(json.dumps(policy) + "\n")
        return path

    def _start_controller_manager(self) -> None:
        kubeconfig_path = str(self.dir / "controller-manager.kubeconfig")
        self._spawn(
            "kube-controller-manager",
            [
                self.binary("kube-controller-manager"),
                f"--kubeconfig={kubeconfig_path}",
                f"--authentication-kubeconfig={kubeconfig_path}",
                f"--authorization-kubeconfig={kubeconfig_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self._ports[1]}",
                f"--cert-dir={self.pki.dir / 'controller-manager-serving'}",
                f"--service-account-private-key-file={self.pki.path('service-account', 'key')}",
                f"--root-ca-file={self.pki.path('ca', 'crt')}",
                "--use-service-account-credentials=true",
                # Every default controller but those of clouds and pod CIDRs (none here).
                "--controllers=*,-nodeipam,-cloud-node-lifecycle",
                "--leader-elect=false",
                "--profiling=false",
            ],
        )

    def _start_scheduler(self) -> None:
        kubeconfig_path = str(self.dir / "scheduler.kubeconfig")
        self._spawn(
            "kube-scheduler",
            [
                self.binary("kube-scheduler"),
                f"--kubeconfig={kubeconfig_path}",
                f"--authentication-kubeconfig={kubeconfig_path}",
                f"--authorization-kubeconfig={kubeconfig_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self._ports[2]}",
                f"--cert-dir={self.pki.dir / 'scheduler-serving'}",
                "--leader-elect=false",
                "--profiling=false",
            ],
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            assert self.state is not None
            # Popen, not /proc: a child not yet exec'd still shows this Python's command line.
            for name, process in self._processes.items():
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {process.returncode}:\n{self.log_tail(name)}"
                    )
            try:
                if self.request("GET", "/readyz", timeout=5) == "ok":
                    return
            except (OSError, urllib.error.HTTPError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise RuntimeError(
            f"kube-apiserver not ready in {READY_TIMEOUT:.0f} s ({last}):\n"
            f"{self.log_tail('kube-apiserver')}"
        )

    def _register_node(self) -> None:
        """The Node, created and given its status as the node itself (NodeRestriction)."""
        assert self.state is not None
        name = self.state.node
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        }
        self.request(
            "POST",
            "/api/v1/nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}},
            identity="node",
        )
        status = {
            "capacity": NODE_CAPACITY,
            "allocatable": NODE_CAPACITY,
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.state.kubelet_port}},
            "conditions": [self._ready_condition()],
            "nodeInfo": {
                "kubeletVersion": self.version(),
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "kubemill-stand-in://0",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "",
                "osImage": "",
                "kubeProxyVersion": "",
            },
        }
        self.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {"status": status},
            identity="node",
            content_type="application/strategic-merge-patch+json",
        )

    def _wait_schedulable(self) -> None:
        """Until the node-lifecycle controller, seeing the Node Ready and its Lease renewed,
        lifts the not-ready taint the API server put on the new Node."""
        assert self.state is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            node = self.request("GET", f"/api/v1/nodes/{self.state.node}")
            if not node["spec"].get("taints"):
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"the Node kept its taints {node['spec'].get('taints')}:\n"
            f"{self.log_tail('kube-controller-manager')}"
        )

    def heartbeat(self) -> None:
        """What a kubelet does to stay Ready: renew the node's Lease every 10 s and report
        the Ready condition again every minute, as the node itself. Runs until killed."""
        assert self.state is not None
        name = self.state.node
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        reported = 0.0
        while True:
            now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now},
            }
            try:
                try:
                    current = self.request("GET", lease_path, identity="node")
                    lease["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                    self.request("PUT", lease_path, lease, identity="node")
                except urllib.error.HTTPError as exc:
                    if exc.code != 404:
                        raise
                    self.request("POST", lease_path.rsplit("/", 1)[0], lease, identity="node")
                if time.monotonic() - reported > 60:
                    self.request(
                        "PATCH",
                        f"/api/v1/nodes/{name}/status",
                        {"status": {"conditions": [self._ready_condition()]}},
                        identity="node",
                        content_type="application/strategic-merge-patch+json",
                    )
                    reported = time.monotonic()
            except OSError as exc:
                print(f"heartbeat: {exc}", flush=True)
            time.sleep(10)

    @staticmethod
    def _ready_condition() -> dict[str, str]:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubemill's node stand-in plays this node's pods",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    def version(self) -> str:
        answer = self.request("GET", "/version")
        return str(answer["gitVersion"])


def absent(plane: ControlPlane, path: str) -> bool:
    """Whether nothing is at ``path`` (404)."""
    return plane.get_or_none(path) is None


@contextlib.contextmanager
def running_control_plane(directory: Path, bin_dir: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(directory, bin_dir, tied=True)
    plane.up()
    try:
        yield plane
    finally:
        plane.down()


def build(root: Path) -> Path:
    """The binaries' directory: built once per machine (``scripts/kube-control-plane.sh build``)."""
    script = root / "scripts" / "kube-control-plane.sh"
    done = subprocess.run([str(script), "build"], check=True, capture_output=True, text=True)
    return Path(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="control_plane.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up")
    up.add_argument("dir", type=Path)
    up.add_argument("--bin", type=Path, required=True, help="the built binaries' directory")
    down = sub.add_parser("down")
    down.add_argument("dir", type=Path)
    heartbeat = sub.add_parser("heartbeat", help="keep DIR's Node Ready (started by up)")
    heartbeat.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "heartbeat":
        ControlPlane(args.dir).heartbeat()
        return 0
    if args.command == "up":
        plane = ControlPlane(args.dir, args.bin)
        if plane.state_path.exists() and ControlPlane(args.dir).alive():
            print(f"a control plane already runs in {args.dir}: `down` it first", file=sys.stderr)
            return 1
        plane.up()
        print(f"ready: Kubernetes {plane.version()} at {plane.url}, node {plane.node}")
        print(f"kubectl --kubeconfig {plane.admin_kubeconfig} get --raw /readyz")
        return 0
    if not (args.dir / "state.json").exists():
        print(f"no control plane was started in {args.dir}", file=sys.stderr)
        return 1
    plane = ControlPlane(args.dir)
    plane.down()
    left = plane.alive()
    print("stopped" if not left else f"still running: {left}")
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
