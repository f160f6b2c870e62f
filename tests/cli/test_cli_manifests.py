"""In-process CLI tests of the commands that need no running job: validate, render,
install, version, help, and that ``kubemill --help`` imports nothing heavy."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import pytorch_job, write_manifest
from typer.testing import CliRunner

from kubemill.cli.app import app
from kubemill.substrates.kubernetes.install.names import DEFAULT_IMAGE, DEFAULT_NAMESPACE, NAME
from kubemill.substrates.kubernetes.progress import PROGRESS_PORT, SIDECAR

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "tests" / "manifests"
EXPECT = re.compile(r"^#\s*expect:\s*(?P<path>\S+)")


def expected_paths(file: Path) -> list[str]:
    """The ``# expect: <field path>`` headers of a broken manifest, one per problem."""
    found = []
    for line in file.read_text().splitlines():
        match = EXPECT.match(line)
        if match:
            found.append(match.group("path"))
    return found


def broken_manifests() -> list[Path]:
    directory = MANIFESTS / "broken"
    return sorted(directory.glob("*.y*ml")) if directory.is_dir() else []


def test_version_names_the_installed_package(runner: CliRunner) -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"kubemill \d+\.\d+\.\d+\S* \(Python 3\.\d+\.\d+\S*\)\n", result.stdout)


def test_help_lists_every_command(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "get", "describe", "logs", "delete", "validate", "render", "install"):
        assert re.search(rf"^\s+{command}\s", result.stdout, re.MULTILINE), command


def test_validate_good_and_broken_files_in_one_call(runner: CliRunner, tmp_path: Path) -> None:
    good = write_manifest(tmp_path, pytorch_job("fine", master="print(1)", worker="print(2)"))
    broken_doc = pytorch_job("broken", master="print(1)", worker="print(2)")
    spec = broken_doc["spec"]
    assert isinstance(spec, dict)
    spec["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    spec["pytorchReplicaSpecs"]["Worker"]["restartPolcy"] = "Never"
    spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    broken = write_manifest(tmp_path, broken_doc)

    result = runner.invoke(app, ["validate", str(good), str(broken)])

    assert result.exit_code == 1
    out = result.stdout.splitlines()
    assert out[0] == f"{good}: OK (PyTorchJob fine)"
    problems = out[1:]
    assert len(problems) == 3, problems
    assert all(line.startswith(f"{broken}: ") for line in problems)
    joined = "\n".join(problems)
    assert "spec.pytorchReplicaSpecs.Master.replicas: must be 1" in joined
    assert "spec.pytorchReplicaSpecs.Worker.restartPolcy: unknown field" in joined
    assert "did you mean 'restartPolicy'?" in joined
    assert "spec.pytorchReplicaSpecs.Worker.template.spec.containers" in joined
    assert "3 problems in 1 of 2 files" in result.stderr


def test_validate_all_good_exits_zero(runner: CliRunner, tmp_path: Path) -> None:
    write_manifest(tmp_path, pytorch_job("one", master="print(1)"))
    write_manifest(tmp_path, pytorch_job("two", master="print(1)", worker="print(2)", workers=3))
    result = runner.invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{tmp_path / 'one.yaml'}: OK (PyTorchJob one)",
        f"{tmp_path / 'two.yaml'}: OK (PyTorchJob two)",
    ]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(lambda d: d / "missing.yaml", "missing.yaml: ", id="missing-file"),
        pytest.param(lambda d: d, "no manifests found", id="empty-directory"),
    ],
)
def test_validate_nothing_to_check_is_an_error(
    runner: CliRunner, tmp_path: Path, setup: object, message: str
) -> None:
    assert callable(setup)
    result = runner.invoke(app, ["validate", str(setup(tmp_path))])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_validate_shipped_good_manifests(runner: CliRunner) -> None:
    directory = MANIFESTS / "good"
    if not directory.is_dir():
        pytest.skip("tests/manifests/good is not there yet")
    result = runner.invoke(app, ["validate", str(directory)])
    assert result.exit_code == 0, result.output
    files = sorted(directory.rglob("*.y*ml"))
    assert len(result.stdout.splitlines()) == len(files)
    assert all(": OK (" in line for line in result.stdout.splitlines())


@pytest.mark.parametrize("file", broken_manifests(), ids=lambda p: p.name)
def test_validate_each_broken_manifest_reports_each_expected_path(
    runner: CliRunner, file: Path
) -> None:
    expected = expected_paths(file)
    assert expected, f"{file} has no '# expect: <path>' header"
    result = runner.invoke(app, ["validate", str(file)])
    assert result.exit_code == 1, result.output
    problems = result.stdout.splitlines()
    assert len(problems) == len(expected), problems
    reported = [_field_path(line, file) for line in problems]
    assert sorted(reported) == sorted(expected)


def test_validate_whole_broken_directory_reports_every_problem(runner: CliRunner) -> None:
    files = broken_manifests()
    if not files:
        pytest.skip("tests/manifests/broken is not there yet")
    result = runner.invoke(app, ["validate", str(MANIFESTS / "broken")])
    assert result.exit_code == 1
    assert len(result.stdout.splitlines()) == sum(len(expected_paths(f)) for f in files)


def _field_path(line: str, file: Path) -> str:
    """The field path of one printed problem: ``FILE[#N]: PATH: message``."""
    assert line.startswith(str(file)), line
    rest = line[len(str(file)) :]
    rest = re.sub(r"^#\d+", "", rest)
    assert rest.startswith(": "), line
    return rest[2:].split(": ", 1)[0]


def test_render_prints_every_object_as_yaml(runner: CliRunner, tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path, pytorch_job("rendered", master="print(1)", worker="print(2)", workers=2)
    )
    result = runner.invoke(app, ["render", str(manifest), "--namespace", "team-a"])
    assert result.exit_code == 0, result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    kinds = sorted(o["kind"] for o in objects)
    assert kinds.count("Pod") == 3
    assert kinds.count("Service") == 3
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Pod"}
    assert names == {"rendered-master-0", "rendered-worker-0", "rendered-worker-1"}
    assert {o["metadata"]["namespace"] for o in objects} == {"team-a"}


def test_render_shows_the_progress_sidecar_a_default_install_gives(
    runner: CliRunner, tmp_path: Path
) -> None:
    manifest = write_manifest(tmp_path, pytorch_job("reported", master="print(1)"))

    def sidecars(*flags: str) -> list[dict[str, Any]]:
        result = runner.invoke(app, ["render", str(manifest), *flags])
        assert result.exit_code == 0, result.output
        pods = [o for o in yaml.safe_load_all(result.stdout) if o and o["kind"] == "Pod"]
        assert len(pods) == 1
        return [c for c in pods[0]["spec"].get("initContainers", []) if c["name"] == SIDECAR]

    [sidecar] = sidecars()
    assert sidecar["image"] == DEFAULT_IMAGE
    assert sidecar["restartPolicy"] == "Always"
    assert f"http://{NAME}.{DEFAULT_NAMESPACE}.svc:{PROGRESS_PORT}/progress" in sidecar["args"]
    assert sidecars("--no-progress") == []


def test_render_with_gang_scheduler_adds_a_podgroup(runner: CliRunner, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, pytorch_job("gang", master="print(1)", worker="print(2)"))
    result = runner.invoke(app, ["render", str(manifest), "--gang-scheduler", "volcano"])
    assert result.exit_code == 0, result.output
    kinds = [o["kind"] for o in yaml.safe_load_all(result.stdout) if o]
    assert "PodGroup" in kinds


def test_render_of_a_broken_manifest_is_one_red_line(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubemill.dev/v1\nkind: PyTorchJobb\nmetadata: {name: x}\n")
    result = runner.invoke(app, ["render", str(bad)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "invalid manifest" in result.stderr
    assert "did you mean 'PyTorchJob'?" in result.stderr
    assert f"kubemill validate {bad}" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.output


def test_run_of_a_missing_file_says_so(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(tmp_path / "gone.yaml")])
    assert result.exit_code == 1
    assert (
        result.stderr == f"error: cannot read {tmp_path / 'gone.yaml'}: No such file or directory\n"
    )


def test_install_print_has_crds_rbac_and_deployment(runner: CliRunner) -> None:
    result = runner.invoke(app, ["install", "--print"])
    assert result.exit_code == 0, result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    kinds = {o["kind"] for o in objects}
    assert {"CustomResourceDefinition", "Deployment"} <= kinds
    assert kinds & {"ClusterRole", "Role"}
    assert kinds & {"ClusterRoleBinding", "RoleBinding"}
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert {"tfjobs.kubemill.dev", "pytorchjobs.kubemill.dev"} <= crds


def test_install_runtimes_adds_the_runtime_crds_and_the_default_runtimes(
    runner: CliRunner,
) -> None:
    def installed(*flags: str) -> list[dict[str, Any]]:
        result = runner.invoke(app, ["install", "--print", *flags])
        assert result.exit_code == 0, result.output
        return [o for o in yaml.safe_load_all(result.stdout) if o]

    runtime_crds = {
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    }
    plain, with_runtimes = installed(), installed("--runtimes")
    assert not {o["metadata"]["name"] for o in plain} & runtime_crds
    assert runtime_crds <= {o["metadata"]["name"] for o in with_runtimes}
    runtimes = [
        o["metadata"]["name"] for o in with_runtimes if o["kind"] == "ClusterTrainingRuntime"
    ]
    assert runtimes == [
        "torch-distributed",
        "mpi-distributed",
        "jax-distributed",
        "xgboost-distributed",
    ]
    # The runtimes come after the Deployment, once their CRDs can be Established.
    kinds = [o["kind"] for o in with_runtimes]
    assert kinds.index("Deployment") < kinds.index("ClusterTrainingRuntime")


def test_install_without_print_needs_a_cluster(runner: CliRunner, tmp_path: Path) -> None:
    # Without --print install applies to a cluster (tests/cli/test_cli_install.py); with no
    # kubeconfig it says so in one line.
    result = runner.invoke(app, ["--kubeconfig", str(tmp_path / "missing"), "install"])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1
    assert "no kubeconfig at" in result.stderr


def test_help_imports_nothing_heavy() -> None:
    """``kubemill --help`` must stay fast: no rich, pydantic, yaml, SDK or engines."""
    probe = (
        "import sys\n"
        "from kubemill.cli.app import run_app\n"
        "try:\n"
        "    run_app(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import json\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    heavy = {
        "rich",
        "pydantic",
        "yaml",
        "sqlite3",
        "kubernetes",
        "kopf",
        "torch",
        "tensorflow",
        "kubemill.sdk",
        "kubemill.api",
        "kubemill.substrates",
    }
    assert not heavy & loaded
    assert "Usage: kubemill" in done.stdout


def test_kubernetes_substrate_error_is_one_red_line(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "no-kubeconfig"
    for argv, env in (
        (["--substrate", "kubernetes", "--kubeconfig", str(missing), "get"], {}),
        (["--kubeconfig", str(missing), "get"], {"KUBEMILL_SUBSTRATE": "kubernetes"}),
    ):
        result = runner.invoke(app, argv, env=env)
        assert result.exit_code == 1, result.output
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1
        assert result.stderr.startswith("error: ")
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_unknown_substrate_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--substrate", "cloud", "get"])
    assert result.exit_code == 2
    assert "'cloud' is not one of 'local', 'kubernetes'" in result.output


def test_get_with_no_jobs(runner: CliRunner, state_dir: Path) -> None:
    result = runner.invoke(app, ["get"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "No jobs found.\n"


def test_run_without_command_says_why_it_cannot_run_locally(
    runner: CliRunner, state_dir: Path, tmp_path: Path
) -> None:
    manifest = pytorch_job("nocmd", master="unused")
    spec = manifest["spec"]
    assert isinstance(spec, dict)
    del spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    result = runner.invoke(app, ["run", str(write_manifest(tmp_path, manifest))])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1
    assert "cannot run this job here" in result.stderr
    assert "containers[0].command" in result.stderr
    assert runner.invoke(app, ["get", "nocmd"]).exit_code == 1


@pytest.fixture
def operator_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kubemill operator`` marks the kubernetes package absent from its process
    (``operator.process.without_kubernetes_client``); run in the tests' process, the mark is
    undone after the test, so that the tests after it can import the package."""
    monkeypatch.setitem(sys.modules, "kubernetes", sys.modules.get("kubernetes"))


@pytest.mark.usefixtures("operator_in_process")
def test_operator_help_is_the_operators_own(runner: CliRunner) -> None:
    result = runner.invoke(app, ["operator", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--namespace", "--all-namespaces", "--metrics-port", "--health-port"):
        assert option in result.stdout


@pytest.mark.usefixtures("operator_in_process")
def test_operator_accepts_the_arguments_install_gives_it(runner: CliRunner) -> None:
    """The Deployment of `install --print` runs `kubemill operator ARGS`: every ARG must parse.

    ``--help`` last makes the operator parse everything and then stop instead of running.
    """
    objects = [
        o for o in yaml.safe_load_all(runner.invoke(app, ["install", "--print"]).stdout) if o
    ]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["kubemill"]
    assert container["args"][0] == "operator"
    result = runner.invoke(app, [*container["args"], "--help"])
    assert result.exit_code == 0, result.output
