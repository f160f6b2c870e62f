"""The real operator runs ScheduledSparkApplications against the strict test API server.

Schedules fire every second (``@every 1s``), so runs come without a clock of the tests' own;
nothing here asserts how long anything took. A run is a SparkApplication named
``<schedule>-<unix nanoseconds of its due time>``, labelled and owned by its schedule, which
the operator then runs as any SparkApplication (its driver pod appears; the tests' kubelet
ends it). Covered: runs on schedule in both API groups, Forbid (no second run while one is
active, then the next once it ended), Replace (the active run is deleted for the new one),
the history limits, suspend and resume, and a time zone that does not exist.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.operator_support import (
    Cluster,
    Kubelet,
    job_path,
    running_cluster,
    running_operator,
)
from support.waiting import eventually

DRIVER = "spark-kubernetes-driver"
LABEL = "sparkoperator.k8s.io/scheduled-app-name"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as served:
        yield served


def scheduled(name: str = "pi", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": name, "labels": {"team": "data"}},
        "spec": {
            "schedule": "@every 1s",
            "template": {
                "type": "Python",
                "sparkVersion": "4.0.0",
                "image": "spark:4.0.0",
                "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
                "executor": {"instances": 1},
            },
            **spec,
        },
    }


def runs(cluster: Cluster, namespace: str, *, upstream: bool = False) -> list[dict[str, Any]]:
    """The schedule's runs, oldest due first (by the nanoseconds in their names)."""
    found = cluster.list(job_path("SparkApplication", namespace, upstream=upstream), labels=LABEL)
    return sorted(found, key=lambda r: int(r["metadata"]["name"].rpartition("-")[2]))


def run_names(cluster: Cluster, namespace: str, *, upstream: bool = False) -> list[str]:
    return [r["metadata"]["name"] for r in runs(cluster, namespace, upstream=upstream)]


def state_of(run: dict[str, Any]) -> str:
    found: str = ((run.get("status") or {}).get("applicationState") or {}).get("state", "")
    return found


def driver_of(run: str) -> str:
    return f"{run}-driver-0"


def pod_names(cluster: Cluster, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def event_reasons(cluster: Cluster, namespace: str, name: str) -> list[str]:
    events = cluster.list(f"/api/v1/namespaces/{namespace}/events")
    return [e["reason"] for e in events if e["involvedObject"]["name"] == name]


def finish(cluster: Cluster, namespace: str, run: str, *, exit_code: int = 0) -> None:
    """The run's driver ends (once the operator created it): the run COMPLETED or FAILED."""
    kubelet = Kubelet(cluster, namespace)
    eventually(lambda: driver_of(run) in pod_names(cluster, namespace), what=f"{run}'s driver")
    phase = "Succeeded" if exit_code == 0 else "Failed"
    kubelet.set(driver_of(run), phase, container=DRIVER, exit_code=exit_code)
    want = "COMPLETED" if exit_code == 0 else "FAILED"
    path = job_path("SparkApplication", namespace, run)
    eventually(
        lambda: (got := cluster.get_or_none(path)) is None or state_of(got) == want,
        what=f"{run} {want}",
    )


@pytest.mark.parametrize("upstream", [False, True], ids=["kubemill", "sparkoperator"])
def test_runs_are_created_on_schedule(cluster: Cluster, tmp_path: Path, upstream: bool) -> None:
    namespace = cluster.namespace()
    manifest = scheduled(successfulRunHistoryLimit=5)
    if upstream:
        manifest["apiVersion"] = "sparkoperator.k8s.io/v1beta2"
    group = "sparkoperator.k8s.io" if upstream else "kubemill.dev"
    with running_operator(cluster, tmp_path, "--all-namespaces", "--serve-upstream-groups"):
        path = job_path("ScheduledSparkApplication", namespace, "pi", upstream=upstream)
        created = cluster.create(
            job_path("ScheduledSparkApplication", namespace, upstream=upstream), manifest
        )
        names = eventually(
            lambda: len(found := run_names(cluster, namespace, upstream=upstream)) >= 2 and found,
            what="two runs",
        )
        first = runs(cluster, namespace, upstream=upstream)[0]
        assert re.fullmatch(r"pi-\d{19}", names[0]) and names[0] != names[1]
        # Runs of "@every 1s" are due whole seconds apart.
        due = [int(n.rpartition("-")[2]) for n in names]
        assert all((b - a) % 1_000_000_000 == 0 and b > a for a, b in itertools.pairwise(due))
        assert first["apiVersion"] == f"{group}/{'v1beta2' if upstream else 'v1'}"
        assert first["metadata"]["labels"] == {"team": "data", LABEL: "pi"}
        (owner,) = first["metadata"]["ownerReferences"]
        assert (owner["apiVersion"], owner["kind"], owner["uid"], owner["controller"]) == (
            created["apiVersion"],
            "ScheduledSparkApplication",
            created["metadata"]["uid"],
            True,
        )
        assert first["spec"]["mainApplicationFile"].endswith("pi.py")
        # The operator runs each run as a SparkApplication: its driver is created.
        eventually(lambda: driver_of(names[0]) in pod_names(cluster, namespace), what="driver")

        status = eventually(
            lambda: (s := cluster.get(path).get("status") or {}).get("lastRunName") and s,
            what="the status",
        )
        assert status["scheduleState"] == "Scheduled"
        assert status["lastRunName"] in run_names(cluster, namespace, upstream=upstream)
        assert "nextRun" in status and "lastRun" in status
        assert "RunStarted" in event_reasons(cluster, namespace, "pi")


def test_forbid_waits_for_the_active_run(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        cluster.create(
            job_path("ScheduledSparkApplication", namespace),
            scheduled(concurrencyPolicy="Forbid"),
        )
        (first,) = eventually(lambda: run_names(cluster, namespace), what="the first run")
        # Its next times come and are skipped while it runs.
        eventually(
            lambda: "RunSkipped" in event_reasons(cluster, namespace, "pi"), what="a skipped run"
        )
        assert run_names(cluster, namespace) == [first]
        finish(cluster, namespace, first)
        second = eventually(
            lambda: [n for n in run_names(cluster, namespace) if n != first], what="the next run"
        )
        assert len(second) == 1
        # The first run was kept as history (successfulRunHistoryLimit 1).
        path = job_path("ScheduledSparkApplication", namespace, "pi")
        eventually(
            lambda: cluster.get(path)["status"].get("pastSuccessfulRunNames") == [first],
            what="the finished run in the history",
        )


def test_replace_deletes_the_active_run_for_the_next(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        cluster.create(
            job_path("ScheduledSparkApplication", namespace),
            scheduled(concurrencyPolicy="Replace"),
        )
        oldest = eventually(lambda: runs(cluster, namespace)[:1], what="the first run")[0]
        first, first_uid = oldest["metadata"]["name"], oldest["metadata"]["uid"]
        eventually(lambda: first not in run_names(cluster, namespace), what="the first replaced")
        (second,) = eventually(
            lambda: [n for n in run_names(cluster, namespace) if n > first][:1],
            what="the next run",
        )
        calls = cluster.operator_calls(namespace=namespace)
        deleted_at = [
            i
            for i, c in enumerate(calls)
            if c.method == "DELETE" and c.name == first and c.status < 300
        ]
        assert [calls[i].body.get("preconditions") for i in deleted_at] == [{"uid": first_uid}]
        # The active run was deleted before the one due after it was created.
        created_at = next(
            i
            for i, c in enumerate(calls)
            if c.method == "POST"
            and c.plural == "sparkapplications"
            and c.body
            and c.body["metadata"]["name"] == second
        )
        assert deleted_at[0] < created_at
        # Events are posted after the actions they tell of: the run may be seen first.
        eventually(
            lambda: "RunReplaced" in event_reasons(cluster, namespace, "pi"),
            what="the RunReplaced event",
        )


def test_history_limits_and_suspend(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    path = job_path("ScheduledSparkApplication", namespace, "pi")
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        cluster.create(
            job_path("ScheduledSparkApplication", namespace),
            scheduled(successfulRunHistoryLimit=1, failedRunHistoryLimit=1),
        )
        eventually(lambda: len(run_names(cluster, namespace)) >= 3, what="three runs")
        cluster.patch(path, {"spec": {"suspend": True}})
        eventually(
            lambda: (
                (job := cluster.get(path))["spec"].get("suspend")
                and "nextRun" not in (job.get("status") or {})
            ),
            what="the suspension seen",
        )
        suspended_with = run_names(cluster, namespace)
        # Runs already started go on; two succeed and one fails.
        oldest, middle, newest = suspended_with[:3]
        finish(cluster, namespace, oldest)
        finish(cluster, namespace, middle)
        finish(cluster, namespace, newest, exit_code=1)
        status = eventually(
            lambda: (
                (s := cluster.get(path)["status"]).get("pastSuccessfulRunNames") == [middle]
                and s.get("pastFailedRunNames") == [newest]
                and s
            ),
            what="the history",
        )
        assert status["scheduleState"] == "Scheduled"
        eventually(lambda: oldest not in run_names(cluster, namespace), what="beyond the limit")
        # Those passes started nothing: suspended.
        assert set(run_names(cluster, namespace)) <= set(suspended_with) - {oldest}
        assert "RunDeleted" in event_reasons(cluster, namespace, "pi")

        cluster.patch(path, {"spec": {"suspend": False}})
        eventually(
            lambda: set(run_names(cluster, namespace)) - set(suspended_with), what="a new run"
        )


def test_a_time_zone_that_does_not_exist_fails_validation(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    path = job_path("ScheduledSparkApplication", namespace, "pi")
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        cluster.create(
            job_path("ScheduledSparkApplication", namespace),
            scheduled(timeZone="Mars/Olympus_Mons"),
        )
        status = eventually(
            lambda: (
                (s := cluster.get(path).get("status") or {}).get("scheduleState")
                == "FailedValidation"
                and s
            ),
            what="FailedValidation",
        )
        assert "invalid timeZone 'Mars/Olympus_Mons'" in status["reason"]
        # The event is posted after the status is written: it may come a moment later.
        eventually(
            lambda: "FailedValidation" in event_reasons(cluster, namespace, "pi"),
            what="a FailedValidation event",
        )
        assert run_names(cluster, namespace) == []
        # Fixed, it is in force.
        cluster.patch(path, {"spec": {"timeZone": "Europe/Paris"}})
        eventually(lambda: run_names(cluster, namespace), what="a run once fixed")
        # The run is created before the status that records it is written.
        eventually(
            lambda: cluster.get(path)["status"]["scheduleState"] == "Scheduled",
            what="Scheduled once fixed",
        )
