"""A job pod's progress sidecar: how a replica's reports leave its pod on Kubernetes.

The program appends reports to ``$KUBEMILL_PROGRESS_FILE`` (:mod:`kubemill.progress`), here a
file in an ``emptyDir`` of the pod. A native sidecar (an init container with ``restartPolicy:
Always``: it starts before the program, and the kubelet stops it once the program's
containers ended) runs the forwarder of :mod:`kubemill.progress` from the operator's own image:
it follows the file and POSTs the latest report to the operator's progress endpoint
(:mod:`.operator.progress`), with the pod's service-account token of the
:data:`~kubemill.progress.FORWARD_AUDIENCE` audience from a projected volume. The API server
binds that token to the pod, so the operator learns from a TokenReview which pod sent it;
the job's service account needs no permission at all.

:func:`add_progress` lays all of it onto a pod :func:`~.build.build_pod` built, when the
operator runs with a progress endpoint (:class:`ProgressSidecar`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubemill.progress import FORWARD_AUDIENCE, PROGRESS_FILE_ENV

PROGRESS_PORT = 8082
"""The operator's progress endpoint port, in its Deployment and Service."""
PROGRESS_PATH = "/progress"
"""The endpoint's path: a POST of one replica's latest report."""
VOLUME = "kubemill-progress"
"""The ``emptyDir`` the program writes its reports to and the sidecar reads."""
TOKEN_VOLUME = "kubemill-progress-token"  # noqa: S105 - a volume's name
"""The projected service-account token of the kubemill audience (the sidecar's only)."""
SIDECAR = "kubemill-progress"
"""The sidecar container's name."""
DIRECTORY = "/var/run/kubemill/progress"
REPORTS_FILE = f"{DIRECTORY}/reports.jsonl"
TOKEN_DIRECTORY = "/var/run/kubemill/progress-token"  # noqa: S105 - a path
TOKEN_PATH = f"{TOKEN_DIRECTORY}/token"
TOKEN_SECONDS = 600
"""The token's lifetime (the shortest the API server grants); the kubelet renews it at 80%,
and the forwarder reads it afresh for every report."""
FORWARDER = ("python", "-c", "import sys, kubemill.progress as p; sys.exit(p.main())")
"""How the sidecar runs the forwarder: its ``main`` in the image's Python (``-m`` would load
the module twice, as ``kubemill`` and as ``__main__``, and warn about it)."""
RESOURCES = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"cpu": "100m", "memory": "64Mi"},
}
"""The forwarder wakes twice a second and sends a small report at most every 2 s."""


@dataclass(frozen=True)
class ProgressSidecar:
    """What a job pod's progress sidecar runs: the operator's image, its endpoint's URL."""

    image: str
    url: str

    @classmethod
    def in_cluster(cls, image: str, *, service: str, namespace: str, port: int) -> ProgressSidecar:
        """The sidecar reaching the operator's Service ``service`` in ``namespace``."""
        return cls(image=image, url=f"http://{service}.{namespace}.svc:{port}{PROGRESS_PATH}")


def add_progress(
    spec: dict[str, Any],
    container: dict[str, Any],
    sidecar: ProgressSidecar,
    *,
    api_version: str,
    kind: str,
    namespace: str,
    name: str,
) -> None:
    """Give the pod ``spec`` the progress file (in ``container``, the replica's), the
    token volume and the forwarder sidecar of the job ``kind`` ``namespace/name``."""
    spec["volumes"] = [
        *spec.get("volumes", []),
        {"name": VOLUME, "emptyDir": {"sizeLimit": "64Mi"}},
        {
            "name": TOKEN_VOLUME,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": FORWARD_AUDIENCE,
                            "expirationSeconds": TOKEN_SECONDS,
                            "path": TOKEN_PATH.rsplit("/", 1)[1],
                        }
                    }
                ]
            },
        },
    ]
    container["env"] = [
        *container.get("env", []),
        {"name": PROGRESS_FILE_ENV, "value": REPORTS_FILE},
    ]
    container["volumeMounts"] = [
        *container.get("volumeMounts", []),
        {"name": VOLUME, "mountPath": DIRECTORY},
    ]
    forwarder = {
        "name": SIDECAR,
        "image": sidecar.image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "command": list(FORWARDER),
        "args": [
            *("--forward", sidecar.url, "--token-file", TOKEN_PATH, "--file", REPORTS_FILE),
            *("--api-version", api_version, "--kind", kind),
            *("--namespace", namespace, "--name", name),
        ],
        "resources": {part: dict(values) for part, values in RESOURCES.items()},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": VOLUME, "mountPath": DIRECTORY, "readOnly": True},
            {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIRECTORY, "readOnly": True},
        ],
    }
    spec["initContainers"] = [*spec.get("initContainers", []), forwarder]
