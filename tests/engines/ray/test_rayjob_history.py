"""The operator's record of a RayJob deleted while its submitter runs keeps the submitter as
the core reads it from its batch/v1 Job (a replica run through a child controller has no pod
of its own), beside the cluster's pods: what ``kubemill get --history`` shows."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.build import Owner, build_pod
from kubemill.substrates.kubernetes.controlled import ControllerSnapshot, build_controlled
from kubemill.substrates.kubernetes.history import RECORD_KEY
from kubemill.substrates.kubernetes.observe import PodSnapshot
from kubemill.substrates.kubernetes.operator.history import HistoryKeeper
from kubemill.substrates.kubernetes.render import plan_on_kubernetes
from support.operator_support import now_stamp

EXAMPLE = Path(__file__).parents[3] / "examples" / "ray" / "rayjob-sum.yaml"


def _running(pod: dict[str, Any]) -> dict[str, Any]:
    container = pod["spec"]["containers"][0]["name"]
    pod["status"] = {
        "phase": "Running",
        "startTime": now_stamp(),
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": container, "ready": True, "restartCount": 0, "state": {"running": {}}}
        ],
    }
    return pod


def test_a_deleted_rayjobs_record_reads_its_submitter_from_the_job() -> None:
    body = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    body["apiVersion"] = "kubemill.dev/v1"
    body["metadata"].update(name="rh", namespace="ns", uid=str(uuid.uuid4()))
    job = load_one(body)
    plan = plan_on_kubernetes(job)
    owner = Owner.of(job)
    pods = [
        PodSnapshot.of(_running(build_pod(job, replica, owner=owner)))
        for replica in plan.replicas
        if replica.controller is None
    ]
    [submitter] = [r for r in plan.replicas if r.controller is not None]
    submitter_job = build_controlled(submitter, build_pod(job, submitter, owner=owner))
    submitter_job["metadata"]["uid"] = str(uuid.uuid4())
    submitter_job["status"] = {"active": 1, "ready": 1, "failed": 1, "startTime": now_stamp()}
    # Another job's namesake Job (not this RayJob's by uid) is not read.
    stranger = build_controlled(submitter, build_pod(job, submitter, owner=owner))
    stranger["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    keeper = HistoryKeeper(
        api=None,  # type: ignore[arg-type]  # nothing is written in this test
        namespace="records",
        keep=3,
        pods={("ns", "rh"): pods},
        leading=lambda: True,
        controllers={
            ("ns", "rh"): [ControllerSnapshot.of(submitter_job), ControllerSnapshot.of(stranger)]
        },
    )

    keeper.deleted(body)

    config_map = keeper._pending.get_nowait()
    record = json.loads(config_map["data"][RECORD_KEY])
    replicas = {r["name"]: r for r in record["replicas"]}
    assert set(replicas) == {r.name for r in plan.replicas}
    assert replicas[submitter.name]["phase"] == "Running"
    assert replicas[submitter.name]["restarts"] == 1
    assert all(r["phase"] == "Running" for r in replicas.values())
