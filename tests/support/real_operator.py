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
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE, NAME
from support.control_plane import ControlPlane, kubeconfig
from support.operator_support import Operator
from support.waiting import eventually

SERVICE_ACCOUNT = f"system:serviceaccount:{DEFAULT_NAMESPACE}:{NAME}"
KUBEMILL = str(Path(sys.executable).with_name("kubemill"))
"""The console script of the Python running the tests (the operator image's entry point)."""


def service_account_kubeconfig(
    plane: ControlPlane,
    path: Path,
    *,
    seconds: int = 7200,
    namespace: str = DEFAULT_NAMESPACE,
    account: str = NAME,
) -> Path:
    """A kubeconfig holding a TokenRequest token for a ServiceAccount (by default the
    installed operator's)."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    answer = plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", request
    )
    config = kubeconfig(
        plane.url, plane.pki.path("ca", "crt"), user=account, token=answer["status"]["token"]
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


class RealOperator(Operator):
    """The operator process with the Deployment's arguments (``kubemill operator ...``),
    authenticated by :func:`service_account_kubeconfig`, with the Deployment's env."""

    def __init__(
        self, plane: ControlPlane, workdir: Path, args: list[str], name: str = "op"
    ) -> None:
        command = args[1:] if args[:1] == ["operator"] else args
        super().__init__(
            None,
            workdir,
            *command,
            name=name,
            kubeconfig=service_account_kubeconfig(plane, workdir / f"{name}.kubeconfig"),
            env={"POD_NAMESPACE": DEFAULT_NAMESPACE, "POD_NAME": name},
        )
        self.plane = plane

    def __enter__(self) -> RealOperator:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def failed_creates(self, namespace: str) -> list[str]:
        """Creates the operator's ServiceAccount made in ``namespace`` that were answered
        with an error (what it creates, it creates in an order the server accepts)."""
        return sorted(
            f"{describe(e.get('objectRef', {}))} {e.get('responseStatus', {}).get('code')}"
            for e in self.plane.audit(SERVICE_ACCOUNT)
            if e.get("stage") == "ResponseComplete"
            and e["verb"] == "create"
            and e.get("objectRef", {}).get("namespace") == namespace
            and e.get("responseStatus", {}).get("code", 0) >= 400
        )

    def refused(self) -> list[str]:
        """Requests of the operator's ServiceAccount the RBAC authorizer refused: a
        permission the install lacks."""
        return refusals(self.plane, SERVICE_ACCOUNT).by_rbac

    def refused_by_admission(self) -> list[str]:
        """Requests of the operator's ServiceAccount RBAC allowed and an admission plugin then
        refused (see :class:`Refusals`): no permission is missing, and the operator retries."""
        return refusals(self.plane, SERVICE_ACCOUNT).by_admission


@dataclass(frozen=True)
class Refusals:
    """A user's requests the API server answered 403, as its audit log tells: ``by_rbac``
    where the authorizer's decision was ``forbid`` (``verb group/resource in namespace``),
    ``by_admission`` where RBAC allowed and an admission plugin refused (a namespace
    terminating, a ServiceAccount not found, ...), with the server's message."""

    by_rbac: list[str]
    by_admission: list[str]


def refusals(plane: ControlPlane, username: str) -> Refusals:
    by_rbac: set[str] = set()
    by_admission: set[str] = set()
    for event in plane.audit(username):
        status = event.get("responseStatus", {})
        if event.get("stage") != "ResponseComplete" or status.get("code") != 403:
            continue
        request = f"{event['verb']} {describe(event.get('objectRef', {}))}"
        if event.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid":
            by_rbac.add(request)
        else:
            by_admission.add(f"{request}: {status.get('message', '')}")
    return Refusals(sorted(by_rbac), sorted(by_admission))


def describe(ref: dict[str, Any]) -> str:
    group = ref.get("apiGroup", "")
    resource = ref.get("resource", "")
    sub = ref.get("subresource")
    return (
        f"{group}/{resource}"
        + (f"/{sub}" if sub else "")
        + (f" in {ref['namespace']}" if ref.get("namespace") else "")
    )


def delete_schedule(plane: ControlPlane, path: str, *, timeout: float = 60.0) -> None:
    """Delete the ScheduledSparkApplication at ``path`` once it is quiet: suspended first,
    and deleted once each of its runs has its driver pod. Deleted while the operator is
    still creating a run's children, the garbage collector would take the run's
    ServiceAccount from under the driver pod's create, which admission then refuses (a 403
    the operator fixture reports)."""
    plane.request(
        "PATCH", path, {"spec": {"suspend": True}}, content_type="application/merge-patch+json"
    )
    group, namespace = path.split("/namespaces/")[0], path.split("/namespaces/")[1].split("/")[0]
    schedule = plane.request("GET", path)

    def runs_have_drivers() -> bool:
        runs = plane.request("GET", f"{group}/namespaces/{namespace}/sparkapplications")["items"]
        ours = [
            r["metadata"]["name"]
            for r in runs
            if any(
                o["uid"] == schedule["metadata"]["uid"]
                for o in r["metadata"].get("ownerReferences", [])
            )
        ]
        pods = [
            p["metadata"]["name"]
            for p in plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        ]
        return all(any(pod.startswith(f"{run}-driver") for pod in pods) for run in ours)

    eventually(runs_have_drivers, timeout=timeout, what="every run's driver pod created")
    plane.request("DELETE", path)
