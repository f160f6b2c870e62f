"""Support for operator tests: a kmock cluster, the real operator process, and a kubelet.

The operator runs as ``python -m kubemill.substrates.kubernetes.operator`` in a subprocess
against :class:`~kmock_cluster.KubeCluster` served on 127.0.0.1; the tests act as user
(create jobs), kubelet (set pod statuses) and controllers, and read what the operator did
from the cluster's request log and objects.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubemill.kinds import crds, engines, entries, entry_for
from kubemill.substrates.kubernetes.client.connection import USER_AGENT as CLIENT_USER_AGENT
from kubemill.substrates.kubernetes.install import Rule, operator_rules, permits
from support.control_plane import free_ports
from support.kmock_cluster import Call, ClusterThread, write_kubeconfig
from support.upstream_crds import upstream_crd
from support.waiting import eventually

GROUP_PATH = "/apis/kubemill.dev/v1"
ALL_OPERATOR_CALLS: list[Call] = []
"""Every request any operator made in this test session (checked against the RBAC rules)."""


def free_port() -> int:
    return free_ports(1)[0]


def now_stamp() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the cluster ---------------------------------------------------------------------------


KUBELET_FINISHES_AFTER = 0.3
"""Seconds the tests' kubelet takes to stop a deleted pod (its Terminating window)."""


class Cluster(ClusterThread):
    """A served kmock cluster with kubemill's CRDs (and Kubeflow's upstream ones) installed,
    and a kubelet that ends a deleted pod's Terminating window after
    :data:`KUBELET_FINISHES_AFTER` seconds (``kubelet_finishes_after = None`` to do it by
    hand with :meth:`finish_terminating`)."""

    def __init__(self) -> None:
        super().__init__()
        self.cluster.kubelet_finishes_after = KUBELET_FINISHES_AFTER

    def install(self) -> None:
        for crd in crds():
            self.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        for engine in entries():
            for group, version in engine.api.upstream_groups:
                crd = upstream_crd(engine.kind, group, version)
                self.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        # What installs add when asked (a TrainJob's runtimes, which the operator watches).
        for engine in engines():
            for extra in engine.extras:
                for crd in extra.crds():
                    self.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)

    def namespace(self) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.create("/api/v1/namespaces", {"metadata": {"name": name}})
        return name


@contextlib.contextmanager
def running_cluster() -> Iterator[Cluster]:
    with Cluster() as cluster:
        cluster.install()
        try:
            yield cluster
        finally:
            ALL_OPERATOR_CALLS.extend(
                c for c in cluster.calls() if c.user_agent and not c.from_tests
            )


# --- the operator --------------------------------------------------------------------------


class Operator:
    """The real operator in a subprocess (argv, no shell), with its log in a file."""

    def __init__(
        self,
        cluster: Cluster | None,
        workdir: Path,
        *args: str,
        name: str = "op",
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Against ``cluster`` (the test API server), or any server ``kubeconfig`` names."""
        self.cluster = cluster
        self.args = list(args)
        self.name = name
        self.workdir = workdir
        if kubeconfig is None:
            assert cluster is not None
            kubeconfig = write_kubeconfig(workdir / f"{name}.kubeconfig", cluster.url)
        self.kubeconfig = kubeconfig
        self.env = dict(env or {})
        self.log_path = workdir / f"{name}.log"
        self.metrics_port, self.health_port, self.progress_port = free_ports(3)
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> Operator:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), PYTHONUNBUFFERED="1", **self.env)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        # The test's own ports and identity come last: they win over any in ``args`` (a
        # Deployment's arguments name the pod's ports).
        argv = [
            sys.executable, "-m", "kubemill.substrates.kubernetes.operator",
            *self.args,
            "--metrics-port", str(self.metrics_port),
            "--health-port", str(self.health_port),
            # A progress endpoint (the Deployment's port, or a test's) on a port of its own.
            *(("--progress-port", str(self.progress_port)) if self.serves_progress else ()),
            "--bind-address", "127.0.0.1",
            "--log-level", "DEBUG",
            "--identity", self.name,
        ]  # fmt: skip
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        eventually(self.healthy, what=f"operator {self.name} to be healthy\n{self.log()}")
        return self

    @property
    def serves_progress(self) -> bool:
        return any(a.startswith("--progress-port") for a in self.args)

    def healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"operator exited with {self.process.returncode}:\n{self.log()}")
        try:
            url = f"http://127.0.0.1:{self.health_port}/healthz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def probe(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.health_port}/healthz"
        with urllib.request.urlopen(url, timeout=5) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def metrics(self) -> dict[str, float]:
        """The Prometheus samples, as ``name{labels}`` -> value."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                samples[key] = float(value)
        return samples

    def log(self) -> str:
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")

    def reconciled(self, namespace: str, name: str, resource_version: str) -> bool:
        """Whether the log shows a reconcile of the job at exactly this resourceVersion."""
        pattern = f"reconciled {namespace}/{name} at resourceVersion {resource_version}:"
        return pattern in self.log()

    def stop(self) -> None:
        """SIGTERM, as Kubernetes stops a pod; SIGKILL if it does not exit."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as on a node crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def rules_for(args: list[str]) -> list[Rule]:
    """The RBAC rules `kubemill install` grants an operator started with ``args``."""
    gang = next((a.split("=", 1)[1] for a in args if a.startswith("--gang-scheduler-name=")), None)
    return operator_rules(
        gang_scheduler=gang,
        serve_upstream_groups="--serve-upstream-groups" in args,
        clusterwide="--all-namespaces" in args
        or not any(a.startswith("--namespace") for a in args),
        history="--history=0" not in args,
    )


def resource_calls(calls: list[Call]) -> list[Call]:
    """Calls on API resources (discovery of /api, /apis, /version needs no RBAC rule)."""
    return [c for c in calls if c.plural is not None and not c.from_tests and c.user_agent]


def unpermitted(calls: list[Call], rules: list[Rule]) -> list[str]:
    """The calls ``rules`` do not allow, as ``verb group/resource`` strings."""
    return sorted(
        {
            f"{verb} {c.group}/{c.resource}"
            for c in resource_calls(calls)
            for verb in c.verbs_checked
            if not permits(rules, group=c.group or "", resource=c.resource, verb=verb)
        }
    )


@contextlib.contextmanager
def running_operator(
    cluster: Cluster, workdir: Path, *args: str, name: str = "op"
) -> Iterator[Operator]:
    operator = Operator(cluster, workdir, *args, name=name)
    first = len(cluster.calls())
    try:
        yield operator.start()
    finally:
        operator.stop()
        if operator.process is not None and operator.process.returncode not in (0, None):
            print(f"operator {name} exited with {operator.process.returncode}:\n{operator.log()}")
    # Every request the operator made must be granted by the RBAC `kubemill install` writes;
    # the SDK or CLI a test runs as a user (with the operator's kubeconfig) is not the
    # operator: it also looks in the upstream groups the cluster serves.
    made = [c for c in cluster.calls()[first:] if not c.user_agent.startswith(CLIENT_USER_AGENT)]
    missing = unpermitted(made, rules_for(operator.args))
    assert not missing, f"operator calls not covered by the install RBAC: {missing}"
    # ... and a real API server would have accepted every object it sent.
    invalid = [c for c in resource_calls(cluster.calls()[first:]) if c.status == 422]
    assert not invalid, f"invalid writes: {summarize(invalid)}: {cluster.cluster.refused}"


# --- acting as user and kubelet ------------------------------------------------------------


def job_path(kind: str, namespace: str, name: str = "", *, upstream: bool = False) -> str:
    """The REST path of a kind's jobs (in its first upstream group with ``upstream``)."""
    api = entry_for(kind).api
    prefix = GROUP_PATH
    if upstream:
        group, version = api.upstream_groups[0]
        prefix = f"/apis/{group}/{version}"
    base = f"{prefix}/namespaces/{namespace}/{api.plural}"
    return f"{base}/{name}" if name else base


def container_status(
    name: str,
    *,
    phase: str,
    exit_code: int | None = None,
    restart_count: int = 0,
    reason: str | None = None,
) -> dict[str, Any]:
    """A containerStatuses entry as a kubelet writes it for a pod in ``phase``."""
    status: dict[str, Any] = {
        "name": name,
        "image": "example:latest",
        "imageID": "",
        "restartCount": restart_count,
        "ready": phase == "Running",
        "started": phase == "Running",
    }
    if phase == "Running":
        status["state"] = {"running": {"startedAt": now_stamp()}}
    elif phase in ("Succeeded", "Failed"):
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        status["state"] = {
            "terminated": {
                "exitCode": code,
                "reason": reason or ("Completed" if code == 0 else "Error"),
                "startedAt": now_stamp(),
                "finishedAt": now_stamp(),
            }
        }
    else:
        status["state"] = {"waiting": {"reason": "ContainerCreating"}}
    if restart_count and phase == "Running":
        status["lastState"] = {
            "terminated": {"exitCode": exit_code or 1, "reason": "Error", "finishedAt": now_stamp()}
        }
    return status


def replica_set(
    cluster: Cluster, namespace: str, deployment: dict[str, Any], *, suffix: str = "5d8f"
) -> dict[str, Any]:
    """The ReplicaSet the Deployment controller makes of ``deployment`` (the test API server
    runs no controllers: the test plays them)."""
    meta = deployment["metadata"]
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{suffix}",
            "labels": deployment["spec"]["template"]["metadata"]["labels"],
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": deployment["spec"],
    }
    created: dict[str, Any] = cluster.create(
        f"/apis/apps/v1/namespaces/{namespace}/replicasets", body
    )
    return created


def start_pod(cluster: Cluster, namespace: str, owner: dict[str, Any], index: int) -> str:
    """Create one pod of the ReplicaSet ``owner`` as its controller would, bound to a node."""
    template = owner["spec"]["template"]
    name = f"{owner['metadata']['name']}-{index}"
    reference = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    metadata = {**template["metadata"], "name": name, "ownerReferences": [reference]}
    cluster.create(
        f"/api/v1/namespaces/{namespace}/pods", {"metadata": metadata, "spec": template["spec"]}
    )
    cluster.bind(namespace, name)
    return name


class Kubelet:
    """Moves pods through their phases by patching pods/status, as the kubelet does."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace

    def set(
        self,
        pod: str,
        phase: str,
        *,
        container: str,
        exit_code: int | None = None,
        restart_count: int = 0,
        reason: str | None = None,
        ready: bool | None = None,
    ) -> None:
        """Report ``phase``; a Running pod is Ready unless ``ready=False`` (a readiness
        probe not passing yet), in the same status write."""
        is_ready = phase == "Running" if ready is None else ready
        entry = container_status(
            container, phase=phase, exit_code=exit_code, restart_count=restart_count, reason=reason
        )
        entry["ready"] = is_ready
        status: dict[str, Any] = {
            "phase": phase,
            "startTime": now_stamp(),
            "conditions": [{"type": "Ready", "status": "True" if is_ready else "False"}],
            "containerStatuses": [entry],
        }
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}"
        if phase != "Pending" and not self.cluster.get(path)["spec"].get("nodeName"):
            # The scheduler binds a pod before its kubelet reports on it.
            self.cluster.bind(self.namespace, pod)
        self.cluster.patch(f"{path}/status", {"status": status})


# --- assertions on what the operator did ---------------------------------------------------


def writes(calls: list[Call]) -> list[Call]:
    return [c for c in calls if c.is_write]


def summarize(calls: list[Call]) -> list[str]:
    """Compact ``VERB plural/name status`` lines for assertion messages."""
    return [f"{c.method} {c.resource} {c.name or ''} -> {c.status}" for c in calls]


def condition(job: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions", []):
        if cond["type"] == kind:
            found: dict[str, Any] = cond
            return found
    return None


def is_true(job: Mapping[str, Any] | None, kind: str) -> bool:
    cond = condition(job or {}, kind)
    return cond is not None and cond["status"] == "True"
