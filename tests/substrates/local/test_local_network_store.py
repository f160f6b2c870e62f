"""Ports reserved per (replica, container port), and the SQLite store shared by processes."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest
from local_support import pytorch_job

from kubemill.kinds import plan_for
from kubemill.substrates.base import JobExists
from kubemill.substrates.local import LocalNetwork, Store
from kubemill.substrates.local.network import (
    PortAllocator,
    busy_ports,
    ephemeral_range,
    port_is_free,
)
from kubemill.substrates.local.store import NewJob, PortConflict, ReplicaRecord, default_state_dir


def test_every_replica_and_port_gets_its_own_free_port_below_the_ephemeral_range() -> None:
    job = pytorch_job("ports", master="pass", worker="pass", workers=3)
    network = LocalNetwork(job.name, allocator=PortAllocator())
    plan = plan_for(job, network)
    network.reserve_plan(plan)
    ports = network.ports
    assert set(ports) == {(rep.name, 23456) for rep in plan.replicas}
    assert len(set(ports.values())) == len(ports)
    low, _ = ephemeral_range()
    assert all(p < low for p in ports.values())
    master = ports[("ports-master-0", 23456)]
    for rep in plan.replicas:
        env = {e.name: e.value for e in rep.env}
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == str(master)


def test_a_network_built_from_stored_ports_hands_out_the_same_addresses() -> None:
    job = pytorch_job("again", master="pass", worker="pass")
    first = LocalNetwork(job.name, allocator=PortAllocator())
    plan_a = plan_for(job, first)
    again = LocalNetwork(job.name, ports=first.ports)
    plan_b = plan_for(job, again)
    assert [r.env for r in plan_a.replicas] == [r.env for r in plan_b.replicas]
    with pytest.raises(Exception, match="no port was reserved"):
        again.endpoint("Worker", 7, 23456)


def test_allocator_skips_reserved_and_busy_ports() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        busy = listener.getsockname()[1]
        assert not port_is_free(busy)
        assert busy_ports({("r", 1): busy}) == {("r", 1): busy}
        # An allocator whose random choice keeps landing on taken ports moves on.
        picks = iter([busy, 20001, 20001, 20002])
        allocator = PortAllocator(avoid={20001}, is_free=lambda p: p != busy)
        allocator._candidate = lambda: next(picks)  # type: ignore[method-assign]
        assert allocator.allocate() == 20002


def _new_job(uid: str, name: str, ports: dict[tuple[str, int], int]) -> NewJob:
    return NewJob(
        uid=uid,
        namespace="default",
        name=name,
        kind="PyTorchJob",
        manifest={},
        status={},
        base_dir="/",
        job_dir="/tmp/x",
        environments={},
        replicas=[ReplicaRecord(uid, f"{name}-master-0", "Master", 0, 0, "/tmp/x.log")],
        ports=ports,
    )


def test_store_reserves_ports_of_unfinished_jobs_only(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.insert_job(_new_job("u1", "a", {("a-master-0", 23456): 20000}))
    assert store.reserved_ports() == {20000}
    with pytest.raises(PortConflict):
        store.insert_job(_new_job("u2", "b", {("b-master-0", 23456): 20000}))
    store.set_status("u1", {}, finished=True)
    assert store.reserved_ports() == set()
    store.insert_job(_new_job("u2", "b", {("b-master-0", 23456): 20000}))


def test_duplicate_name_is_refused_with_a_hint(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.insert_job(_new_job("u1", "dup", {}))
    with pytest.raises(
        JobExists, match=r"already exists.*delete it first \(`kubemill delete dup`\)"
    ):
        store.insert_job(_new_job("u2", "dup", {}))


def test_state_survives_a_new_store_and_uses_wal(tmp_path: Path) -> None:
    Store(tmp_path).insert_job(_new_job("u1", "kept", {}))
    again = Store(tmp_path)
    assert [j.name for j in again.jobs()] == ["kept"]
    assert again.replicas("u1")[0].name == "kept-master-0"
    with sqlite3.connect(tmp_path / "kubemill.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_replicas_of_several_jobs_are_read_together_in_plan_order(tmp_path: Path) -> None:
    store = Store(tmp_path)
    two = _new_job("u2", "two", {})
    # Recorded out of plan order: the read orders by position, as replicas() does.
    two.replicas = [
        ReplicaRecord("u2", "two-worker-0", "Worker", 0, 1, "/tmp/w.log"),
        ReplicaRecord("u2", "two-master-0", "Master", 0, 0, "/tmp/m.log"),
    ]
    store.insert_job(_new_job("u1", "one", {}))
    store.insert_job(two)
    store.insert_job(_new_job("u3", "three", {}))
    found = store.replicas_of(["u2", "u1", "gone"])
    assert {uid: [r.name for r in rows] for uid, rows in found.items()} == {
        "u2": ["two-master-0", "two-worker-0"],
        "u1": ["one-master-0"],
        "gone": [],
    }
    assert found["u2"] == store.replicas("u2")
    assert store.replicas_of([]) == {}


def test_repeated_events_are_counted_not_duplicated(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.insert_job(_new_job("u1", "ev", {}))
    for _ in range(3):
        store.add_event("u1", type="Warning", reason="R", message="same")
    store.add_event("u1", type="Normal", reason="Other", message="different")
    events = store.events("u1")
    assert [(e.reason, e.count) for e in events] == [("R", 3), ("Other", 1)]
    store.remove_job("u1")
    assert store.events("u1") == []


def test_state_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KUBEMILL_STATE_DIR", raising=False)
    assert default_state_dir() == tmp_path / "xdg" / "kubemill"
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "env"))
    assert default_state_dir() == tmp_path / "env"
    assert default_state_dir(tmp_path / "arg") == tmp_path / "arg"
