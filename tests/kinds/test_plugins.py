"""KUBEMILL_ENGINES: engines from outside kubemill, registered in every process that starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubemill.engines.tensorflow.api import TFJOB
from kubemill.engines.tensorflow.framework import TensorFlow
from kubemill.kinds import Engine, engines, unregister
from kubemill.substrates.plugins import PluginError, load_plugins

HERE = Path(__file__).resolve().parent
IMPOSTOR = Engine(TFJOB, TensorFlow(), "another engine for a kind kubemill runs")


def test_named_engines_are_registered_once() -> None:
    env = {"KUBEMILL_ENGINES": "toy_engine:ENGINE"}
    try:
        [added] = load_plugins(env)
        assert added.kind == "ToyCluster" and added in engines()
        assert load_plugins(env) == []  # the same engine again: nothing to do
    finally:
        unregister("ToyCluster")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("toy_engine", "is not module:attribute"),
        ("no_such_module_here:ENGINE", "cannot import 'no_such_module_here'.*PYTHONPATH"),
        ("toy_engine:ToyCluster", "is not an Engine or a list of Engines"),
        ("test_plugins:IMPOSTOR", "registers TFJob, which kubemill already runs"),
    ],
)
def test_a_bad_entry_says_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(PluginError, match=message):
        load_plugins({"KUBEMILL_ENGINES": spec})


def test_the_cli_registers_them_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    env = {
        "PYTHONPATH": str(HERE),
        "PATH": "/usr/bin:/bin",
        "KUBEMILL_ENGINES": "toy_engine:ENGINE",
    }
    argv = [sys.executable, "-c", "from kubemill.cli import main; main()", "kinds"]
    shown = subprocess.run(argv, env={**env, "COLUMNS": "200"}, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "ToyCluster" in shown.stdout and "toyclusters.kubemill.dev" in shown.stdout
    env["KUBEMILL_ENGINES"] = "nope_module:X"
    bad = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "KUBEMILL_ENGINES: cannot import 'nope_module'" in bad.stderr
    assert "Traceback" not in bad.stderr
