"""``kubemill.deploy.local.new_cluster`` with a stand-in for Mars's environment
(tests/deploy/fake_mars.py): the arguments it refuses, the job it runs the cluster as, when it
returns or gives up, and that no process outlives the cluster, whether stopped, failed, or
orphaned by a killed creator. (tests/e2e/test_mars_local.py runs the real Mars.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubemill
from kubemill.deploy.client import ClusterError
from kubemill.deploy.local import LocalClusterClient, list_clusters, new_cluster
from kubemill.sdk import JobClient
from kubemill.substrates.base import JobNotFound
from kubemill.substrates.local import procinfo
from support.waiting import eventually

FAKE = Path(__file__).with_name("fake_mars.py")
IMAGE = "fake/mars:1"


def alive(pids: set[int]) -> set[int]:
    return {p for p in pids if (info := procinfo.stat(p)) is not None and info.state != "Z"}


def left_of(
    uid: str, pids: frozenset[int] | set[int] = frozenset(), limit: float = 30.0
) -> set[int]:
    """Processes of the cluster's job still alive once none is or ``limit`` s have passed."""
    give_up = time.monotonic() + limit
    while (left := alive(procinfo.marked(f"{uid}/") | set(pids))) and time.monotonic() < give_up:
        time.sleep(0.05)
    return left


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A config mapping :data:`IMAGE` to an environment whose ``python`` is the stand-in; the
    state in ``tmp_path``; yields the stand-in's registry directory."""
    prefix = tmp_path / "fake-env"
    (prefix / "bin").mkdir(parents=True)
    script = prefix / "bin" / "python"
    script.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    script.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(f"images:\n  'fake/*': {prefix}\n")
    registry = tmp_path / "registry"
    registry.mkdir()
    monkeypatch.setenv("KUBEMILL_CONFIG", str(config))
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_MARS_REGISTRY", str(registry))
    yield registry
    jobs = JobClient()
    for view in jobs.list():
        jobs.delete(view.name, view.namespace)


def registered(registry: Path, role: str = "") -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(registry.glob(f"{role}*-*"))]


def test_a_cluster_is_a_job_of_its_kind_and_stop_leaves_nothing(fake: Path) -> None:
    lines: list[str] = []
    cluster = new_cluster(IMAGE, worker_num=2, worker_mem="1g", timeout=60, progress=lines.append)
    assert isinstance(cluster, LocalClusterClient)
    assert cluster.endpoint.startswith("http://127.0.0.1:")
    assert lines[-1] == f"{cluster.namespace}: ready at {cluster.endpoint}"
    # A job like any other: listed, Ready, its endpoint in its status.
    view = JobClient().get(cluster.namespace)
    assert view.phase == "Ready" or view.status.is_true("Ready")
    assert view.status.endpoint == cluster.endpoint  # type: ignore[attr-defined]
    assert [c.namespace for c in list_clusters()] == [cluster.namespace]
    replicas = cluster.replicas
    assert [r.name for r in replicas] == [
        f"{cluster.namespace}-{role}" for role in ("supervisor-0", "worker-0", "worker-1")
    ]
    # Each replica leads its own process group; the workers are given the supervisor.
    pids = cluster.replica_pids()
    assert all(procinfo.stat(pid).pgid == pid for pid in pids.values())  # type: ignore[union-attr]
    [supervisor] = cluster.supervisor_addresses
    for worker in registered(fake, "worker"):
        assert worker["env"]["KUBEMILL_MARS_SUPERVISORS"] == supervisor  # type: ignore[index]
    # Reattached by namespace (and endpoint, which must match).
    again = LocalClusterClient(cluster.namespace, cluster.endpoint)
    assert again.worker_addresses == cluster.worker_addresses
    with pytest.raises(ClusterError, match="wrong namespace"):
        LocalClusterClient(cluster.namespace, "http://127.0.0.1:1")

    children = {int(s["child"]) for s in registered(fake)}  # type: ignore[call-overload]
    assert alive(children) == children
    cluster.stop()
    assert not left_of(cluster.uid, set(pids.values()) | children, limit=0)
    with pytest.raises(JobNotFound):
        JobClient().get(cluster.namespace)
    with pytest.raises(ClusterError, match="no local Mars cluster"):
        LocalClusterClient(cluster.namespace)
    cluster.stop()  # stopping a stopped cluster is no error


def test_a_replica_that_keeps_failing_fails_the_start_with_its_log_and_nothing_is_left(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MARS_MODE", "crash")
    with pytest.raises(ClusterError) as failed:
        new_cluster(IMAGE, worker_num=2, timeout=60, namespace="crashing")
    message = str(failed.value)
    assert "replica crashing-worker-" in message and "keeps failing" in message, message
    assert "last exit code 3" in message
    assert "boom: this worker cannot start" in message
    assert "was stopped and deleted" in message
    assert not procinfo.marked("crashing")
    with pytest.raises(JobNotFound):
        JobClient().get("crashing")


def test_a_cluster_not_ready_in_time_is_stopped_unless_kept(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MARS_MODE", "shy")
    # Time enough for the supervisor to get ready; the workers never do.
    with pytest.raises(ClusterError, match=r"not ready after 8 s: .*1 Supervisor, 0 Worker"):
        new_cluster(IMAGE, worker_num=2, min_worker_num=1, timeout=8, namespace="slow")
    with pytest.raises(JobNotFound):
        JobClient().get("slow")

    with pytest.raises(ClusterError, match=r"(?s)not ready.*is kept"):
        new_cluster(IMAGE, worker_num=1, timeout=2, namespace="kept", keep_on_failure=True)
    kept = LocalClusterClient("kept")
    eventually(lambda: kept.running, what="the kept cluster's replicas running")
    assert [c.namespace for c in list_clusters()] == ["kept"]
    with pytest.raises(ClusterError, match="namespace 'kept' is taken"):
        new_cluster(IMAGE, namespace="kept", timeout=2)
    pids = set(kept.replica_pids().values())
    kept.stop()
    assert not left_of(kept.uid, pids, limit=0)
    assert not kept.running and list_clusters() == []


PROGRAM = """
import sys
from kubemill.deploy.local import new_cluster
cluster = new_cluster({image!r}, worker_num=1, timeout=60, detach={detach})
print(cluster.namespace, cluster.uid, flush=True)
if not {detach}:
    sys.stdin.read()
"""


def start_program(detach: bool) -> tuple[subprocess.Popen[str], str, str]:
    program = subprocess.Popen(
        [sys.executable, "-c", PROGRAM.format(image=IMAGE, detach=detach)],
        env={**os.environ, "PYTHONPATH": str(Path(kubemill.__file__).resolve().parents[1])},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert program.stdout is not None
    namespace, _, uid = program.stdout.readline().strip().partition(" ")
    assert namespace, "the program did not start its cluster"
    return program, namespace, uid


def test_killing_the_creator_stops_its_cluster(fake: Path) -> None:
    program, namespace, uid = start_program(detach=False)
    pids = set(LocalClusterClient(namespace).replica_pids().values())
    assert len(pids) == 2 and alive(pids) == pids
    program.kill()
    program.wait()
    assert not left_of(uid, pids)
    # The job went with its owner: no record, no directory.
    deadline = time.monotonic() + 30
    while list_clusters() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list_clusters() == []


def test_a_detached_cluster_outlives_its_creator_until_stopped(fake: Path) -> None:
    program, namespace, uid = start_program(detach=True)
    assert program.wait(timeout=60) == 0
    cluster = LocalClusterClient(namespace)
    pids = set(cluster.replica_pids().values())
    time.sleep(0.5)  # its creator gone, nothing may stop it meanwhile
    assert alive(pids) == pids and cluster.running
    cluster.stop()
    assert not left_of(uid, pids, limit=0)


def test_workers_get_their_cache_spill_dirs_extra_env_and_our_pythonpath(
    fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    spill = [str(tmp_path / "spill-a"), str(tmp_path / "spill-b")]
    cluster = new_cluster(
        IMAGE,
        worker_num=1,
        worker_cpu=1.5,
        worker_mem="4g",
        worker_cache_mem="25%",
        worker_spill_paths=spill,
        worker_extra_env={"X": "1"},
        supervisor_extra_env={"PYTHONPATH": "/theirs"},
        timeout=60,
    )
    try:
        [worker] = registered(fake, "worker")
        env = worker["env"]
        assert env["MARS_SPILL_DIRS"] == ":".join(spill)  # type: ignore[index]
        assert env["MARS_CACHE_MEM_SIZE"] == str(1 << 30)  # type: ignore[index]
        assert env["MARS_CPU_TOTAL"] == "1.5"  # type: ignore[index]
        assert env["MARS_MEMORY_TOTAL"] == str(4 << 30)  # type: ignore[index]
        assert env["X"] == "1"  # type: ignore[index]
        assert env["PYTHONPATH"] == "/somewhere/else"  # type: ignore[index]
        [supervisor] = registered(fake, "supervisor")
        assert supervisor["env"]["PYTHONPATH"] == "/theirs"  # type: ignore[index]
    finally:
        cluster.stop()


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"worker_mem": "lots"}, "worker_mem: .*'lots' is not a size"),
        ({"worker_mem": None}, "worker_mem: is required"),
        ({"supervisor_mem": "50%"}, "supervisor_mem: .*'50%' is not a size"),
        ({"worker_cache_mem": "120%"}, "worker_cache_mem: .*'120%' is not a percentage"),
        ({"worker_num": 0}, "worker_num: .*greater than or equal to 1"),
        ({"worker_num": 2, "min_worker_num": 3}, "min_worker_num: 3 is more than workerNum"),
        ({"worker_cpu": 0}, "worker_cpu: .*greater than or equal to 0.001"),
        ({"worker_spill_paths": ["/a:b"]}, r"worker_spill_paths: .*'/a:b' has a ':'"),
        ({"namespace": "../up"}, "namespace: expected a DNS label"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    kwargs: dict[str, object], complaint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(ClusterError, match=complaint):
        new_cluster(**kwargs)  # type: ignore[arg-type]
    assert JobClient().list() == []


def test_without_mars_it_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "none.yaml"))
    monkeypatch.setenv("KUBEMILL_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(ClusterError, match="kubemill env create mars"):
        new_cluster(timeout=5)
    assert JobClient().list() == []


def test_a_directory_called_mars_on_the_path_is_not_mars(
    fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mars keeps its sockets in /tmp/mars: with /tmp on the path, `import mars` gives an
    # empty namespace package, which must not pass for Mars (no session is made then).
    (tmp_path / "shadow" / "mars").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "shadow"))
    monkeypatch.delitem(sys.modules, "mars", raising=False)
    cluster = new_cluster(IMAGE, worker_num=1, worker_mem="1g", timeout=60)
    try:
        assert cluster.endpoint.startswith("http://127.0.0.1:")
    finally:
        cluster.stop()
