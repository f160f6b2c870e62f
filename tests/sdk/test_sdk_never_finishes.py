"""``JobClient`` and the kinds that never finish: a schedule (``wait`` and ``run`` raise
:class:`NeverFinishes`, naming what to wait for, instead of blocking for ever) and a service
cluster (``wait`` returns once it is Ready, ``run`` submits it detached and returns then;
it has no suspend, so ``suspend``/``resume`` refuse it before anything changes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.api import Condition, ConditionType
from kubemill.engines.mars.api import MarsClusterStatus
from kubemill.kinds import load_one
from kubemill.sdk import JobClient, JobView, NeverFinishes, SubstrateError
from kubemill.substrates.base import SubmitOptions

SCHEDULE = {
    "apiVersion": "kubemill.dev/v1",
    "kind": "ScheduledSparkApplication",
    "metadata": {"name": "yearly"},
    "spec": {
        # Months away: the loop runs and starts nothing during the test.
        "schedule": "0 0 1 1 *",
        "template": {
            "type": "Python",
            "mode": "cluster",
            "image": "spark:4.0.0",
            "sparkVersion": "4.0.0",
            "mainApplicationFile": "app.py",
        },
    },
}
MARS = {
    "apiVersion": "kubemill.dev/v1",
    "kind": "MarsCluster",
    "metadata": {"name": "m1"},
    "spec": {"workerNum": 1, "workerCpu": 1, "workerMem": "1Gi"},
}


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobClient]:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("print('never run here')\n")
    local = JobClient(state_dir=tmp_path / "state")
    yield local
    for view in local.list():
        local.delete(view.name, view.namespace)


def test_waiting_for_a_schedule_raises_what_to_wait_for_instead(client: JobClient) -> None:
    client.submit(SCHEDULE)
    # A timeout, so that the old behaviour (block until it) fails rather than hangs.
    with pytest.raises(NeverFinishes, match="yearly never finishes") as raised:
        client.wait("yearly", timeout=30)
    assert "SparkApplication at each due time" in str(raised.value)
    assert "lastRunName" in str(raised.value)
    assert isinstance(raised.value, SubstrateError)  # the CLI's one-line errors
    assert not client.get("yearly").finished  # the schedule itself is left as it was


def test_running_a_schedule_is_refused_and_submits_nothing(client: JobClient) -> None:
    with pytest.raises(NeverFinishes, match=r"submit it with client\.submit"):
        client.run(SCHEDULE, timeout=30)
    assert client.list() == []


def test_a_schedule_is_suspended_and_resumed_through_the_sdk(client: JobClient) -> None:
    client.submit(SCHEDULE)
    assert client.suspend("yearly").job.spec.suspend is True  # type: ignore[attr-defined]
    assert client.resume("yearly").job.spec.suspend is False  # type: ignore[attr-defined]


class ServiceBackend:
    """A substrate whose MarsCluster gets Ready on its third look; records what is asked."""

    def __init__(self) -> None:
        self.job = load_one(MARS)
        self.looks = 0
        self.asked: list[str] = []

    def get(self, name: str, namespace: str | None) -> JobView:
        self.looks += 1
        status = MarsClusterStatus(
            conditions=[Condition(type=ConditionType.CREATED)],
        )
        if self.looks >= 3:
            status.conditions.append(Condition(type=ConditionType.READY))
            status.endpoint = "http://127.0.0.1:1234"
        return JobView(job=self.job, status=status)

    def submit(self, job: Any, options: SubmitOptions) -> JobView:
        self.asked.append(f"submit detach={options.detach}")
        return self.get(job.name, options.namespace)

    def __getattr__(self, verb: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            self.asked.append(verb)
            raise AssertionError(f"{verb} must not be asked of a service cluster here")

        return record


@pytest.fixture
def service(tmp_path: Path) -> tuple[JobClient, ServiceBackend]:
    client = JobClient(state_dir=tmp_path / "state")
    backend = ServiceBackend()
    client.backend = backend  # type: ignore[assignment]
    return client, backend


def test_waiting_for_a_service_cluster_returns_once_it_is_ready(
    service: tuple[JobClient, ServiceBackend],
) -> None:
    client, backend = service
    view = client.wait("m1", timeout=30)
    assert view.status.is_true(ConditionType.READY)
    assert view.status.endpoint == "http://127.0.0.1:1234"  # type: ignore[attr-defined]
    assert not view.finished  # it still serves
    assert backend.looks >= 3
    assert backend.asked == []  # the substrate's wait (until finished) was never asked


def test_a_service_cluster_not_ready_in_time_is_returned_as_it_is(
    service: tuple[JobClient, ServiceBackend],
) -> None:
    client, backend = service
    view = client.wait("m1", timeout=0)
    assert not view.status.is_true(ConditionType.READY)
    assert backend.asked == []


@pytest.mark.parametrize("verb", ["suspend", "resume"])
def test_a_service_cluster_has_no_suspend(
    service: tuple[JobClient, ServiceBackend], verb: str
) -> None:
    client, backend = service
    with pytest.raises(SubstrateError, match=r"MarsCluster m1 cannot be .*: a service cluster"):
        getattr(client, verb)("m1")
    assert backend.asked == []  # nothing was changed


def test_running_a_service_cluster_submits_it_detached_and_returns_once_ready(
    service: tuple[JobClient, ServiceBackend],
) -> None:
    client, backend = service
    view = client.run(MARS, timeout=30)
    assert view.status.is_true(ConditionType.READY)
    # Detached, as `kubemill run` does: it serves on after this call, until deleted.
    assert backend.asked == ["submit detach=True"]
