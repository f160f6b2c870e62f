"""kubemill's operator against the real control plane, as its own ServiceAccount.

The operator runs as a local process (no container runtime runs here) with the arguments of
the Deployment `kubemill install` wrote, and authenticates with a token the real TokenRequest
API issued for the installed ServiceAccount: every permission the install's RBAC lacks is
refused by the real RBAC authorizer, and :meth:`RealOperator.refused` finds it in the API
server's audit log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE, NAME
from support.control_plane import ControlPlane, free_ports, kubeconfig
from support.waiting import eventually

SERVICE_ACCOUNT = f"system:serviceaccount:{DEFAULT_NAMESPACE}:{NAME}"
KUBEMILL = str(Path(sys.executable).with_name("kubemill"))
"""The console script of the Python running the tests (the operator image's entry point)."""


def service_account_kubeconfig(plane: ControlPlane, path: Path, *, seconds: int = 7200) -> Path:
    """A kubeconfig holding a token for the installed operator's ServiceAccount."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    answer = plane.request(
        "POST", f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/serviceaccounts/{NAME}/token", request
    )
    config = kubeconfig(
        plane.url, plane.pki.path("ca", "crt"), user=NAME, token=answer["status"]["token"]
    )
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path


def run_kubemill(
    plane: ControlPlane, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The kubemill CLI as admin of ``plane`` (argv, no shell; no KUBECONFIG of the caller's)."""
    argv = [KUBEMILL, "--kubeconfig", str(plane.admin_kubeconfig), *args]
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


class RealOperator:
    """The operator process (argv, no shell), its log in a file, stopped by PID on exit."""

    def __init__(
        self, plane: ControlPlane, workdir: Path, args: list[str], name: str = "op"
    ) -> None:
        self.plane = plane
        self.name = name
        self.kubeconfig = service_account_kubeconfig(plane, workdir / f"{name}.kubeconfig")
        self.log_path = workdir / f"{name}.log"
        self.metrics_port, self.health_port = free_ports(2)
        # The Deployment runs `kubemill ARGS`; here the same, with ports of this machine.
        self.argv = [
            KUBEMILL, *args,
            "--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port),
            "--bind-address", "127.0.0.1", "--identity", name, "--log-level", "DEBUG",
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RealOperator:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), PYTHONUNBUFFERED="1",
                   POD_NAMESPACE=DEFAULT_NAMESPACE, POD_NAME=self.name)  # fmt: skip
        env.pop("KUBERNETES_SERVICE_HOST", None)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        eventually(self.healthy, timeout=60, what=f"the operator to be healthy\n{self.log()}")
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self.stop()

    def healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"the operator exited with {self.process.returncode}:\n{self.log()}")
        try:
            url = f"http://127.0.0.1:{self.health_port}/healthz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def refused(self) -> list[str]:
        """Requests of the operator's ServiceAccount the API server refused as forbidden."""
        return sorted(
            {
                f"{e['verb']} {describe(e.get('objectRef', {}))}"
                for e in self.plane.audit(SERVICE_ACCOUNT)
                if e.get("stage") == "ResponseComplete"
                and e.get("responseStatus", {}).get("code") == 403
            }
        )


def describe(ref: dict[str, Any]) -> str:
    group = ref.get("apiGroup", "")
    resource = ref.get("resource", "")
    sub = ref.get("subresource")
    return (
        f"{group}/{resource}"
        + (f"/{sub}" if sub else "")
        + (f" in {ref['namespace']}" if ref.get("namespace") else "")
    )
