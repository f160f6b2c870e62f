"""The local kubelet's exec readiness probe: a pod is ready only while its probe passes.

Driven directly on :class:`ReplicaPod` with real processes (a sleeping main process, a
probe testing a file the test creates and removes); times are the test's own ``now``
values, so nothing here waits for a period to pass on the clock.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from kubemill.api import FieldError
from kubemill.substrates.local.kubelet import ReplicaPod
from kubemill.substrates.local.launch import LaunchSpec
from kubemill.substrates.local.probes import ExecProbe, exec_probe


def _spec(tmp_path: Path, probe: ExecProbe | None) -> LaunchSpec:
    return LaunchSpec(
        replica="probe-0",
        argv=(sys.executable, "-c", "import time; time.sleep(60)"),
        env={"PATH": "/usr/bin:/bin"},
        cwd=str(tmp_path),
        log_path=str(tmp_path / "probe-0.log"),
        readiness=probe,
    )


def _settle(pod: ReplicaPod, now: float) -> bool:
    """Poll until the probe run started at ``now`` has finished (real time passes)."""
    changed = pod.poll(now)
    for _ in range(200):
        assert pod.prober is not None
        if pod.prober._run is None:
            return changed
        time.sleep(0.02)
        changed = pod.poll(now) or changed
    raise AssertionError("the probe did not finish")


@pytest.fixture
def pod_factory(tmp_path: Path):  # type: ignore[no-untyped-def]
    pods: list[ReplicaPod] = []

    def make(probe: ExecProbe | None) -> ReplicaPod:
        pod = ReplicaPod(_spec(tmp_path, probe), restart_policy="Never")
        pods.append(pod)
        return pod

    yield make
    for pod in pods:
        pod.kill()
        if pod.popen is not None:
            pod.popen.wait()
        pod.close()


def test_a_pod_is_ready_only_while_its_exec_probe_passes(tmp_path: Path, pod_factory) -> None:  # type: ignore[no-untyped-def]
    ready = tmp_path / "ready"
    pod = pod_factory(
        ExecProbe(("test", "-f", str(ready)), initial_delay=5, period=2, failure_threshold=2)
    )
    pod.start(1000.0)
    assert not pod.observed("Worker", 0).ready  # running, probe not passed yet
    _settle(pod, 1004.0)  # before the initial delay: no run
    assert not pod.observed("Worker", 0).ready
    _settle(pod, 1005.0)  # first run: the file is missing
    assert not pod.observed("Worker", 0).ready
    ready.write_text("up")
    assert _settle(pod, 1007.0)  # the next period: passes, readiness changed
    assert pod.observed("Worker", 0).ready
    ready.unlink()
    _settle(pod, 1009.0)  # one failure: below failureThreshold, still ready
    assert pod.observed("Worker", 0).ready
    assert _settle(pod, 1011.0)  # two in a row: unready
    assert not pod.observed("Worker", 0).ready


def test_the_next_deadline_is_the_next_probe_run(tmp_path: Path, pod_factory) -> None:  # type: ignore[no-untyped-def]
    pod = pod_factory(ExecProbe(("true",), initial_delay=3, period=7))
    pod.start(500.0)
    assert pod.next_deadline == 503.0
    _settle(pod, 503.0)
    assert pod.observed("Worker", 0).ready
    assert pod.next_deadline == 510.0


def test_a_probe_past_its_timeout_fails(tmp_path: Path, pod_factory) -> None:  # type: ignore[no-untyped-def]
    pod = pod_factory(ExecProbe(("sleep", "30"), timeout=1, failure_threshold=1))
    pod.start(100.0)
    pod.poll(100.0)  # the run starts
    assert pod.prober is not None and pod.prober._run is not None
    pod.poll(101.5)  # past its timeout: killed, a failure
    assert pod.prober._run is None
    assert not pod.observed("Worker", 0).ready


def test_a_pod_without_a_probe_is_ready_while_it_runs(tmp_path: Path, pod_factory) -> None:  # type: ignore[no-untyped-def]
    pod = pod_factory(None)
    pod.start(1.0)
    assert pod.observed("Worker", 0).ready
    pod.terminate(2.0, reason="test")
    assert not pod.observed("Worker", 0).ready


def test_an_exited_container_is_not_ready_and_its_probe_stops(tmp_path: Path, pod_factory) -> None:  # type: ignore[no-untyped-def]
    pod = pod_factory(ExecProbe(("true",)))
    pod.start(1.0)
    _settle(pod, 1.0)
    assert pod.observed("Worker", 0).ready
    assert pod.popen is not None
    pod.popen.kill()
    pod.popen.wait()
    pod.poll(2.0)
    assert pod.state.phase == "Failed"
    assert not pod.observed("Worker", 0).ready
    assert pod.prober is not None and pod.prober.next_deadline is None


def test_exec_probe_reads_the_manifest_fields_and_expands_variables() -> None:
    probe, errors = exec_probe(
        {
            "exec": {"command": ["test", "-f", "$(READY)"]},
            "initialDelaySeconds": 1,
            "periodSeconds": 2,
            "failureThreshold": 4,
        },
        "spec.x.readinessProbe",
        {"READY": "/run/ready"},
    )
    assert errors == []
    assert probe == ExecProbe(
        ("test", "-f", "/run/ready"), initial_delay=1, period=2, failure_threshold=4
    )


def test_other_probe_handlers_are_not_run_locally() -> None:
    assert exec_probe({"httpGet": {"port": 80}}, "p", {}) == (None, [])
    assert exec_probe(None, "p", {}) == (None, [])


@pytest.mark.parametrize(
    ("probe", "path"),
    [
        ({"exec": {"command": []}}, "p.exec.command"),
        ({"exec": {"command": "test -f x"}}, "p.exec.command"),
        ({"exec": {"command": ["true"]}, "periodSeconds": 0}, "p.periodSeconds"),
        ({"exec": {"command": ["true"]}, "failureThreshold": "3"}, "p.failureThreshold"),
    ],
)
def test_a_bad_exec_probe_is_an_error_at_its_field(probe: dict[str, object], path: str) -> None:
    found, errors = exec_probe(probe, "p", {})
    assert found is None
    assert [e.path for e in errors] == [path]
    assert all(isinstance(e, FieldError) for e in errors)
