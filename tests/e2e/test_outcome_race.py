"""The race of issue 6, for real: a worker fails as the master succeeds, and the job fails.

A PyTorchJob (Master + 1 Worker, restartPolicy Never) does one real gloo all-reduce of
a one-element tensor; right after it, the master exits 0 and the worker exits 1, so the
two exits land within milliseconds of each other in either order. Before the core judged
outcomes by finish time, such a job was reported Succeeded in about half of the runs.
Now a failure that finished within the tie window of the success wins, every time.

Kept light on purpose: no training, a tiny tensor, runs one after another.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kubemill.api import ConditionType
from kubemill.kinds import load_one
from kubemill.sdk import JobClient
from support.engines import skip_without

pytestmark = pytest.mark.e2e

RUNS = 10

RACE = textwrap.dedent(
    """
    import os
    import signal

    import torch
    import torch.distributed as dist

    # The job is stopped as soon as the worker's failure is seen; on a loaded machine that
    # can come before the master, its all-reduce done, has printed and exited. The race is
    # of the two exits, so a stop does not cut a rank short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    dist.init_process_group("gloo")
    value = torch.ones(1)
    dist.all_reduce(value)
    rank = dist.get_rank()
    print(f"rank {rank} all-reduced {value.item():g}", flush=True)
    # Exit at once, without tearing gloo down: the two exits race as closely as they can.
    os._exit(0 if rank == 0 else 1)
    """
)


def _job(name: str) -> dict[str, object]:
    def replica() -> dict[str, object]:
        return {
            "replicas": 1,
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "containers": [
                        {"name": "pytorch", "image": "trainer", "command": ["python", "race.py"]}
                    ],
                }
            },
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}},
    }


@pytest.mark.engine
def test_a_worker_failing_as_the_master_succeeds_fails_the_job_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_without("torch", "torch")
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    (tmp_path / "race.py").write_text(RACE, encoding="utf-8")
    client = JobClient(state_dir=tmp_path / "state")
    verdicts = []
    for run in range(RUNS):
        name = f"race-{run}"
        view = client.run(load_one(_job(name)), base_dir=tmp_path, timeout=300)
        assert view.finished, f"{name} did not finish: {view.status}"
        replicas = {r.name: r for r in view.replicas}
        # The race really happened: both ranks did the all-reduce, then exited as told.
        logs = "\n".join(line.text for line in client.logs(name))
        assert "rank 0 all-reduced 2" in logs and "rank 1 all-reduced 2" in logs, logs
        assert replicas[f"{name}-master-0"].exit_code == 0
        assert replicas[f"{name}-worker-0"].exit_code == 1
        failed = view.status.condition(ConditionType.FAILED)
        verdicts.append(
            (view.phase, failed.message if failed is not None and failed.status == "True" else "")
        )
        client.delete(name)
    assert [phase for phase, _ in verdicts] == ["Failed"] * RUNS, verdicts
    assert all("worker-0 exited with code 1" in message for _, message in verdicts), verdicts
