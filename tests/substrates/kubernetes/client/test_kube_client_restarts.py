"""The client reads restart counts where the operator keeps them, so `get` shows what the
core judged: in the status (kubemill.dev) or, for Kubeflow's CRDs, in an annotation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubemill.substrates.kubernetes.client import load_job
from kubemill.substrates.kubernetes.restarts import RESTARTS_ANNOTATION


def raw_job(
    api_version: str, annotations: dict[str, str], status: dict[str, Any]
) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "x", "command": ["x"]}
    spec = {"template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations, "uid": "u"},
        "spec": {"pytorchReplicaSpecs": {"Master": spec, "Worker": {"replicas": 2, **spec}}},
        "status": status,
    }


COUNTS = {"Worker": {"restarts": 2, "retiredRestarts": 1}}
PRUNED = {"replicaStatuses": {"Worker": {"active": 2}}}
"""A Kubeflow status as the API server keeps it: no restart counts."""


def test_an_upstream_jobs_counts_come_from_the_annotation() -> None:
    job = load_job(raw_job("kubeflow.org/v1", {RESTARTS_ANNOTATION: json.dumps(COUNTS)}, PRUNED))
    worker = job.status.replica_statuses["Worker"]
    assert (worker.active, worker.restarts, worker.retired_restarts) == (2, 2, 1)


@pytest.mark.parametrize(
    ("api_version", "annotations", "status", "restarts"),
    [
        pytest.param("kubeflow.org/v1", {}, PRUNED, 0, id="upstream-without-annotation"),
        pytest.param(
            "kubeflow.org/v1", {RESTARTS_ANNOTATION: "not json"}, PRUNED, 0, id="unreadable"
        ),
        pytest.param(
            "kubemill.dev/v1",
            {RESTARTS_ANNOTATION: json.dumps(COUNTS)},
            {"replicaStatuses": {"Worker": {"active": 2, "restarts": 5, "retiredRestarts": 3}}},
            5,
            id="ours-keep-them-in-the-status",
        ),
    ],
)
def test_counts_anywhere_else_are_not_taken(
    api_version: str, annotations: dict[str, str], status: dict[str, Any], restarts: int
) -> None:
    job = load_job(raw_job(api_version, annotations, status))
    assert job.status.replica_statuses["Worker"].restarts == restarts
