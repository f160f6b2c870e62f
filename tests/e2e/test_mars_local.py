"""The seed's Mars program on this machine: ``kubemill.deploy.local.new_cluster`` runs a real
Mars cluster (its supervisors and workers the in-pod entrypoint, as replicas of a job of the
local substrate), and the program runs in the Mars environment's interpreter.

The program is the seed's, unchanged except for the import path (``kubemill.deploy.local``
for ``mars.deploy.kubernetes``, and no Kubernetes client); what it adds only reports what
the test checks: the data, the result, and the process groups the tasks ran in. Nothing
of a cluster may outlive ``stop()``, nor the death of the program that started it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import kubemill
from kubemill.sdk import JobClient
from kubemill.substrates.local import environments, procinfo
from kubemill.substrates.local.network import PortAllocator
from support.engines import needs_mars_environment

MARS = environments.status("mars")
pytestmark = [pytest.mark.e2e, *needs_mars_environment()]
SOURCE = Path(kubemill.__file__).resolve().parents[1]
"""This tree's kubemill, imported by the program instead of the environment's own."""

SEED = """
from kubemill.deploy.local import new_cluster
import mars.tensor as mt

cluster = new_cluster(timeout=240)

# new cluster will start a session and set it as default one
# execute will then run in the local cluster
a = mt.random.rand(10, 10)
a.dot(a.T).execute()
"""
REPORT = """
import json, os
import mars.remote as mr

result = a.dot(a.T).execute().fetch()
data = a.execute().fetch()
groups = mr.ExecutableTuple([mr.spawn(lambda: os.getpgid(0)) for _ in range(8)])
print(json.dumps({
    "namespace": cluster.namespace,
    "endpoint": cluster.endpoint,
    "data": data.tolist(),
    "result": result.tolist(),
    "task_groups": sorted(set(groups.execute().fetch())),
    "roles": cluster.replica_pids(),
    "uid": cluster.uid,
    "client": os.getpid(),
}), flush=True)
"""
STOP = """
# after all jobs executed, you can turn off the cluster
cluster.stop()
"""
WAIT = """
import sys
sys.stdin.read()
"""


def program_env(state_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(SOURCE),
        "KUBEMILL_STATE_DIR": str(state_dir),
    }


def marked(uid: str) -> set[int]:
    """The live processes of the cluster's job (each carries ``<job uid>/<replica>``)."""
    return procinfo.marked(f"{uid}/")


def wait_until_gone(uid: str, pids: list[int], limit: float = 60.0) -> set[int]:
    """The cluster's processes still alive once they are gone or ``limit`` s have passed."""
    give_up = time.monotonic() + limit
    while True:
        left = marked(uid) | {p for p in pids if procinfo.stat(p) is not None}
        left = {p for p in left if (info := procinfo.stat(p)) and info.state != "Z"}
        if not left or time.monotonic() > give_up:
            return left
        time.sleep(0.2)


def group_left(pgid: int, limit: float = 30.0) -> list[int]:
    """Members of group ``pgid`` still alive once it is empty or ``limit`` s have passed."""
    give_up = time.monotonic() + limit
    while (left := procinfo.group_members(pgid)) and time.monotonic() < give_up:
        time.sleep(0.1)
    return left


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    state = tmp_path / "state"
    yield state
    # Never leave a cluster behind, whatever failed.
    if state.exists():
        jobs = JobClient(state_dir=state)
        for view in jobs.list():
            jobs.delete(view.name, view.namespace)


def test_the_seed_program_runs_in_the_workers_and_stop_leaves_nothing(state_dir: Path) -> None:
    done = subprocess.run(
        [str(MARS.python), "-c", SEED + REPORT + STOP],
        env=program_env(state_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    data = np.array(report["data"])
    assert data.shape == (10, 10)
    assert np.allclose(np.array(report["result"]), data @ data.T)
    workers = {pid for name, pid in report["roles"].items() if "-worker-" in name}
    assert len(workers) == 2 and len(report["roles"]) == 3
    # Every task ran in a process of a worker's group: not the client, not the supervisor.
    assert report["task_groups"], report
    assert set(report["task_groups"]) <= workers, report
    assert report["endpoint"].startswith("http://127.0.0.1:")
    # stop() returned: nothing of the cluster is left, and its job is gone.
    assert not wait_until_gone(report["uid"], list(report["roles"].values()), limit=0)
    for pgid in report["roles"].values():
        assert not procinfo.group_members(pgid)
    assert JobClient(state_dir=state_dir).list() == []


def test_a_killed_program_leaves_no_process_of_its_cluster(state_dir: Path) -> None:
    program = subprocess.Popen(
        [str(MARS.python), "-c", SEED + REPORT + WAIT],
        env=program_env(state_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert program.stdout is not None
        line = program.stdout.readline()
        assert line, program.stderr.read() if program.stderr else ""
        report = json.loads(line)
        roles = list(report["roles"].values())
        assert all(procinfo.stat(pid) is not None for pid in roles)
        assert len(marked(report["uid"])) > len(roles)  # Mars's sub-pools too
    finally:
        program.kill()
        program.wait()
    # No stop() was called: the job's supervisor stops the cluster once its owner is gone.
    assert not wait_until_gone(report["uid"], roles)
    for pgid in roles:
        assert not procinfo.group_members(pgid)


# --- the in-pod entrypoints, outside Kubernetes ----------------------------------------------


def listed_workers(web_port: int) -> set[str]:
    url = f"http://127.0.0.1:{web_port}/api/cluster/nodes?role=1&statuses=1"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return set(json.loads(answer.read())["nodes"])


CACHE = 64 << 20
"""Each worker's cache: its plasma store's size (Mars gives the store 95% of it)."""


def pod_env(name: str, port: int, web: int, home: Path, **own: str) -> dict[str, str]:
    """A pod's environment as its Deployment gives it, on 127.0.0.1."""
    env = {
        **program_env(home.parent / "state"),
        # Mars's socket paths are $TMPDIR/mars/<32 hex>: a short TMPDIR of its own.
        "TMPDIR": tempfile.mkdtemp(prefix="km-", dir="/tmp"),
        "MARS_K8S_POD_NAME": name,
        "MARS_K8S_POD_NAMESPACE": "local",
        "MARS_K8S_POD_IP": "127.0.0.1",
        "MARS_SERVICE_PORT": str(port),
        "MARS_WEB_PORT": str(web),
        "MARS_CPU_TOTAL": "1",
        "MARS_MEMORY_TOTAL": str(1 << 30),
        "KUBEMILL_MARS_READY_FILE": str(home / "ready"),
        **own,
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


def plasma_stores(pgid: int) -> list[list[str]]:
    """The command lines of the plasma stores running in process group ``pgid``."""
    found = []
    for pid in procinfo.group_members(pgid):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            if argv and argv[0].endswith("plasma-store-server"):
                found.append(argv)
    return found


def test_the_pod_entrypoints_start_mars_and_say_when_it_is_ready(tmp_path: Path) -> None:
    ports = PortAllocator()
    service, web = ports.allocate(), ports.allocate()
    worker_env = {"MARS_CACHE_MEM_SIZE": str(CACHE)}
    # In start order. worker-0 starts first, as a worker's pod often does on Kubernetes: it
    # is told the supervisor, which does not serve yet. worker-1 finds it through the web
    # "Service".
    pods: dict[str, tuple[str, dict[str, str]]] = {
        "worker-0": ("worker", {"KUBEMILL_MARS_SUPERVISORS": f"127.0.0.1:{service}"}),
        "supervisor": ("supervisor", {}),
        "worker-1": ("worker", {"MARS_SUPERVISOR_SERVICE": "127.0.0.1"}),
    }
    started: dict[str, subprocess.Popen[bytes]] = {}
    ready: dict[str, Path] = {}
    addresses: dict[str, str] = {}
    temps: dict[str, str] = {}

    def log(name: str) -> str:
        return (tmp_path / name / "log").read_text(errors="replace")

    def until(what: str, done: Callable[[], bool]) -> None:
        give_up = time.monotonic() + 240
        while not done():
            for name, child in started.items():
                assert child.poll() is None, f"{name} exited:\n{log(name)[-3000:]}"
            assert time.monotonic() < give_up, f"no {what}: {[log(n)[-1500:] for n in started]}"
            time.sleep(0.2)

    def exit_code(name: str) -> int | None:
        """How ``name`` exited after its SIGTERM (None: not within a minute)."""
        try:
            return started[name].wait(timeout=60)
        except subprocess.TimeoutExpired:
            return None

    try:
        for name, (role, own) in pods.items():
            home = tmp_path / name
            home.mkdir()
            ready[name] = home / "ready"
            port = service if role == "supervisor" else ports.allocate()
            addresses[name] = f"127.0.0.1:{port}"
            extra = {**own, **(worker_env if role == "worker" else {})}
            env = pod_env(name, port, web, home, MARS_SPILL_DIRS=str(home / "spill"), **extra)
            temps[name] = env["TMPDIR"]
            with (home / "log").open("wb") as out:
                started[name] = subprocess.Popen(
                    [str(MARS.python), "-m", "kubemill.engines.mars.pod.entrypoint", role],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            if name == "worker-0":
                # It waits for the supervisor, and says so, before Mars's worker starts.
                until("wait for the supervisor", lambda: "waiting up to" in log("worker-0"))
                assert not ready["worker-0"].exists()
        until("readiness", lambda: all(path.exists() for path in ready.values()))
        # Ready means registered: the supervisor lists both workers by their own addresses.
        assert listed_workers(web) == {addresses["worker-0"], addresses["worker-1"]}
        assert "the supervisors answered after" in log("worker-0")
        # Each worker stores in a plasma store of its cache's size, as on Kubernetes.
        for name in ("worker-0", "worker-1"):
            stores = plasma_stores(started[name].pid)
            assert len(stores) == 1, (name, stores)
            assert stores[0][stores[0].index("-m") + 1] == str(int(CACHE * 0.95))
        assert not plasma_stores(started["supervisor"].pid)
        # The supervisor goes first (pods stop in any order): the workers still stop (Mars's
        # worker alone would spin for ever once its supervisor no longer answers).
        order = ["supervisor", "worker-0", "worker-1"]
        started["supervisor"].send_signal(signal.SIGTERM)
        assert exit_code("supervisor") == 0, log("supervisor")[-3000:]
        for name in order[1:]:
            started[name].send_signal(signal.SIGTERM)
        for name in order:
            child = started[name]
            assert exit_code(name) == 0, log(name)[-3000:]
            assert not ready[name].exists()
            # Mars's resource tracker, forkserver and plasma store end with the main process.
            assert not group_left(child.pid)
    finally:
        for child in started.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        for name in started:
            shutil.rmtree(temps[name], ignore_errors=True)


def test_a_worker_whose_supervisor_never_answers_exits_1_saying_so(tmp_path: Path) -> None:
    ports = PortAllocator()
    nobody, port = ports.allocate(), ports.allocate()
    home = tmp_path / "worker"
    home.mkdir()
    env = pod_env(
        "worker",
        port,
        ports.allocate(),
        home,
        KUBEMILL_MARS_SUPERVISORS=f"127.0.0.1:{nobody}",
        KUBEMILL_MARS_SUPERVISOR_WAIT="5",
    )
    try:
        child = subprocess.Popen(
            [str(MARS.python), "-m", "kubemill.engines.mars.pod.entrypoint", "worker"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _out, err = child.communicate(timeout=240)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        assert child.returncode == 1, err[-3000:]
        assert (
            "kubemill.engines.mars.pod.entrypoint: the supervisor(s) "
            f"127.0.0.1:{nobody} did not answer" in err
        )
        assert "KUBEMILL_MARS_SUPERVISOR_WAIT" in err
        assert not (home / "ready").exists()
        assert not group_left(child.pid)  # its actor pool was stopped
    finally:
        shutil.rmtree(env["TMPDIR"], ignore_errors=True)


TWO = """
import json, urllib.request
from kubemill.deploy.local import new_cluster

def workers(cluster):
    url = cluster.endpoint + "/api/cluster/nodes?role=1&statuses=1"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return sorted(json.loads(answer.read())["nodes"])

one = new_cluster(worker_num=1, timeout=240)
two = new_cluster(worker_num=1, timeout=240)
print(json.dumps({
    "one": [workers(one), one.worker_addresses],
    "two": [workers(two), two.worker_addresses],
}), flush=True)
one.stop()
two.stop()
"""


def test_two_clusters_on_one_machine_stay_apart(state_dir: Path) -> None:
    done = subprocess.run(
        [str(MARS.python), "-c", TWO],
        env=program_env(state_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Each supervisor lists its own worker only: no cluster adopted the other's services.
    for listed, own in report.values():
        assert listed == own and len(own) == 1
    assert report["one"][1] != report["two"][1]
