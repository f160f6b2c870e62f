"""What a :class:`LocalBackend` is given reaches its supervisors, in the foreground and
detached: ``config_path`` (the start limits, ``replicaStarts``) and ``exclusive`` (the
foreground ``kubemill run``: a daemon that cleared its environment still ends with the job).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from local_support import DAEMONISE, assert_gone, daemons, pytorch_job

from kubemill.substrates.base import SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend, SupervisorOptions, procinfo

WORKERS = 14
WORKER = "import os; open('started-' + os.environ['HOSTNAME'], 'w').close()"
MASTER = f"import glob, time\nwhile len(glob.glob('started-*')) < {WORKERS}: time.sleep(0.01)\n"
"""The master waits for every worker, so the job only ends once all of them have run."""

KUBEMILL = Path(sys.executable).parent / "kubemill"


def most_in_one_second(starts: list[datetime]) -> int:
    moments = sorted(s.timestamp() for s in starts)
    return max(sum(1 for t in moments if first <= t < first + 1.0) for first in moments)


@pytest.fixture
def configured(isolated: Path) -> Iterator[LocalBackend]:
    """A backend given a config file of its own; KUBEMILL_CONFIG names one that is absent
    (the defaults, which would start all 15 replicas at once)."""
    config = isolated / "own-config.yaml"
    config.write_text("replicaStarts:\n  perSecond: 4\n  burst: 3\n")
    local = LocalBackend(
        isolated / "state", config_path=config, supervisor_options=SupervisorOptions()
    )
    yield local
    for rec in local.store.jobs():
        local.delete(rec.name, rec.namespace)


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_the_start_limits_come_from_the_backends_config_path(
    configured: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    job = pytorch_job("many", master=MASTER, worker=WORKER, workers=WORKERS)
    configured.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))
    done = configured.wait("many", timeout=120)
    assert done.phase == "Succeeded", done.status
    starts = [r.started for r in done.replicas if r.started is not None]
    assert len(starts) == WORKERS + 1
    assert most_in_one_second(starts) <= 3 + 4


def test_a_bad_start_rate_in_the_backends_config_is_refused_at_submit(
    isolated: Path, tmp_path: Path
) -> None:
    config = isolated / "own-config.yaml"
    config.write_text("replicaStarts:\n  perSecond: -1\n")
    local = LocalBackend(isolated / "state", config_path=config)
    with pytest.raises(SubstrateError, match=re.escape("own-config.yaml: replicaStarts.perSecond")):
        local.submit(pytorch_job("bad", master="pass"), SubmitOptions(base_dir=str(tmp_path)))
    assert local.list() == []


def cleared_daemon_manifest(tmp_path: Path) -> Path:
    container = {
        "name": "pytorch",
        "image": "python",
        "command": ["python", "-c", DAEMONISE],
        # DAEMONISE starts its daemons with an empty environment: no mark to find them by.
        "env": [{"name": "CLEAR_ENV", "value": "1"}],
    }
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "cleared"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
            }
        },
    }
    path = tmp_path / "cleared.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("code", [0, 3])
def test_kubemill_run_ends_daemons_that_cleared_their_environment(
    isolated: Path, tmp_path: Path, code: int
) -> None:
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(tmp_path / "state")}
    env.pop("KUBEMILL_SUBSTRATE", None)
    run = subprocess.Popen(
        [str(KUBEMILL), "run", str(cleared_daemon_manifest(tmp_path))],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started: list[procinfo.ProcessId] = []
    try:
        started = daemons(tmp_path)
        (tmp_path / "go").write_text(str(code))
        assert run.wait(timeout=120) == (0 if code == 0 else 1)
        assert_gone(started)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for leftover in started:  # never leave them running, whatever failed
            procinfo.kill_process(leftover)
