"""A patch of a running local job's replica count: the supervisor plans the job again, the
new replica gets ports of its own and starts, the running ones are left as they were; a
scale-down stops the replica no longer in the Plan. Which pod is created or deleted is the
core's call (missing pods, strays), as on Kubernetes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from local_support import SLEEPER, pytorch_job

from kubemill.api import ManifestError
from kubemill.substrates.base import JobView, SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend, procinfo
from kubemill.substrates.local.records import merge_into
from support.waiting import eventually


def _running(backend: LocalBackend, name: str) -> dict[str, int]:
    """Replica -> pid of those whose process runs."""
    return {r.name: r.pid for r in backend.get(name).replicas if r.phase == "Running" and r.pid}


def _listed(backend: LocalBackend, name: str) -> tuple[int, int]:
    """(ready, total) of the job's row in a job list."""
    rows = eventually(lambda: backend.store.summaries())
    row = next(r for r in rows if r.name == name)
    return row.ready, row.total


def _workers(backend: LocalBackend, name: str, count: int) -> dict[str, Any]:
    spec: dict[str, Any] = backend.store.job("default", name).manifest["spec"]
    workers = dict(spec["pytorchReplicaSpecs"]["Worker"], replicas=count)
    return {"spec": {"pytorchReplicaSpecs": {"Worker": workers}}}


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_a_patched_replica_count_starts_and_stops_replicas_and_keeps_the_others(
    backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    job = pytorch_job("grow", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))
    before = eventually(lambda: len(r := _running(backend, "grow")) == 2 and r)
    uid = backend.store.job("default", "grow").uid
    ports_before = backend.store.ports(uid)

    backend.patch("grow", _workers(backend, "grow", 2))
    after = eventually(lambda: len(r := _running(backend, "grow")) == 3 and r, what="3 running")
    # The running replicas were not touched; the new one has ports of its own, reserved.
    assert {n: after[n] for n in before} == before
    ports = backend.store.ports(uid)
    added = {k: p for k, p in ports.items() if k not in ports_before}
    assert {r for r, _ in added} == {"grow-worker-1"}
    assert not set(added.values()) & set(ports_before.values())
    assert {k: ports[k] for k in ports_before} == ports_before
    # The status counts the new worker at the supervisor's next pass after its start.
    view: JobView = eventually(
        lambda: (v := backend.get("grow")).status.replica_statuses["Worker"].active == 2 and v,
        what="2 active workers",
    )
    assert view.phase == "Running"
    new = next(r for r in view.replicas if r.name == "grow-worker-1")
    assert new.address == f"127.0.0.1:{added[('grow-worker-1', 23456)]}"
    eventually(lambda: _listed(backend, "grow") == (3, 3), what="listed 3/3")

    backend.patch("grow", _workers(backend, "grow", 1))
    eventually(lambda: set(_running(backend, "grow")) == set(before), what="worker-1 stopped")
    assert not procinfo.group_members(after["grow-worker-1"])
    assert _running(backend, "grow") == before
    eventually(
        lambda: backend.get("grow").status.replica_statuses["Worker"].active == 1,
        what="1 active worker",
    )
    # Its record goes as its pod does on Kubernetes; its ports stay reserved with the job's.
    eventually(lambda: [r.name for r in backend.get("grow").replicas] == list(before))
    eventually(lambda: _listed(backend, "grow") == (2, 2), what="listed 2/2")
    assert backend.store.ports(uid) == ports


def test_a_change_that_cannot_be_planned_here_keeps_the_replicas_with_an_event(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("stay", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    before = eventually(lambda: len(r := _running(backend, "stay")) == 2 and r)
    patch = _workers(backend, "stay", 2)
    worker = patch["spec"]["pytorchReplicaSpecs"]["Worker"]
    worker["template"]["spec"]["containers"][0]["image"] = "another-image"
    backend.patch("stay", patch)

    found = eventually(
        lambda: [e for e in backend.events("stay") if e.reason == "FailedReplan"],
        what="a FailedReplan event",
    )
    assert "'another-image'" in found[0].message and "not in the job" in found[0].message
    assert _running(backend, "stay") == before


def test_a_patch_that_makes_an_invalid_job_is_refused_with_its_field_path(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job("bad", master=SLEEPER, worker=SLEEPER)
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    eventually(lambda: len(_running(backend, "bad")) == 2)
    patch = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": -1}}}}
    with pytest.raises(ManifestError) as refused:
        backend.patch("bad", patch)
    assert [e.path for e in refused.value.errors] == ["spec.pytorchReplicaSpecs.Worker.replicas"]
    recorded = backend.store.job("default", "bad").manifest
    assert recorded["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    backend.interrupt("bad")
    with pytest.raises(SubstrateError, match="only a running or suspended job can be patched"):
        backend.patch("bad", _workers(backend, "bad", 2))


def test_a_patch_merges_as_a_json_merge_patch() -> None:
    """RFC 7386, as the API server applies it: null removes, a mapping merges, a list replaces."""
    manifest: dict[str, Any] = {
        "metadata": {"labels": {"team": "a", "tier": "b"}},
        "spec": {"groups": [{"name": "x", "replicas": 1}], "suspend": True},
    }
    merge_into(
        manifest,
        {
            "metadata": {"labels": {"team": None, "owner": "c"}},
            "spec": {"groups": [{"name": "y"}], "suspend": None, "extra": {"on": None}},
        },
    )
    assert manifest == {
        "metadata": {"labels": {"tier": "b", "owner": "c"}},
        "spec": {"groups": [{"name": "y"}], "extra": {}},
    }
