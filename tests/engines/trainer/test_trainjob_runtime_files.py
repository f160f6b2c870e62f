"""Training runtimes given locally: ``kubemill run trainjob.yaml --runtime FILE`` (a file may
hold several runtimes) and the config file's ``runtimes:`` list are known before the
defaults, kept for the job's later commands and its detached supervisor; a runtime nobody
gave is refused at ``spec.runtimeRef.name`` with the names kubemill knows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ManifestError
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.runtime import load_runtime
from kubemill.kinds import load_one
from kubemill.substrates.local import known_objects
from support.e2e_support import Cli, processes_with_token
from support.trainer_runtimes import node_runtime
from support.waiting import eventually

UPSTREAM = "trainer.kubeflow.org/v1alpha1"


def shell_runtime(
    name: str, script: str, *, kind: str = "ClusterTrainingRuntime"
) -> dict[str, Any]:
    """A runtime without an ML policy whose trainer step runs ``script`` on 2 nodes."""
    container = {"name": "node", "image": "local", "command": ["sh", "-c", script]}
    return node_runtime(name, container, kind=kind)


def trainjob(name: str, runtime: str, *, kind: str = "ClusterTrainingRuntime") -> dict[str, Any]:
    return {
        "apiVersion": UPSTREAM,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime, "kind": kind}},
    }


def write_yaml(path: Path, *docs: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return path


@pytest.fixture
def forget() -> Iterator[list[str]]:
    """Names of cluster runtimes a test makes known in this process, forgotten afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        runtime = runtimes.find("ClusterTrainingRuntime", name, "default")
        if runtime is not None:
            runtimes.remove(runtime)


# --- in one process ----------------------------------------------------------------------


def test_a_file_of_several_runtimes_is_kept_and_known_again_from_the_state_dir(
    tmp_path: Path, forget: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "none.yaml"))
    state = tmp_path / "state"
    file = write_yaml(
        tmp_path / "runtimes.yaml",
        shell_runtime("kept-one", "true"),
        shell_runtime("kept-team", "true", kind="TrainingRuntime"),
    )
    forget.append("kept-one")
    assert known_objects.keep([file], state) == 2
    job = load_one(trainjob("t", "kept-one"))
    assert job.replica_specs["node"].replicas == 2
    team = load_one(trainjob("t", "kept-team", kind="TrainingRuntime"))
    assert team.replica_specs["node"].template.spec.containers[0].command == ["sh", "-c", "true"]
    kept = sorted(p.name for p in known_objects.kept_files(state))
    assert kept == [
        "ClusterTrainingRuntime..kept-one.yaml",
        "TrainingRuntime..kept-team.yaml",
    ]
    # Forgotten here, the state directory makes them known again (another process would).
    for doc in yaml.safe_load_all(file.read_text(encoding="utf-8")):
        runtime, _ = load_runtime(doc)
        assert runtime is not None
        runtimes.remove(runtime)
    with pytest.raises(ManifestError):
        load_one(trainjob("t", "kept-one"))
    assert known_objects.know_local_objects(state) == 2
    assert load_one(trainjob("t", "kept-one")).name == "t"
    team_runtime = runtimes.find("TrainingRuntime", "kept-team", "default")
    assert team_runtime is not None
    runtimes.remove(team_runtime)


def test_the_config_files_runtimes_replace_a_default_of_their_name(
    tmp_path: Path, forget: list[str]
) -> None:
    write_yaml(tmp_path / "rt" / "torch.yaml", shell_runtime("torch-distributed", "echo mine"))
    config = write_yaml(tmp_path / "config.yaml", {"runtimes": ["rt/torch.yaml"]})
    forget.append("torch-distributed")
    assert known_objects.know_local_objects(tmp_path / "state", config) == 1
    job = load_one(trainjob("t", "torch-distributed"))
    command = job.replica_specs["node"].template.spec.containers[0].command
    assert command == ["sh", "-c", "echo mine"]
    # Unchanged files are not read again.
    assert known_objects.know_local_objects(tmp_path / "state", config) == 0


def test_a_removed_runtime_brings_back_the_default_it_replaced(forget: list[str]) -> None:
    replaced = runtimes.add(shell_runtime("torch-distributed", "echo mine"))
    runtimes.remove(replaced)
    back = runtimes.find("ClusterTrainingRuntime", "torch-distributed", "default")
    assert back is not None and back.spec.ml_policy is not None
    assert back.spec.ml_policy.torch is not None


def test_a_document_that_is_no_runtime_is_refused_naming_its_file(tmp_path: Path) -> None:
    file = write_yaml(tmp_path / "mixed.yaml", trainjob("t", "x"))
    with pytest.raises(ManifestError) as caught:
        known_objects.keep([file], tmp_path / "state")
    (error,) = caught.value.errors
    assert (error.path, error.source) == ("kind", str(file))
    assert "'TrainJob' is not a kind kubemill keeps" in error.message
    assert "ClusterTrainingRuntime" in error.hint and "TrainingRuntime" in error.hint
    assert not known_objects.kept_files(tmp_path / "state"), "an invalid file was kept"


def test_an_invalid_runtime_is_refused_at_its_field_path(tmp_path: Path) -> None:
    broken = shell_runtime("broken", "true")
    broken["spec"]["mlPolicy"]["numNodes"] = 0
    file = write_yaml(tmp_path / "broken.yaml", broken)
    with pytest.raises(ManifestError) as caught:
        known_objects.keep([file], tmp_path / "state")
    assert [(e.path, e.source) for e in caught.value.errors] == [
        ("spec.mlPolicy.numNodes", str(file))
    ]


def test_a_runtime_nobody_gave_is_refused_with_the_known_names() -> None:
    with pytest.raises(ManifestError) as caught:
        load_one(trainjob("t", "nobodys"))
    (error,) = caught.value.errors
    assert error.path == "spec.runtimeRef.name"
    assert "no ClusterTrainingRuntime named 'nobodys' is known" in error.message
    for name in ("torch-distributed", "mpi-distributed", "jax-distributed"):
        assert name in error.hint
    assert "--runtime FILE" in error.hint


# --- through the real CLI ------------------------------------------------------------------


def test_run_with_runtime_files_then_later_commands_load_the_job(cli: Cli) -> None:
    file = write_yaml(
        cli.cwd / "runtimes.yaml",
        shell_runtime("echo-nodes", "echo ran here"),
        shell_runtime("other", "true"),
    )
    manifest = write_yaml(cli.cwd / "job.yaml", trainjob("given", "echo-nodes"))
    done = cli("run", str(manifest), "--runtime", str(file), timeout=120)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count("ran here") == 2, done.stdout
    # Another process (no --runtime) loads the recorded job: the state directory kept them.
    shown = cli("get", "given", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"]["replicaStatuses"]["node"]["succeeded"] == 2
    described = cli("describe", "given")
    assert described.returncode == 0, described.stderr
    assert not processes_with_token(cli.token), "a process outlived its job"


def test_a_detached_trainjob_resolves_a_runtime_of_the_config_file(cli: Cli) -> None:
    write_yaml(cli.cwd.parent / "runtimes" / "rt.yaml", shell_runtime("from-config", "exit 0"))
    write_yaml(
        cli.cwd.parent / "config" / "kubemill" / "config.yaml",
        {"runtimes": ["../../runtimes/rt.yaml"]},
    )
    manifest = write_yaml(cli.cwd / "job.yaml", trainjob("configured", "from-config"))
    done = cli("run", "--detach", str(manifest))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"

    def succeeded() -> bool:
        shown = cli("get", "configured", "-o", "json")
        assert shown.returncode == 0, shown.stderr
        conditions = json.loads(shown.stdout)["status"].get("conditions", [])
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    eventually(succeeded, timeout=90, what="the detached TrainJob to complete")


def test_run_refuses_a_missing_runtime_with_its_field_path(cli: Cli) -> None:
    manifest = write_yaml(cli.cwd / "job.yaml", trainjob("lost", "nowhere"))
    done = cli("run", str(manifest))
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "spec.runtimeRef.name" in said and "torch-distributed" in said, said


def test_runtime_files_are_for_the_local_substrate(cli: Cli) -> None:
    file = write_yaml(cli.cwd / "rt.yaml", shell_runtime("x", "true"))
    manifest = write_yaml(cli.cwd / "job.yaml", trainjob("k", "x"))
    done = cli("--substrate", "kubernetes", "run", str(manifest), "--runtime", str(file))
    assert done.returncode != 0
    assert "--runtime is for the local substrate" in done.stdout + done.stderr


def test_validate_and_render_resolve_runtime_files_as_run_does(cli: Cli) -> None:
    file = write_yaml(cli.cwd / "rt.yaml", shell_runtime("checked", "echo rendered"))
    manifest = write_yaml(cli.cwd / "job.yaml", trainjob("checked-job", "checked"))
    refused = cli("validate", str(manifest))
    assert refused.returncode == 1
    assert "spec.runtimeRef.name: no ClusterTrainingRuntime named 'checked'" in refused.stdout
    assert "--runtime FILE (kubemill run, validate, render)" in refused.stdout, refused.stdout
    valid = cli("validate", str(manifest), "--runtime", str(file))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "OK (TrainJob checked-job)" in valid.stdout
    rendered = cli("render", str(manifest), "--runtime", str(file))
    assert rendered.returncode == 0, rendered.stderr
    pods = [o for o in yaml.safe_load_all(rendered.stdout) if o["kind"] == "Pod"]
    assert len(pods) == 2  # the runtime's numNodes
    for pod in pods:
        assert pod["spec"]["containers"][0]["command"] == ["sh", "-c", "echo rendered"]
    # Checking is no run: nothing is kept for later commands.
    assert not known_objects.kept_files(cli.state_dir)
    assert cli("render", str(manifest)).returncode != 0


def test_validate_and_render_resolve_the_config_files_runtimes(cli: Cli) -> None:
    write_yaml(cli.cwd.parent / "runtimes" / "rt.yaml", shell_runtime("configured", "echo cfg"))
    write_yaml(
        cli.cwd.parent / "config" / "kubemill" / "config.yaml",
        {"runtimes": ["../../runtimes/rt.yaml"]},
    )
    manifest = write_yaml(cli.cwd / "job.yaml", trainjob("cfg-job", "configured"))
    valid = cli("validate", str(manifest))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    rendered = cli("render", str(manifest))
    assert rendered.returncode == 0, rendered.stderr
    assert "echo cfg" in rendered.stdout
    # A runtime file given to a command replaces the config file's of the same name.
    mine = write_yaml(cli.cwd / "mine.yaml", shell_runtime("configured", "echo given"))
    replaced = cli("render", str(manifest), "--runtime", str(mine))
    assert replaced.returncode == 0, replaced.stderr
    assert "echo given" in replaced.stdout and "echo cfg" not in replaced.stdout
