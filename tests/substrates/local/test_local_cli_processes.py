"""No process outlives its job through the real ``kubemill`` command (issue 7): a replica
that daemonises leaves nothing after ``kubemill run`` ends and after ``kubemill delete``,
in the foreground (the CLI process is the subreaper) and detached.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from local_support import DAEMONISE, assert_gone, daemons

KUBEMILL = Path(sys.executable).parent / "kubemill"


@pytest.fixture
def cli_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {
        **os.environ,
        "KUBEMILL_STATE_DIR": str(tmp_path / "state"),
        "KUBEMILL_CONFIG": str(tmp_path / "no-config.yaml"),
    }
    env.pop("KUBEMILL_SUBSTRATE", None)
    yield env
    listed = subprocess.run(
        [str(KUBEMILL), "get", "-o", "name"], env=env, capture_output=True, text=True, timeout=60
    )
    for line in listed.stdout.split():
        subprocess.run([str(KUBEMILL), "delete", line.rpartition("/")[2]], env=env, timeout=60)


def manifest(tmp_path: Path, name: str) -> Path:
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "pytorch",
                                    "image": "python",
                                    "command": ["python", "-c", DAEMONISE],
                                }
                            ]
                        }
                    },
                }
            }
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def kubemill(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBEMILL), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("code", [0, 3])
def test_kubemill_run_leaves_no_daemon(cli_env: dict[str, str], tmp_path: Path, code: int) -> None:
    run = subprocess.Popen(
        [str(KUBEMILL), "run", str(manifest(tmp_path, "fg"))],
        env=cli_env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = daemons(tmp_path)
        (tmp_path / "go").write_text(str(code))
        assert run.wait(timeout=120) == (0 if code == 0 else 1)
        assert_gone(started)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_kubemill_delete_leaves_no_daemon(
    cli_env: dict[str, str], tmp_path: Path, detach: bool
) -> None:
    args = ["run", "--detach"] if detach else ["run"]
    run = subprocess.Popen(
        [str(KUBEMILL), *args, str(manifest(tmp_path, "del"))],
        env=cli_env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = daemons(tmp_path)
        deleted = kubemill(cli_env, tmp_path, "delete", "del")
        assert deleted.returncode == 0, deleted.stderr
        run.wait(timeout=120)
        assert_gone(started)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
