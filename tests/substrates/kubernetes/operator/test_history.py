"""The operator's history of deleted jobs, against kmock: records written, read, pruned.

One cluster and one operator keeping :data:`KEEP` records serve the module; each test works
in a namespace of its own and reads its records through the SDK's ``JobClient`` (what
``kubemill get --history`` and the dashboard read) and as the ConfigMaps they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from kubemill.cli.app import app
from kubemill.sdk import JobClient
from kubemill.substrates.kubernetes.history import (
    DELETED_BY_TTL,
    DELETED_BY_USER,
    LABEL_HISTORY,
    RECORD_KEY,
    record_name,
)
from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE
from support.operator_jobs import pytorchjob
from support.operator_support import (
    Cluster,
    Kubelet,
    Operator,
    job_path,
    running_cluster,
    running_operator,
)
from support.waiting import eventually

KEEP = 3
RECORDS_NAMESPACE = DEFAULT_NAMESPACE
"""The operator's own namespace, where the CLI and the dashboard look by default."""
RECORDS_PATH = f"/api/v1/namespaces/{RECORDS_NAMESPACE}/configmaps"


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    cluster.create("/api/v1/namespaces", {"metadata": {"name": RECORDS_NAMESPACE}})
    workdir = tmp_path_factory.mktemp("operator")
    args = ("--all-namespaces", f"--history={KEEP}", f"--history-namespace={RECORDS_NAMESPACE}")
    with running_operator(cluster, workdir, *args) as op:
        yield op


def client(operator: Operator) -> JobClient:
    return JobClient(
        "kubernetes", kubeconfig=operator.kubeconfig, operator_namespace=RECORDS_NAMESPACE
    )


def records(cluster: Cluster) -> dict[str, dict[str, Any]]:
    items = cluster.list(RECORDS_PATH, labels=f"{LABEL_HISTORY}=v1")
    return {c["metadata"]["name"]: c for c in items}


def record_of(cluster: Cluster, uid: str) -> dict[str, Any]:
    config_map = eventually(
        lambda: records(cluster).get(record_name(uid)), what=f"the record of job {uid}"
    )
    body: dict[str, Any] = json.loads(config_map["data"][RECORD_KEY])
    return body


def test_a_job_deleted_by_its_ttl_leaves_a_record_of_its_spec_status_replicas_and_events(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    manifest = pytorchjob("ttl", workers=0, run_policy={"ttlSecondsAfterFinished": 1})
    created = cluster.create(job_path("PyTorchJob", namespace), manifest)
    eventually(
        lambda: cluster.get_or_none(f"/api/v1/namespaces/{namespace}/pods/ttl-master-0"),
        what="the master's pod",
    )
    kubelet.set("ttl-master-0", "Succeeded", container="pytorch", exit_code=0)
    path = job_path("PyTorchJob", namespace, "ttl")
    eventually(lambda: cluster.get_or_none(path) is None, what="the job deleted by its TTL")

    record = record_of(cluster, created["metadata"]["uid"])
    assert record["deletedBy"] == DELETED_BY_TTL
    assert record["job"]["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 1
    assert "managedFields" not in record["job"]["metadata"]
    [replica] = record["replicas"]
    assert (replica["name"], replica["phase"], replica["exitCode"]) == (
        "ttl-master-0",
        "Succeeded",
        0,
    )

    [kept] = client(operator).history(namespace)
    assert (kept.name, kept.kind, kept.deleted_by) == ("ttl", "PyTorchJob", DELETED_BY_TTL)
    assert kept.view.phase == "Succeeded"
    assert kept.view.status.completion_time is not None
    assert [(r.name, r.exit_code, r.finished is not None) for r in kept.view.replicas] == [
        ("ttl-master-0", 0, True)
    ]
    assert "PyTorchJobSucceeded" in [e.reason for e in kept.events]
    assert kept.deleted is not None and kept.view.created is not None

    # `kubemill get --history` lists it (the live list does not).
    cli = ["--substrate", "kubernetes", "--kubeconfig", str(operator.kubeconfig)]
    listed = CliRunner().invoke(app, [*cli, "get", "-n", namespace, "--history"])
    assert listed.exit_code == 0, listed.output
    [header, row] = listed.output.splitlines()
    assert header.split()[:3] == ["NAME", "KIND", "STATE"]
    assert row.split()[:3] == ["ttl", "PyTorchJob", "Succeeded"] and "(deleted)" in row
    live = CliRunner().invoke(app, [*cli, "get", "-n", namespace])
    assert "ttl" not in live.output


def test_a_job_a_user_deletes_while_it_runs_leaves_a_record_of_its_running_replicas(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    created = cluster.create(job_path("PyTorchJob", namespace), pytorchjob("gone", workers=1))
    for pod in ("gone-master-0", "gone-worker-0"):
        eventually(
            lambda pod=pod: cluster.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}"),
            what=pod,
        )
        kubelet.set(pod, "Running", container="pytorch")
    eventually(
        lambda: any(
            c["type"] == "Running" and c["status"] == "True"
            for c in (
                cluster.get(job_path("PyTorchJob", namespace, "gone")).get("status") or {}
            ).get("conditions", [])
        ),
        what="the job Running",
    )
    cluster.delete(job_path("PyTorchJob", namespace, "gone"))

    record = record_of(cluster, created["metadata"]["uid"])
    assert record["deletedBy"] == DELETED_BY_USER
    assert {(r["name"], r["phase"], r["exitCode"]) for r in record["replicas"]} == {
        ("gone-master-0", "Running", None),
        ("gone-worker-0", "Running", None),
    }
    [kept] = client(operator).history(namespace)
    assert kept.view.phase == "Running"
    assert kept.deleted_by == DELETED_BY_USER


def test_only_the_latest_records_are_kept_and_a_restarted_operator_prunes_to_its_count(
    cluster: Cluster, operator: Operator, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    uids = []
    for i in range(KEEP + 2):
        manifest = pytorchjob(f"j{i}", workers=0, run_policy={"suspend": True})
        uids.append(cluster.create(job_path("PyTorchJob", namespace), manifest)["metadata"]["uid"])
        eventually(
            lambda i=i: (
                cluster.get(job_path("PyTorchJob", namespace, f"j{i}")).get("status") or {}
            ).get("conditions"),
            what=f"j{i} reconciled",
        )
        cluster.delete(job_path("PyTorchJob", namespace, f"j{i}"))
        record_of(cluster, uids[-1])  # one at a time: the order of deletion is known

    # Other tests' records may be among the kept ones; none of the first two of this one.
    eventually(lambda: len(records(cluster)) == KEEP, what=f"{KEEP} records kept")
    kept = set(records(cluster))
    assert {record_name(u) for u in uids[-KEEP:]} == kept
    assert [r.name for r in client(operator).history(namespace)] == ["j2", "j3", "j4"]

    # A second operator keeping fewer finds them at start and prunes the oldest.
    workdir = tmp_path_factory.mktemp("fewer")
    args = ("--all-namespaces", "--history=1", f"--history-namespace={RECORDS_NAMESPACE}")
    with running_operator(cluster, workdir, *args, name="fewer"):
        eventually(
            lambda: set(records(cluster)) == {record_name(uids[-1])},
            what="only the latest record left",
        )


def test_an_operator_keeping_no_history_writes_and_reads_no_record(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A cluster of its own: the module's operator would record this deletion.
    with running_cluster() as other:
        namespace = other.namespace()
        workdir = tmp_path_factory.mktemp("none")
        args = ("--all-namespaces", "--history=0", f"--history-namespace={RECORDS_NAMESPACE}")
        with running_operator(other, workdir, *args, name="none"):
            manifest = pytorchjob("kept-not", workers=0, run_policy={"suspend": True})
            other.create(job_path("PyTorchJob", namespace), manifest)
            eventually(
                lambda: (
                    other.get(job_path("PyTorchJob", namespace, "kept-not")).get("status") or {}
                ).get("conditions"),
                what="reconciled",
            )
            other.delete(job_path("PyTorchJob", namespace, "kept-not"))
            eventually(
                lambda: other.get_or_none(job_path("PyTorchJob", namespace, "kept-not")) is None,
                what="deleted",
            )
        calls = [c for c in other.calls() if c.user_agent and not c.from_tests]
        assert calls, "the operator made no calls"
        # (The operator watches every namespace's delivered files, by their job label.)
        assert not [c for c in calls if c.namespace == RECORDS_NAMESPACE]
