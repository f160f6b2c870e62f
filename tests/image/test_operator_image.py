"""The shipped operator image, run against the test API server.

The image built by ``scripts/build-image.sh`` (see ``conftest.py``) is what a user's cluster
runs, so it is tested as such: its configuration (user 65532, entry point), what it holds
(no compilers, no test dependencies), and ``kubemill operator`` started from inside it --
``buildah run --isolation chroot`` as uid 65532 on the host's network -- against the kmock
cluster of the operator tests (``tests/support/kmock_cluster.py``): a TFJob gets its pods,
and its status follows the pods.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from image_support import USER, buildah, container, run_in

from kubemill import __version__
from support.kmock_cluster import write_kubeconfig
from support.operator_jobs import tfjob
from support.operator_support import (
    Cluster,
    Kubelet,
    free_port,
    is_true,
    job_path,
    running_cluster,
)
from support.waiting import eventually

# One worker builds (or takes) the images: see tests/image/conftest.py.
pytestmark = [pytest.mark.image, pytest.mark.xdist_group("image")]

T = TypeVar("T")


def test_the_image_runs_kubemill_operator_as_uid_65532(operator_image: str) -> None:
    config = json.loads(buildah("inspect", "--type", "image", operator_image))["OCIv1"]["config"]

    assert config["User"] == USER
    assert config["Entrypoint"] == ["kubemill"]
    assert config["Cmd"][0] == "operator"
    assert config["Labels"]["org.opencontainers.image.version"] == __version__


def test_the_image_holds_kubemill_and_no_compilers_or_test_dependencies(
    operator_image: str,
) -> None:
    probe = (
        "import importlib.util, json, shutil, subprocess\n"
        "tests = ['pytest', 'kmock', 'mypy', 'ruff', 'hypothesis', 'pip', 'torch', 'tensorflow']\n"
        "print(json.dumps({\n"
        "  'modules': [m for m in tests if importlib.util.find_spec(m)],\n"
        "  'compilers': [c for c in ('gcc', 'cc', 'c++', 'clang', 'make') if shutil.which(c)],\n"
        "  'version': subprocess.run(['kubemill', 'version', '--client'],\n"
        "                            capture_output=True, text=True).stdout,\n"
        "}))\n"
    )
    with container(operator_image) as name:
        done = subprocess.run(
            run_in(name, "python", "-c", probe), capture_output=True, text=True, check=False
        )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["modules"] == []
    assert found["compilers"] == []
    assert found["version"].startswith(f"kubemill {__version__} (Python 3.11")


@dataclass
class ImageOperator:
    """``kubemill operator`` running inside the image."""

    process: subprocess.Popen[bytes]
    health_port: int
    log_path: Path
    container: str
    written: list[str] | None = None
    """What the run left in the container's own layer (set when it stops)."""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the operator exited with {self.process.returncode}:\n{self.log()}")
        url = f"http://127.0.0.1:{self.health_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False


@contextlib.contextmanager
def operator_in_image(
    image: str, cluster: Cluster, workdir: Path, *args: str
) -> Iterator[ImageOperator]:
    """``kubemill operator`` inside the image until the block ends (SIGTERM, as a kubelet).

    The kubeconfig is mounted read-only; the operator, as uid 65532, can write nowhere but
    ``/tmp`` (as in the Deployment, whose root filesystem is read-only).
    """
    config = workdir / "config"
    config.mkdir()
    config.chmod(0o755)  # the operator's user must read it; pytest's tmp dirs are 0700
    write_kubeconfig(config / "kubeconfig", cluster.url).chmod(0o644)
    health = free_port()
    log = workdir / "operator.log"
    argv = [
        "env", "KUBECONFIG=/config/kubeconfig", "kubemill", "operator",
        "--metrics-port", "0", "--health-port", str(health), "--bind-address", "127.0.0.1",
        "--log-level", "DEBUG", *args,
    ]  # fmt: skip
    with container(image) as name, log.open("wb") as out:
        process = subprocess.Popen(
            run_in(name, *argv, volumes=(f"{config}:/config:ro",)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        running = ImageOperator(process, health, log, name)
        try:
            yield running
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
            running.written = written_layer(name)


def written_layer(name: str) -> list[str]:
    """The paths in the container's writable (overlay "diff") layer."""
    merged = Path(buildah("mount", name).strip())
    try:
        layer = merged.parent / "diff"
        assert layer.is_dir(), f"no overlay layer at {layer}: containers-storage must use overlay"
        return sorted(str(p.relative_to(layer)) for p in layer.rglob("*"))
    finally:
        subprocess.run(["buildah", "umount", name], capture_output=True, check=False)


def test_the_operator_in_the_image_runs_a_tfjob(operator_image: str, tmp_path: Path) -> None:
    with running_cluster() as cluster:
        namespace = cluster.namespace()
        job = job_path("TFJob", namespace, "smoke")
        with operator_in_image(operator_image, cluster, tmp_path, "--namespace", namespace) as op:

            def wait(check: Callable[[], T], what: str) -> T:
                try:
                    return eventually(check, what=what)
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\noperator log:\n{op.log()}") from None

            wait(op.healthy, "a healthy operator")
            started = op.log()
            assert f"kubemill operator {__version__} (Python 3.11" in started
            assert f"namespaces=['{namespace}']" in started

            cluster.create(job_path("TFJob", namespace), tfjob("smoke", chief=0, workers=2))
            pods_path = f"/api/v1/namespaces/{namespace}/pods"
            pods = wait(lambda: len(found := cluster.list(pods_path)) == 2 and found, "two pods")
            names = sorted(p["metadata"]["name"] for p in pods)
            assert names == ["smoke-worker-0", "smoke-worker-1"]
            kubelet = Kubelet(cluster, namespace)
            for pod in names:
                kubelet.set(pod, "Running", container="tensorflow")
            running = wait(
                lambda: is_true(found := cluster.get(job), "Running") and found, "Running"
            )
            assert running["status"]["replicaStatuses"]["Worker"]["active"] == 2
            for pod in names:
                kubelet.set(pod, "Succeeded", container="tensorflow")
            wait(lambda: is_true(cluster.get(job), "Succeeded"), "the TFJob Succeeded")
        assert "Traceback" not in op.log(), op.log()
        # Nothing written outside /tmp: it runs with a read-only root filesystem. (buildah
        # itself makes the mount point /config and /run.)
        assert op.written is not None
        assert [p for p in op.written if p.split("/")[0] not in ("config", "run", "tmp")] == []
