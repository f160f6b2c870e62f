"""Helpers of the CLI tests: job manifests and the real ``kubemill`` as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

KUBEMILL = Path(sys.executable).parent / "kubemill"


def pytorch_job(
    name: str,
    *,
    master: str,
    worker: str | None = None,
    workers: int = 1,
    restart_policy: str = "Never",
) -> dict[str, object]:
    """A PyTorchJob whose replicas run ``python -c`` snippets (no engine needed)."""

    def replica(code: str, replicas: int) -> dict[str, object]:
        return {
            "replicas": replicas,
            "restartPolicy": restart_policy,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": "python",
                            "command": ["python", "-c", code],
                        }
                    ]
                }
            },
        }

    specs = {"Master": replica(master, 1)}
    if worker is not None:
        specs["Worker"] = replica(worker, workers)
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }


def write_manifest(directory: Path, manifest: dict[str, object]) -> Path:
    meta = manifest["metadata"]
    assert isinstance(meta, dict)
    path = directory / f"{meta['name']}.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


class Kubemill:
    """Runs the real ``kubemill`` console script against one state directory."""

    def __init__(self, state_dir: Path, cwd: Path) -> None:
        self.env = {**os.environ, "KUBEMILL_STATE_DIR": str(state_dir)}
        self.env.pop("KUBEMILL_SUBSTRATE", None)
        self.cwd = cwd

    def __call__(
        self, *args: str, timeout: float = 120, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(KUBEMILL), *args],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubemill {' '.join(args)} exited {done.returncode}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        return done

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(KUBEMILL), *args],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def job(self, name: str) -> dict[str, object]:
        """The job as ``kubemill get NAME -o json`` shows it."""
        done = self(*["get", name, "-o", "json"], check=True)
        loaded = json.loads(done.stdout)
        assert isinstance(loaded, dict)
        return loaded


def conditions(job: dict[str, object]) -> dict[str, dict[str, str]]:
    """The job's conditions by type."""
    status = job.get("status")
    assert isinstance(status, dict)
    return {c["type"]: c for c in status.get("conditions", [])}


def lines(text: str) -> Sequence[str]:
    return [line for line in text.splitlines() if line.strip()]
