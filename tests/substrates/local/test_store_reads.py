"""The store's listings decode only rows that changed (``store_reads``): a long-lived reader
(the dashboard) lists every job several times a second, and decoding every job's JSON was
most of each listing. What is checked is behaviour: a change written by any connection,
this one included, is listed; a row that did not change is handed back as the record it
gave, never decoded again (counted); a removed job is no longer listed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubemill.substrates.local import store as store_module
from kubemill.substrates.local.records import JobRecord, NewJob, ReplicaRecord
from kubemill.substrates.local.store import Store

RUNNING = {"conditions": [{"type": "Running", "status": "True"}]}
SUCCEEDED = {"conditions": [{"type": "Succeeded", "status": "True"}]}


def new_job(tmp_path: Path, name: str, namespace: str = "default") -> NewJob:
    uid = f"uid-{namespace}-{name}"
    replica = ReplicaRecord(
        job_uid=uid,
        name=f"{name}-master-0",
        replica_type="Master",
        index=0,
        position=0,
        log_path=str(tmp_path / f"{name}.log"),
    )
    return NewJob(
        uid=uid,
        namespace=namespace,
        name=name,
        kind="PyTorchJob",
        manifest={"kind": "PyTorchJob", "metadata": {"name": name, "labels": {"n": name}}},
        status=RUNNING,
        base_dir=str(tmp_path),
        job_dir=str(tmp_path / name),
        environments={},
        replicas=[replica],
        ports={},
    )


class Decodes:
    """Counts the job rows and replica rows the store decodes (the real decoders run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.jobs: list[str] = []
        self.replicas: list[str] = []
        monkeypatch.setattr(
            store_module, "job_record", self._counting(store_module.job_record, self.jobs)
        )
        monkeypatch.setattr(
            store_module,
            "replica_record",
            self._counting(store_module.replica_record, self.replicas),
        )

    @staticmethod
    def _counting(decode: Callable[[Any], Any], seen: list[str]) -> Callable[[Any], Any]:
        def counted(row: sqlite3.Row) -> Any:
            record = decode(row)
            seen.append(record.name)
            return record

        return counted


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Decodes:
    return Decodes(monkeypatch)  # before the Store is made: it takes its decoders then


@pytest.fixture
def store(tmp_path: Path, decodes: Decodes) -> Store:
    made = Store(tmp_path / "state")
    for name, namespace in (("a", "default"), ("b", "default"), ("c", "team")):
        made.insert_job(new_job(tmp_path, name, namespace))
    return made


def by_name(records: list[JobRecord]) -> dict[str, JobRecord]:
    return {rec.name: rec for rec in records}


def test_an_unchanged_job_is_not_decoded_again_and_a_changed_one_is(
    store: Store, decodes: Decodes
) -> None:
    first = by_name(store.jobs())
    assert sorted(decodes.jobs) == ["a", "b", "c"]
    decodes.jobs.clear()
    again = by_name(store.jobs())
    assert decodes.jobs == []
    assert all(again[name] is first[name] for name in first)

    # Another process (another connection) writes one job's status.
    with sqlite3.connect(store.path) as other:
        other.execute("UPDATE jobs SET status = ? WHERE name = 'b'", (json.dumps(SUCCEEDED),))
    changed = by_name(store.jobs())
    assert decodes.jobs == ["b"]
    assert changed["b"].status == SUCCEEDED and changed["b"] is not first["b"]
    assert changed["a"] is first["a"] and changed["c"] is first["c"]


def test_a_change_written_through_the_same_connection_is_listed(
    store: Store, decodes: Decodes
) -> None:
    # The listing's own connection commits this write: SQLite's data_version, which counts
    # other connections' commits only, does not move, and the change is seen all the same.
    first = by_name(store.jobs())
    store.set_status(first["a"].uid, SUCCEEDED, finished=True)
    changed = by_name(store.jobs())
    assert changed["a"].status == SUCCEEDED and changed["a"].finished
    assert changed["b"] is first["b"]


def test_a_change_made_by_another_thread_of_the_process_is_listed(store: Store) -> None:
    first = by_name(store.jobs())
    writer = threading.Thread(
        target=lambda: store.set_status(first["c"].uid, SUCCEEDED, finished=True)
    )
    writer.start()
    writer.join()
    assert by_name(store.jobs())["c"].status == SUCCEEDED
    assert by_name(store.jobs("team"))["c"].status == SUCCEEDED


def test_a_removed_job_is_not_listed_and_a_namespace_listing_keeps_the_others(
    store: Store, decodes: Decodes
) -> None:
    first = by_name(store.jobs())
    store.remove_job(first["a"].uid)
    assert sorted(by_name(store.jobs())) == ["b", "c"]
    assert sorted(by_name(store.jobs("team"))) == ["c"]
    decodes.jobs.clear()
    # The namespace's listing did not make the store forget the other namespace's jobs.
    assert sorted(by_name(store.jobs())) == ["b", "c"]
    assert decodes.jobs == []


def test_a_changed_replica_row_is_listed_and_the_unchanged_ones_are_not_decoded_again(
    store: Store, decodes: Decodes
) -> None:
    uids = [rec.uid for rec in store.jobs()]
    first = store.replicas_of(uids)
    assert len(decodes.replicas) == 3
    decodes.replicas.clear()
    assert store.replicas_of(uids) == first
    assert decodes.replicas == []
    [running] = first[uids[0]]
    store.save_replicas([replace(running, phase="Succeeded", exit_code=0)])
    changed = store.replicas_of(uids)
    assert decodes.replicas == [running.name]
    assert changed[uids[0]][0].phase == "Succeeded" and changed[uids[0]][0].exit_code == 0
    assert changed[uids[1]][0] is first[uids[1]][0]


def test_a_store_of_another_process_sees_what_this_one_wrote(tmp_path: Path) -> None:
    # Two stores over one state directory (two readers and writers, as two commands are).
    one, two = Store(tmp_path / "state"), Store(tmp_path / "state")
    one.insert_job(new_job(tmp_path, "a"))
    assert [rec.status for rec in two.jobs()] == [RUNNING]
    one.set_status("uid-default-a", SUCCEEDED, finished=True)
    assert [rec.status for rec in two.jobs()] == [SUCCEEDED]
    one.insert_job(new_job(tmp_path, "b"))
    assert [rec.name for rec in two.jobs()] == ["a", "b"]
