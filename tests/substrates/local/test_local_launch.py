"""How a replica of the Plan becomes argv, environment and working directory, and the
clear errors for what cannot run locally (all reported before anything starts)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from local_support import container, pytorch_job

from kubemill.kinds import load_one, plan_for
from kubemill.substrates.local import Environment, ImageConfig, LocalNetwork, NotRunnableLocally
from kubemill.substrates.local.images import default_environment
from kubemill.substrates.local.launch import LaunchSpec, PodContext, prepare
from kubemill.substrates.local.network import PortAllocator


def _prepare(job_doc: Any, base_dir: Path, **envs: Environment) -> dict[str, LaunchSpec]:
    job = job_doc if not isinstance(job_doc, dict) else load_one(job_doc)
    network = LocalNetwork(job.name, allocator=PortAllocator())
    plan = plan_for(job, network)
    ctx = PodContext(
        job_uid="uid-1", namespace=job.namespace, base_dir=str(base_dir), log_dir=str(base_dir)
    )
    environments = {"local-python": envs.get("env", default_environment())}
    return prepare(job, plan, ctx=ctx, environments=environments)


def test_argv_is_command_plus_args_expanded_without_a_shell(tmp_path: Path) -> None:
    spec = container(
        None,
        command=["python", "-c"],
        args=["print(1)", "--rank=$(RANK)", "$$(RANK)", "$(NOPE)", "a b;c"],
        env=[{"name": "GREETING", "value": "hi $(RANK)"}],
    )
    specs = _prepare(pytorch_job("argv", master=spec, worker=spec), tmp_path)
    worker = specs["argv-worker-0"]
    assert worker.argv == ("python", "-c", "print(1)", "--rank=1", "$(RANK)", "$(NOPE)", "a b;c")
    # GREETING is defined before the Plan's RANK, so (as in Kubernetes) it cannot see it.
    assert worker.env["GREETING"] == "hi $(RANK)"


def test_env_values_expand_over_earlier_variables(tmp_path: Path) -> None:
    spec = container(
        "pass",
        env=[
            {"name": "A", "value": "one"},
            {"name": "B", "value": "$(A)-two"},
            {"name": "C", "value": "$(D)"},
            {"name": "D", "value": "later"},
        ],
    )
    env = _prepare(pytorch_job("envs", master=spec), tmp_path)["envs-master-0"].env
    assert (env["A"], env["B"], env["C"], env["D"]) == ("one", "one-two", "$(D)", "later")


def test_environment_inherits_puts_the_interpreter_first_and_adds_pod_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEMILL_TEST_INHERITED", "yes")
    monkeypatch.setenv("PYTHONHOME", "/somewhere/else")
    field_refs = {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "POD_IP": "status.podIP",
        "HOST_IP": "status.hostIP",
        "NODE": "spec.nodeName",
        "SA": "spec.serviceAccountName",
        "ROLE": "metadata.labels['team']",
        "ROLE2": 'metadata.labels["kubemill.dev/replica-type"]',
        "NOTE": "metadata.annotations['note']",
        "UID": "metadata.uid",
    }
    spec = container(
        "pass",
        env=[
            {"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in field_refs.items()
        ]
        + [{"name": "MASTER_PORT", "value": "overridden-by-plan"}],
    )
    job = pytorch_job("fields", master=spec, worker=spec)
    job.replica_specs["Worker"].template.metadata.labels["team"] = "blue"
    job.replica_specs["Worker"].template.metadata.annotations["note"] = "hello"
    job.metadata.namespace = "research"
    specs = _prepare(job, tmp_path)
    env = specs["fields-worker-0"].env
    assert env["KUBEMILL_TEST_INHERITED"] == "yes"
    assert "PYTHONHOME" not in env
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).absolute().parent)
    assert env["HOSTNAME"] == "fields-worker-0"
    assert env["POD_NAME"] == "fields-worker-0"
    assert env["POD_NAMESPACE"] == "research"
    assert env["POD_IP"] == env["HOST_IP"] == "127.0.0.1"
    assert env["NODE"] == socket.gethostname()
    assert env["SA"] == "default"
    assert env["ROLE"] == "blue"
    assert env["ROLE2"] == "worker"
    assert env["NOTE"] == "hello"
    assert env["UID"] and env["UID"] != specs["fields-master-0"].env["UID"]
    # The framework's contract comes last and wins, as a later env entry does.
    master_port = int(env["MASTER_PORT"])
    assert env["MASTER_ADDR"] == "127.0.0.1"
    assert env["RANK"] == "1" and env["WORLD_SIZE"] == "2"
    assert specs["fields-master-0"].env["MASTER_PORT"] == str(master_port)


def test_working_dir_defaults_to_base_dir_and_relative_ones_resolve_against_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    job = pytorch_job(
        "wd",
        master=container("pass", workingDir="sub"),
        worker=container("pass", workingDir=str(tmp_path)),
    )
    specs = _prepare(job, tmp_path)
    assert specs["wd-master-0"].cwd == str(tmp_path / "sub")
    assert specs["wd-worker-0"].cwd == str(tmp_path)
    plain = _prepare(pytorch_job("wd2", master=container("pass")), tmp_path)
    assert plain["wd2-master-0"].cwd == str(tmp_path)


def _errors(job: Any, base_dir: Path, **envs: Environment) -> list[str]:
    with pytest.raises(NotRunnableLocally) as caught:
        _prepare(job, base_dir, **envs)
    return [str(e) for e in caught.value.errors]


@pytest.mark.parametrize(
    ("master", "path", "words"),
    [
        pytest.param(
            container(None),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command",
            "has no `command`: a local run has no container image to take an entrypoint from",
            id="no-command",
        ),
        pytest.param(
            container(None, args=["train.py"]),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command",
            "has `args` but no `command`",
            id="args-without-command",
        ),
        pytest.param(
            container(None, command=["no-such-program-kubemill"]),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command[0]",
            "replica bad-master-0: executable 'no-such-program-kubemill' not found on PATH",
            id="missing-executable",
        ),
        pytest.param(
            container(None, command=["./missing.sh"]),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command[0]",
            "executable './missing.sh' does not exist",
            id="missing-relative-executable",
        ),
        pytest.param(
            container("pass", workingDir="nowhere"),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].workingDir",
            "does not exist",
            id="missing-working-dir",
        ),
        pytest.param(
            container(
                "pass",
                env=[{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            ),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[0].valueFrom"
            ".secretKeyRef",
            "S: the local substrate has no Secrets to read from",
            id="secret-ref",
        ),
        pytest.param(
            container(
                "pass",
                env=[{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
            ),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[0].valueFrom"
            ".configMapKeyRef",
            "no ConfigMaps",
            id="configmap-ref",
        ),
        pytest.param(
            container(
                "pass",
                env=[{"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}],
            ),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[0].valueFrom"
            ".fieldRef.fieldPath",
            "'spec.bogus' is not a field the local substrate can provide",
            id="unknown-field-ref",
        ),
        pytest.param(
            container("pass", envFrom=[{"secretRef": {"name": "s"}}]),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].envFrom",
            "envFrom (ConfigMaps and Secrets) is not available",
            id="env-from",
        ),
    ],
)
def test_what_cannot_run_locally_is_named_with_its_field_path(
    tmp_path: Path, master: dict[str, Any], path: str, words: str
) -> None:
    errors = _errors(pytorch_job("bad", master=master), tmp_path)
    assert len(errors) == 1, errors
    assert errors[0].startswith(path + ": "), errors[0]
    assert words in errors[0]


def test_every_problem_is_reported_once_per_field(tmp_path: Path) -> None:
    job = pytorch_job(
        "many", master=container(None), worker=container(None, workingDir="x"), workers=3
    )
    errors = _errors(job, tmp_path)
    # Master command, Worker command, Worker workingDir: the 3 workers share one template.
    assert len(errors) == 3, errors


def test_executable_is_looked_up_in_the_chosen_environment(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    tool = venv / "bin" / "only-in-venv"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    job = pytorch_job(
        "venvs", master=container(None, command=["only-in-venv"], image="local-python")
    )
    env = Environment(bin_dir=str(venv / "bin"), source="test")
    specs = _prepare(job, tmp_path, env=env)
    assert specs["venvs-master-0"].env["PATH"].split(os.pathsep)[0] == str(venv / "bin")
    errors = _errors(job, tmp_path)  # the default environment has no such program
    assert "only-in-venv" in errors[0]


# --- the image -> environment config -----------------------------------------------------------


def _venv(path: Path) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return path


def test_config_maps_exact_names_before_globs_and_defaults_the_rest(tmp_path: Path) -> None:
    exact, glob = _venv(tmp_path / "exact"), _venv(tmp_path / "glob")
    config = tmp_path / "config.yaml"
    config.write_text(f'images:\n  "pytorch/*": {glob}\n  pytorch/pytorch:2: {exact}\n')
    loaded = ImageConfig.load(config)
    assert loaded.resolve("pytorch/pytorch:2").bin_dir == str(exact / "bin")
    assert loaded.resolve("pytorch/other").bin_dir == str(glob / "bin")
    assert loaded.resolve("pytorch/other").is_venv
    assert loaded.resolve("busybox").is_default


def test_config_is_found_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = _venv(tmp_path / "tf")
    config = tmp_path / "elsewhere.yaml"
    config.write_text(f"images:\n  tf: {venv}\n")
    monkeypatch.setenv("KUBEMILL_CONFIG", str(config))
    assert ImageConfig.load().resolve("tf").bin_dir == str(venv / "bin")
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "absent.yaml"))
    assert ImageConfig.load().images == {}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("images: [a, b]\n", "expected a mapping of image name", id="not-a-mapping"),
        pytest.param("images:\n  x: 3\n", "images.x: expected the path", id="not-a-path"),
        pytest.param("imagez: {}\n", "unknown keys ['imagez']", id="unknown-key"),
        pytest.param("images: {x: [\n", "not valid YAML", id="bad-yaml"),
        pytest.param("images:\n  x: /no/such/venv\n", "has no bin/ directory", id="no-venv"),
    ],
)
def test_a_broken_config_says_what_is_wrong(tmp_path: Path, text: str, words: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    from kubemill.substrates.base import SubstrateError

    with pytest.raises(SubstrateError) as caught:
        ImageConfig.load(config).resolve("x")
    assert words in str(caught.value)
    assert str(config) in str(caught.value)
