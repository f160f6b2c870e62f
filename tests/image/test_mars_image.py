"""The Mars image (``scripts/build-image.sh mars``), run as a MarsCluster's pods would run it.

Its pods run ``python -m kubemill.engines.mars.pod.entrypoint supervisor|worker``, so the
image must hold kubemill beside Mars. Here the Deployments
``kubemill.deploy.kubernetes.new_cluster`` creates are carried out by hand, from inside the
image: for each role a working container (``buildah run --isolation chroot`` on the host's
network, loopback only, as uid 65532)
runs the Deployment's command with its environment (the downward API's fields filled in as
a kubelet would: pod IP 127.0.0.1; the supervisors named by ``KUBEMILL_MARS_SUPERVISORS``,
as there is no API server), and the readiness probe is the Deployment's own command. Then
the Mars environment on the host (``kubemill env python mars``) computes through the
supervisor's web endpoint, and the work is seen to run in the worker's container.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from image_support import USER, buildah, container, run_in

from kubemill import __version__
from kubemill.deploy.kubernetes import cluster_spec
from kubemill.engines.mars.framework import build_supervisors, build_workers
from kubemill.engines.mars.pod.entrypoint import ENV_SERVICE_PORT, ENV_SUPERVISORS, ENV_WEB_PORT
from kubemill.substrates.local import environments
from support.operator_support import free_ports
from support.waiting import eventually

# One worker builds (or takes) the images: see tests/image/conftest.py.
pytestmark = [pytest.mark.image, pytest.mark.mars_image, pytest.mark.xdist_group("image")]

NAMESPACE = "mars-smoke"
CLUSTER = "smoke"
READY_WAIT = 240.0
"""Seconds for a role to become ready: Mars starts its sub-pools, slowly on a loaded machine."""

CLIENT = """\
import json, os, sys
import numpy as np
import mars, mars.remote as mr, mars.tensor as mt

session = mars.new_session(sys.argv[1], default=True)
a = mt.random.rand(10, 10)
data = a.execute().fetch()
product = a.dot(a.T).execute().fetch()

def where():
    return sys.prefix, os.getpid()

prefix, pid = mr.spawn(where).execute().fetch()
print(json.dumps({
    "close": bool(np.allclose(product, data @ data.T)),
    "shape": list(product.shape),
    "prefix": prefix,
    "pid": pid,
}))
"""


def mars_python() -> Path:
    found = environments.status("mars")
    if not found.ready:
        pytest.fail(
            f"the Mars environment is {found.state} ({found.prefix}): the test's client runs"
            " there; create it with `kubemill env create mars` (scripts/setup.sh does)"
        )
    return found.python


def pod_env(container_spec: Mapping[str, Any], pod: str) -> list[str]:
    """``NAME=value`` of a Deployment's container env, the downward API filled in."""
    fields = {"metadata.name": pod, "metadata.namespace": NAMESPACE, "status.podIP": "127.0.0.1"}
    pairs = []
    for var in container_spec["env"]:
        if "value" in var:
            pairs.append(f"{var['name']}={var['value']}")
        else:
            pairs.append(f"{var['name']}={fields[var['valueFrom']['fieldRef']['fieldPath']]}")
    return pairs


@dataclass
class Pod:
    """One role's Deployment container, running in a working container of the image."""

    name: str
    container: str
    root: Path
    """The container's root on the host (its processes' ``/proc/PID/root``)."""
    spec: Mapping[str, Any]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self) -> bool:
        """The Deployment's readiness probe, run in the container as a kubelet would."""
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log()}")
        probe = self.spec["readinessProbe"]["exec"]["command"]
        done = subprocess.run(run_in(self.container, *probe), capture_output=True, check=False)
        return done.returncode == 0


def processes_in(root: Path) -> list[int]:
    """The pids whose root directory is ``root``: what runs in that container. (``buildah
    run`` chroots into a bind mount of it elsewhere, so the directory is compared, not the
    path.)"""
    here = root.stat()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                there = (entry / "root").stat()
                if (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino):
                    found.append(int(entry.name))
    return found


def plasma_stores(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are a plasma store (pyarrow's ``plasma-store-server``)."""
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            if argv0.endswith(b"plasma-store-server"):
                found.append(pid)
    return found


@contextlib.contextmanager
def pod(image: str, name: str, spec: Mapping[str, Any], workdir: Path) -> Iterator[Pod]:
    """The Deployment container ``spec`` running in a container of ``image`` until the block
    ends; then SIGTERM (as a kubelet), and the container's processes are gone."""
    with container(image) as working:
        root = Path(buildah("mount", working).strip())
        running = Pod(name, working, root, spec, workdir / f"{name}.log")
        argv = ["env", *pod_env(spec, name), *spec["command"]]
        try:
            with running.log_path.open("wb") as out:
                running.process = subprocess.Popen(
                    run_in(working, *argv),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            yield running
        finally:
            stop(running)
            subprocess.run(["buildah", "umount", working], capture_output=True, check=False)


def stop(running: Pod) -> None:
    process = running.process
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        raise AssertionError(f"{running.name} ignored SIGTERM:\n{running.log()}") from None
    # Mars's sub-pools must go with it: nothing may still run in the container.
    eventually(
        lambda: not processes_in(running.root),
        timeout=30,
        what=f"no process left in {running.name}'s container",
    )


def test_the_mars_image_runs_the_entrypoints_as_uid_65532(mars_image: str) -> None:
    config = json.loads(buildah("inspect", "--type", "image", mars_image))["OCIv1"]["config"]

    assert config["User"] == USER
    assert config["Entrypoint"] == ["python", "-m", "kubemill.engines.mars.pod.entrypoint"]
    assert config["Labels"]["org.opencontainers.image.version"] == __version__
    assert config["Labels"]["org.opencontainers.image.title"] == "kubemill-mars"


def test_the_mars_image_holds_mars_with_its_pins_and_kubemill_only(mars_image: str) -> None:
    probe = (
        "import importlib.metadata as m, importlib.util, json, shutil\n"
        "names = ['pytest', 'kmock', 'mypy', 'ruff', 'torch', 'tensorflow', 'pyspark',\n"
        "         'Cython', 'pip']\n"
        "print(json.dumps({\n"
        "  'unwanted': [n for n in names if importlib.util.find_spec(n)],\n"
        "  'compilers': [c for c in ('gcc', 'cc', 'c++', 'make') if shutil.which(c)],\n"
        "  'versions': {d: m.version(d) for d in ('pymars', 'numpy', 'pyarrow', 'kubemill',\n"
        "                                       'kubernetes')},\n"
        "}))\n"
    )
    with container(mars_image) as name:
        done = subprocess.run(
            run_in(name, "python", "-c", probe), capture_output=True, text=True, check=False
        )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["unwanted"] == []
    assert found["compilers"] == []
    pins = {p.split("==")[0]: p.split("==")[1] for p in environments.MARS_PINS if "==" in p}
    assert found["versions"]["pymars"] == environments.MARS_VERSION
    assert found["versions"]["numpy"] == pins["numpy"]
    assert found["versions"]["pyarrow"] == pins["pyarrow"]  # the workers' plasma store
    assert found["versions"]["kubemill"] == __version__


def test_a_supervisor_and_a_worker_from_the_image_compute_for_a_client(
    mars_image: str, tmp_path: Path
) -> None:
    client = mars_python()
    service, web, worker_service = free_ports(3)
    supervisors = f"127.0.0.1:{service}"
    # The ports are moved off Mars's defaults (the host's network is shared); the rest of
    # each pod's environment is the Deployment's.
    spec = cluster_spec(
        supervisor_mem="1g",
        supervisor_extra_env={
            ENV_SERVICE_PORT: str(service),
            ENV_WEB_PORT: str(web),
            ENV_SUPERVISORS: supervisors,
        },
        worker_num=1,
        worker_cpu=1,
        worker_mem="1g",
        worker_extra_env={ENV_SERVICE_PORT: str(worker_service), ENV_SUPERVISORS: supervisors},
    )
    supervisor_spec = build_supervisors(CLUSTER, NAMESPACE, spec)["spec"]["template"]["spec"]
    worker_spec = build_workers(CLUSTER, NAMESPACE, spec)["spec"]["template"]["spec"]
    assert supervisor_spec["containers"][0]["command"][-1] == "supervisor"

    def wait_ready(running: Pod) -> None:
        try:
            eventually(running.ready, timeout=READY_WAIT, what=f"{running.name} ready")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{running.name} log:\n{running.log()}") from None

    with pod(mars_image, "smoke-supervisor-0", supervisor_spec["containers"][0], tmp_path) as sup:
        wait_ready(sup)
        with pod(mars_image, "smoke-worker-0", worker_spec["containers"][0], tmp_path) as worker:
            wait_ready(worker)
            done = subprocess.run(
                [str(client), "-c", CLIENT, f"http://127.0.0.1:{web}"],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, (
                f"{done.stderr[-3000:]}\nsupervisor:\n{sup.log()[-2000:]}\n"
                f"worker:\n{worker.log()[-2000:]}"
            )
            result = json.loads(done.stdout.splitlines()[-1])
            assert result["close"] is True
            assert result["shape"] == [10, 10]
            # The task ran in the image's Python, in a process of the worker's container.
            assert result["prefix"] == "/opt/kubemill"
            assert result["pid"] in processes_in(worker.root)
            assert result["pid"] not in processes_in(sup.root)
            # The worker stores in a plasma store (Mars's Kubernetes config), the supervisor not.
            assert plasma_stores(processes_in(worker.root)), worker.log()[-2000:]
            assert not plasma_stores(processes_in(sup.root))
    assert "Traceback" not in sup.log(), sup.log()
