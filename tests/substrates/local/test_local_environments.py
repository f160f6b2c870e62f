"""Images name local Python environments: a real second virtualenv, chosen by the config file.

Two replicas of one job run under two interpreters (the default one and a venv mapped in
the config), which is how engines with conflicting pins coexist on one machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from local_support import container, log_text, pytorch_job

from kubemill.engines.mars.api import DEFAULT_IMAGE as DEFAULT_MARS_IMAGE
from kubemill.substrates.base import SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend, SupervisorOptions, environments
from kubemill.substrates.local.images import ImageConfig, managed_environment
from kubemill.substrates.local.managed_images import MANAGED_IMAGES

SHOW_PREFIX = "import json, sys; print(json.dumps({'prefix': sys.prefix}), flush=True)"
# The job succeeds when the master does, so the master waits until the worker has spoken.
WAIT_FOR_WORKER = "import os, time\nwhile not os.path.exists('worker-done'): time.sleep(0.01)\n"


def test_an_image_mapped_in_the_config_runs_in_that_venv(isolated: Path) -> None:
    venv = isolated / "other-env"
    # --without-pip: a real interpreter environment in about a second, nothing downloaded.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    config = isolated / "config.yaml"
    config.write_text(f"images:\n  'team/other:*': {venv}\n")
    backend = LocalBackend(
        isolated / "state", config_path=config, supervisor_options=SupervisorOptions()
    )
    job = pytorch_job(
        "two-envs",
        master=container(WAIT_FOR_WORKER + SHOW_PREFIX, image="team/other:1.0"),
        worker=container(SHOW_PREFIX + "; open('worker-done', 'w').close()", image="other"),
    )
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(isolated)))
    try:
        done = backend.wait("two-envs", timeout=120)
        assert done.phase == "Succeeded", done.status
        master = json.loads(log_text(backend, "two-envs", "master-0"))
        worker = json.loads(log_text(backend, "two-envs", "worker-0"))
        assert Path(master["prefix"]) == venv
        assert Path(worker["prefix"]) == Path(sys.prefix)
    finally:
        backend.delete("two-envs")


# --- environments kubemill builds itself (kubemill env ...) ---------------------------------

MARKS = "import sys, pathlib; pathlib.Path(sys.prefix, sys.argv[-1]).write_text('ok')"
FAIL_UNLESS = (
    "import sys, pathlib\n"
    "if not pathlib.Path(sys.argv[1]).exists():\n"
    "    print('the toy step failed on purpose'); sys.exit(3)\n"
)


def toy_spec(gate: Path) -> environments.EnvSpec:
    """A managed environment built without downloads: a venv without pip, and steps that
    leave marks in it; the second fails until ``gate`` exists."""

    def python(prefix: Path) -> str:
        return str(prefix / "bin" / "python")

    return environments.EnvSpec(
        name="toy",
        summary="a toy environment",
        pins=("numpy==1.23.5",),
        venv_args=("--without-pip",),
        steps=(
            environments.Step("mark one", lambda p, _s: [python(p), "-c", MARKS, "one"]),
            environments.Step(
                "mark two",
                lambda p, _s: [python(p), "-c", FAIL_UNLESS + MARKS, str(gate), "two"],
                hint="create the gate",
            ),
        ),
        check="import sys, pathlib; assert pathlib.Path(sys.prefix, 'one').exists()",
    )


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    root = tmp_path / "envs"
    gate = tmp_path / "gate"
    monkeypatch.setitem(environments.MANAGED, "toy", toy_spec(gate))
    monkeypatch.setitem(MANAGED_IMAGES, "toy", ("toy/engine:*",))
    monkeypatch.setenv(environments.ENVS_DIR_ENV, str(root))
    return root, gate


def test_creating_an_environment_resumes_at_the_step_that_failed(
    toy: tuple[Path, Path],
) -> None:
    root, gate = toy
    lines: list[str] = []
    with pytest.raises(environments.ManagedEnvironmentError) as failed:
        environments.create("toy", progress=lines.append)
    message = str(failed.value)
    assert "step 3/4 (mark two), exit 3" in message
    assert "the toy step failed on purpose" in message  # the step's last output
    assert "Create the gate" in message and "kubemill env create toy" in message
    assert environments.status("toy").state == "incomplete"
    with pytest.raises(environments.ManagedEnvironmentError, match="incomplete"):
        environments.python_of("toy")

    gate.touch()
    lines.clear()
    ready = environments.create("toy", progress=lines.append)
    assert ready.ready and ready.prefix == root / "toy"
    assert (root / "toy" / "two").read_text() == "ok"
    assert "[2/4] mark one: done before" in lines
    assert environments.python_of("toy") == root / "toy" / "bin" / "python"
    assert (root / "toy" / environments.CONSTRAINTS_FILE).read_text() == "numpy==1.23.5\n"

    # A ready environment is only checked again.
    lines.clear()
    environments.create("toy", progress=lines.append)
    assert [line for line in lines if line.endswith("done before")] == [
        "[2/4] mark one: done before",
        "[3/4] mark two: done before",
    ]
    # --fresh starts over: a new venv, every step run again.
    (root / "toy" / "stray").write_text("from before")
    lines.clear()
    environments.create("toy", fresh=True, progress=lines.append)
    assert lines[0] == f"removing {root / 'toy'}"
    assert not (root / "toy" / "stray").exists()
    assert not [line for line in lines if line.endswith("done before")]


def test_an_image_of_a_managed_environment_runs_there_once_it_exists(
    toy: tuple[Path, Path], tmp_path: Path
) -> None:
    root, gate = toy
    config = ImageConfig(images={})
    with pytest.raises(SubstrateError, match="`kubemill env create toy`"):
        config.resolve("toy/engine:1.0")
    assert config.resolve("other/image:1.0").is_default
    gate.touch()
    environments.create("toy")
    found = config.resolve("toy/engine:1.0")
    assert Path(found.bin_dir) == root / "toy" / "bin"
    assert "managed environment toy" in found.source
    # The config file's own mapping still comes first.
    mine = tmp_path / "mine"
    (mine / "bin").mkdir(parents=True)
    assert Path(ImageConfig(images={"toy/*": str(mine)}).resolve("toy/engine:1").bin_dir) == (
        mine / "bin"
    )


@pytest.mark.parametrize(
    "image",
    [
        DEFAULT_MARS_IMAGE,
        "kubemill-mars",
        "localhost/kubemill-mars:0.1.0",
        "registry.example:5000/team/kubemill-mars:0.1.0",
        "marsproject/mars:v0.10.0",
    ],
)
def test_the_mars_images_stand_for_the_mars_environment(image: str, tmp_path: Path) -> None:
    # Not built under tmp_path: the error says how to build it, so the image was mapped.
    with pytest.raises(SubstrateError, match=r"kubemill's mars environment.*env create mars"):
        managed_environment(image, tmp_path)


@pytest.mark.parametrize(
    "image", ["kubemill-operator:0.1.0", "example/kubemill-mars-fork:1", "python:3.11"]
)
def test_other_images_are_not_the_mars_environment(image: str, tmp_path: Path) -> None:
    assert managed_environment(image, tmp_path) is None


def test_the_env_commands(toy: tuple[Path, Path]) -> None:
    from typer.testing import CliRunner

    from kubemill.cli.app import app

    root, gate = toy
    runner = CliRunner()
    missing = runner.invoke(app, ["env", "python", "toy"])
    assert missing.exit_code == 1
    assert "kubemill env create toy" in missing.output
    unknown = runner.invoke(app, ["env", "create", "nope"])
    assert unknown.exit_code == 1 and "['mars', 'toy']" in unknown.output
    gate.touch()
    created = runner.invoke(app, ["env", "create", "toy"])
    assert created.exit_code == 0, created.output
    assert "toy is ready" in created.output
    python = runner.invoke(app, ["env", "python", "toy"])
    assert python.exit_code == 0 and python.stdout.strip() == str(root / "toy" / "bin" / "python")
    listed = runner.invoke(app, ["env", "list"])
    assert listed.exit_code == 0
    row = next(line for line in listed.stdout.splitlines() if line.startswith("toy"))
    assert "ready" in row


def test_an_environment_whose_kubemill_checkout_is_gone_is_stale(
    toy: tuple[Path, Path], tmp_path: Path
) -> None:
    # Its kubemill is installed editable: a moved or deleted checkout breaks `import
    # kubemill` there, which must show when it is used, not in a replica's log.
    root, gate = toy
    gate.touch()
    environments.create("toy")
    record_path = root / "toy" / environments.RECORD_FILE
    record = json.loads(record_path.read_text())
    gone = tmp_path / "moved-checkout"
    record_path.write_text(json.dumps({**record, "source": str(gone)}))
    assert environments.status("toy").state == "stale"
    with pytest.raises(environments.ManagedEnvironmentError) as stale:
        environments.python_of("toy")
    assert f"installed from {gone}, which is gone" in str(stale.value)
    assert "kubemill env create toy" in str(stale.value)
    with pytest.raises(SubstrateError, match=r"stale .*which is gone.*env create toy"):
        ImageConfig(images={}).resolve("toy/engine:1.0")
    # Created again from this checkout, it is ready.
    assert environments.create("toy").ready
    assert environments.status("toy").source == record["source"]


def test_every_managed_environment_has_its_images_and_no_other() -> None:
    # Resolving an image reads MANAGED_IMAGES alone (a submission loads no recipe): each
    # environment kubemill builds is named there, and nothing else is.
    assert sorted(MANAGED_IMAGES) == sorted(environments.MANAGED)
    assert all(spec.images for spec in environments.MANAGED.values())
