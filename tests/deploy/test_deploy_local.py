"""``kubemill.deploy.local.new_cluster`` with a stand-in for Mars (tests/deploy/fake_mars.py):
the arguments it checks, the processes it starts, when it returns or gives up, and that no
process outlives the cluster, whether stopped, failed, or orphaned by a killed creator.
(tests/e2e/test_mars_local.py runs the real Mars.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubemill
from kubemill.deploy.client import ClusterError
from kubemill.deploy.local import LocalClusterClient, clusters_dir, list_clusters, new_cluster
from kubemill.deploy.watchdog import CLUSTER_MARK
from kubemill.substrates.local import procinfo

FAKE = Path(__file__).with_name("fake_mars.py")
IMAGE = "fake/mars:1"


def alive(pids: set[int]) -> set[int]:
    return {p for p in pids if (info := procinfo.stat(p)) is not None and info.state != "Z"}


def left_of(
    namespace: str, pids: frozenset[int] | set[int] = frozenset(), limit: float = 30.0
) -> set[int]:
    """Processes of the cluster still alive once none is or ``limit`` s have passed."""
    give_up = time.monotonic() + limit
    while (left := alive(procinfo.marked(namespace, CLUSTER_MARK) | set(pids))) and (
        time.monotonic() < give_up
    ):
        time.sleep(0.05)
    return left


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A config mapping :data:`IMAGE` to an environment whose Mars is the stand-in; the
    state in ``tmp_path``; yields the stand-in's registry directory."""
    prefix = tmp_path / "fake-env"
    (prefix / "bin").mkdir(parents=True)
    for name in ("mars-supervisor", "mars-worker"):
        script = prefix / "bin" / name
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
    for directory in clusters_dir().glob("*"):
        for pid in procinfo.marked(directory.name, CLUSTER_MARK):
            os.kill(pid, signal.SIGKILL)


def registered(registry: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(registry.glob("*-*"))]


def test_a_cluster_runs_each_role_apart_and_stop_leaves_nothing(fake: Path) -> None:
    lines: list[str] = []
    cluster = new_cluster(IMAGE, worker_num=2, worker_mem="1g", timeout=60, progress=lines.append)
    assert isinstance(cluster, LocalClusterClient)
    assert cluster.endpoint.startswith("http://127.0.0.1:")
    assert lines[-1].startswith(f"{cluster.namespace}: ready at {cluster.endpoint}")
    roles = cluster.roles
    assert [r.name for r in roles] == ["supervisor-0", "worker-0", "worker-1"]
    # Each role leads its own process group, with a TMPDIR of its own.
    assert all(procinfo.stat(r.pid).pgid == r.pid for r in roles)  # type: ignore[union-attr]
    seen = registered(fake)
    assert len({s["tmpdir"] for s in seen}) == 3
    supervisor = cluster.supervisor_addresses[0]
    for worker in (s for s in seen if "--mem-bytes" in s["argv"]):  # type: ignore[operator]
        argv = worker["argv"]
        assert argv[argv.index("-s") + 1] == supervisor  # type: ignore[union-attr]
        assert argv[argv.index("--mem-bytes") + 1] == str(1 << 30)  # type: ignore[union-attr]
    assert next(s for s in seen if "-w" in s["argv"])["argv"][-2:] == ["-s", ""]  # type: ignore[index]
    # Reattached from the record, by namespace (and endpoint, which must match).
    again = LocalClusterClient(cluster.namespace, cluster.endpoint)
    assert again.worker_addresses == cluster.worker_addresses
    with pytest.raises(ClusterError, match="wrong namespace"):
        LocalClusterClient(cluster.namespace, "http://127.0.0.1:1")

    pids = {r.pid for r in roles}
    children = {int(s["child"]) for s in seen if "child" in s}  # type: ignore[call-overload]
    assert alive(children) == children
    cluster.stop()
    assert not alive(procinfo.marked(cluster.namespace, CLUSTER_MARK) | pids | children)
    assert not cluster.directory.exists()
    with pytest.raises(ClusterError, match="no local Mars cluster"):
        LocalClusterClient(cluster.namespace)


def test_a_role_that_dies_fails_the_start_with_its_log_and_nothing_is_left(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MARS_MODE", "crash")
    with pytest.raises(ClusterError) as failed:
        new_cluster(IMAGE, worker_num=2, timeout=60, namespace="crashing")
    message = str(failed.value)
    assert "worker-" in message and "exited with code 3" in message
    assert "boom: this worker cannot start" in message
    assert not left_of("crashing")
    assert not (clusters_dir() / "crashing").exists()


def test_a_cluster_not_ready_in_time_is_stopped_unless_kept(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MARS_MODE", "shy")
    with pytest.raises(ClusterError, match=r"not ready after 2 s: 1/1 supervisor\(s\) serving"):
        new_cluster(IMAGE, worker_num=2, min_worker_num=1, timeout=2, namespace="slow")
    assert not left_of("slow")

    with pytest.raises(ClusterError, match="not ready"):
        new_cluster(IMAGE, worker_num=1, timeout=2, namespace="kept", keep_on_failure=True)
    kept = LocalClusterClient("kept")
    assert kept.running
    assert [c.namespace for c in list_clusters()] == ["kept"]
    with pytest.raises(ClusterError, match="namespace 'kept' is taken"):
        new_cluster(IMAGE, namespace="kept", timeout=2)
    kept.stop()
    assert not left_of("kept", limit=0)
    assert not kept.running and list_clusters() == []


PROGRAM = """
import sys
from kubemill.deploy.local import new_cluster
cluster = new_cluster({image!r}, worker_num=1, timeout=60, detach={detach})
print(cluster.namespace, flush=True)
if not {detach}:
    sys.stdin.read()
"""


def start_program(detach: bool) -> tuple[subprocess.Popen[str], str]:
    program = subprocess.Popen(
        [sys.executable, "-c", PROGRAM.format(image=IMAGE, detach=detach)],
        env={**os.environ, "PYTHONPATH": str(Path(kubemill.__file__).resolve().parents[1])},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert program.stdout is not None
    namespace = program.stdout.readline().strip()
    assert namespace, "the program did not start its cluster"
    return program, namespace


def test_killing_the_creator_stops_its_cluster(fake: Path) -> None:
    program, namespace = start_program(detach=False)
    roles = {r.pid for r in LocalClusterClient(namespace).roles}
    assert alive(roles) == roles
    program.kill()
    program.wait()
    assert not left_of(namespace, roles)


def test_a_detached_cluster_outlives_its_creator_until_stopped(fake: Path) -> None:
    program, namespace = start_program(detach=True)
    assert program.wait(timeout=60) == 0
    cluster = LocalClusterClient(namespace)
    roles = {r.pid for r in cluster.roles}
    time.sleep(0.5)  # the watchdog, released, must not stop it meanwhile
    assert alive(roles) == roles
    cluster.stop()
    assert not left_of(namespace, roles, limit=0)


def test_workers_get_their_cache_spill_dirs_and_extra_env(fake: Path, tmp_path: Path) -> None:
    spill = [str(tmp_path / "spill-a"), str(tmp_path / "spill-b")]
    cluster = new_cluster(
        IMAGE,
        worker_num=1,
        worker_cpu=2.5,
        worker_mem="4g",
        worker_cache_mem="25%",
        worker_spill_paths=spill,
        worker_extra_env={"X": "1", "OMP_NUM_THREADS": "7"},
        timeout=60,
    )
    try:
        [worker] = [s for s in registered(fake) if "env" in s]
        assert worker["env"] == {
            "MARS_SPILL_DIRS": ":".join(spill),
            "MARS_CACHE_MEM_SIZE": str(1 << 30),
            "OMP_NUM_THREADS": "7",  # the caller's extra env wins
            "KUBEMILL_MARS_CLUSTER": cluster.namespace,
            "X": "1",
        }
        argv = worker["argv"]
        assert argv[argv.index("--n-cpu") + 1] == "3"  # type: ignore[union-attr]
    finally:
        cluster.stop()


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"worker_mem": "lots"}, "worker_mem: 'lots' is not a size"),
        ({"worker_mem": None}, "worker_mem: expected a size"),
        ({"supervisor_mem": "50%"}, "supervisor_mem: a percentage"),
        ({"worker_cache_mem": "120%"}, "worker_cache_mem: '120%' is not a percentage"),
        ({"worker_num": 0}, "worker_num: expected an integer >= 1"),
        ({"worker_num": 2, "min_worker_num": 3}, "min_worker_num: 3 is more than worker_num"),
        ({"worker_cpu": 0}, "worker_cpu: expected a positive number"),
        ({"worker_spill_paths": ["/a:b"]}, r"worker_spill_paths\[0\]"),
        ({"namespace": "../up"}, "namespace: expected a DNS label"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs: dict[str, object], complaint: str) -> None:
    with pytest.raises(ClusterError, match=complaint):
        new_cluster(**kwargs)  # type: ignore[arg-type]


def test_without_mars_it_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "none.yaml"))
    monkeypatch.setenv("KUBEMILL_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(ClusterError, match="kubemill env create mars"):
        new_cluster(timeout=5)
    assert not (tmp_path / "state" / "mars-clusters").exists() or not any(
        (tmp_path / "state" / "mars-clusters").iterdir()
    )
