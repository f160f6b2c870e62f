"""The hot commands import only what they need: each runs for real in a fresh interpreter,
which reports the modules it imported on its way out (the console script ends with
``os._exit`` after the exit handlers, so the report is one of them).

``kubemill --help`` has its own check in test_cli_manifests.py. What is asserted here is
which modules were imported, never how long anything took (that is bench/import_time.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: quick
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: python
            command: ["python", "-c", "print('hi')"]
"""

PROBE = """\
import atexit, json, sys
report_to = sys.argv[1]
def report():
    with open(report_to, "w") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(report)
sys.argv = ["kubemill", *sys.argv[2:]]
from kubemill.cli import main
main()
"""
"""Runs ``kubemill ARGS...`` as the console script does and writes the modules it imported
to the file named first."""

CLUSTER_CLIENTS = {"kubernetes", "kopf", "kubemill.substrates.kubernetes", "kubemill.dashboard"}


def imported(tmp_path: Path, state: Path, *args: str) -> set[str]:
    """The modules ``kubemill ARGS...`` imported (it must succeed)."""
    report = tmp_path / "modules.json"
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(state)}
    env.pop("KUBEMILL_SUBSTRATE", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(report), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return set(json.loads(report.read_text()))


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def engine_folders(modules: set[str]) -> set[str]:
    """The engines (folders of ``kubemill.engines``) of which a module was imported; the
    modules beside them (``base``, ``record_parts``) are every engine's."""
    return {
        m.split(".")[2] for m in modules if m.startswith("kubemill.engines.") and m.count(".") > 2
    }


@pytest.fixture
def state(tmp_path: Path) -> Path:
    directory = tmp_path / "state"
    directory.mkdir()
    return directory


def test_get_imports_no_cli_framework_models_or_engines(tmp_path: Path, state: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    imported(tmp_path, state, "run", "--detach", str(manifest))
    loaded = imported(tmp_path, state, "get")
    assert not tops(loaded) & {"typer", "click", "rich", "pydantic", "yaml", "kubernetes"}
    assert not {m for m in loaded if m.startswith(("kubemill.engines", "kubemill.kinds"))}
    assert "kubemill.substrates.local.store" in loaded  # it did read the jobs


def test_run_detach_of_a_local_job_imports_no_cluster_client(tmp_path: Path, state: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    loaded = imported(tmp_path, state, "run", "--detach", str(manifest))
    assert not loaded & CLUSTER_CLIENTS
    assert not {m for m in loaded if m.startswith(("kubemill.substrates.kubernetes.", "rich.live"))}
    assert "kubemill.engines.pytorch.api" in loaded  # it did validate the job


def test_run_detach_imports_no_cli_framework(tmp_path: Path, state: Path) -> None:
    # Its plain command line is read without typer (kubemill.cli.plain), whose import and
    # per-option validators cost more than the rest of the command line's reading.
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    loaded = imported(tmp_path, state, "--state-dir", str(state), "run", "-d", str(manifest))
    assert not tops(loaded) & {"typer", "click"}
    assert {"kubemill.cli.plain", "kubemill.engines.pytorch.api"} <= loaded


def test_run_detach_imports_no_view_it_does_not_print(tmp_path: Path, state: Path) -> None:
    # It prints two lines, drawn with the styles `get`'s table is drawn with
    # (kubemill.cli.styling): no rich at all (its console, tables, panels and live view are
    # the follower's), no job summary nor a job list's table and rows, and of the API
    # neither the cron parser (schedules') nor any other unused part.
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    loaded = imported(tmp_path, state, "run", "--detach", str(manifest))
    unused = {"kubemill.cli.views", "kubemill.cli.console", "kubemill.sdk.summary"}
    listing = {
        "kubemill.cli.table",
        "kubemill.substrates.rows",
        "kubemill.substrates.local.listing_rows",
    }
    assert not loaded & (unused | listing | {"kubemill.api.cron", "kubemill.api.clusters"})
    assert "rich" not in tops(loaded)
    assert "kubemill.cli.styling" in loaded  # it did print


def test_run_detach_imports_nothing_that_runs_the_job(tmp_path: Path, state: Path) -> None:
    # The detached supervisor runs the job: the submission records it and starts that
    # process, and loads none of the loop, the kubelet stand-in or the exec service.
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    loaded = imported(tmp_path, state, "run", "--detach", str(manifest))
    running = {
        "kubemill.substrates.local.supervisor.loop",
        "kubemill.substrates.local.kubelet",
        "kubemill.substrates.local.exec_service",
        "kubemill.substrates.local.strays",
    }
    assert not loaded & running
    assert "kubemill.substrates.local.supervisor.options" in loaded  # it read the options


def test_run_detach_imports_the_engine_of_its_kind_alone(tmp_path: Path, state: Path) -> None:
    # The registry finds PyTorchJob by its line: no other engine's models or planner load.
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    loaded = imported(tmp_path, state, "run", "--detach", str(manifest))
    assert engine_folders(loaded) == {"pytorch"}
    assert "kubemill.engines.base" in loaded
    assert {"kubemill.engines.pytorch.api", "kubemill.engines.pytorch.entry"} <= loaded


def test_run_detach_imports_no_module_of_the_core(tmp_path: Path, state: Path) -> None:
    # It loads and plans the job and starts its supervisor, which runs the core: any module
    # of the core loads the whole reconciler (its package imports it), the lifecycles'
    # rules, the actions and observations. The supervisor's start reads the options it is
    # called with, the log policy and the resources, none of which needs it.
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    loaded = imported(tmp_path, state, "run", "--detach", str(manifest))
    assert not {m for m in loaded if m == "kubemill.core" or m.startswith("kubemill.core.")}
    assert "kubemill.frameworks.plan" in loaded  # it did plan the job


def test_run_detach_makes_no_plan_record_its_job_has_not(tmp_path: Path, state: Path) -> None:
    # A PyTorchJob's Plan has no remote run (a RayJob's submission) and no replica run
    # through a child controller: their dataclasses are not made.
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    loaded = imported(tmp_path, state, "run", "--detach", str(manifest))
    assert not loaded & {"kubemill.frameworks.remote", "kubemill.frameworks.controlled"}
    assert "kubemill.frameworks._common" in loaded  # it did build the replicas


def test_a_detached_supervisor_imports_no_cli(tmp_path: Path) -> None:
    probe = (
        "import json, sys\n"
        "import kubemill.substrates.local.supervisor.__main__\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(done.stdout))
    assert not tops(loaded) & {"typer", "click", "rich", "kubernetes", "kopf"}
    assert not {m for m in loaded if m.startswith(("kubemill.cli", "kubemill.sdk"))}


def test_cluster_stop_imports_the_engine_of_its_kind_alone(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `cluster stop` asks the stopped cluster's own kind whether it serves, not every engine
    # (which imported all of them, ~0.5 s of the stop). The cluster's image is this venv
    # (without Mars its replicas restart, while the cluster exists all the same).
    config = tmp_path / "config.yaml"
    config.write_text(f'images:\n  "*": {sys.prefix}\n')
    monkeypatch.setenv("KUBEMILL_CONFIG", str(config))
    imported(tmp_path, state, "cluster", "create", "mars", "--name", "m1", "--no-wait")
    try:
        loaded = imported(tmp_path, state, "cluster", "stop", "m1")
    except AssertionError:
        delete = (
            "import sys; from kubemill.cli import main; sys.argv[1:] = ['delete', 'm1']; main()"
        )
        env = {**os.environ, "KUBEMILL_STATE_DIR": str(state)}
        subprocess.run([sys.executable, "-c", delete], env=env, capture_output=True, timeout=120)
        raise
    assert engine_folders(loaded) == {"mars"}
