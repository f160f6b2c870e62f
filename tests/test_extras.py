"""The package works with any set of extras: the wheel, alone or with one extra, in a fresh venv.

Each case builds a venv from the wheel this checkout makes (``support.venvs``) with the
bare package or exactly one extra, and runs every CLI command's smoke there: ``--help``,
``version``, ``kinds``, and ``validate`` and ``render`` of every example. Each must
succeed, or end with a message naming the extra to install, never a traceback. The wheel
must carry what the commands read at run time (the dashboard's assets, the agents).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from kubemill.cli.errors import EXTRA_OF_MODULE, missing_extra
from support.venvs import build_wheel, clean_env, closure, make_venv

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml"))
SSH_MPIJOB = ROOT / "tests" / "manifests" / "mpi" / "good" / "mpijob-v2beta1.yaml"
"""An upstream v2beta1 MPIJob (ssh mode): its render makes a key pair."""

_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS = sorted(set(_PROJECT["optional-dependencies"]) - {"dev"})
"""Every user-facing extra (``dev`` is the project's own tooling)."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module", params=["", *EXTRAS], ids=lambda e: e or "bare")
def venv_bin(
    request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    extras = (request.param,) if request.param else ()
    yield make_venv(tmp_path_factory.mktemp(f"venv-{request.param or 'bare'}"), wheel, extras)


def smoke(bin_dir: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "kubemill"), *map(str, args)],
        env=clean_env(bin_dir),
        cwd=bin_dir.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_works_or_names_the_extra(result: subprocess.CompletedProcess[str]) -> None:
    said = result.stdout + result.stderr
    assert "Traceback" not in said, said
    if result.returncode != 0:
        assert "pip install 'kubemill[" in said, said


def test_the_commands_run_from_the_installed_wheel(venv_bin: Path) -> None:
    where = subprocess.run(
        [str(venv_bin / "python"), "-c", "import kubemill; print(kubemill.__file__)"],
        env=clean_env(venv_bin),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv_bin.parent) in where, f"kubemill came from {where}, not the wheel"
    for args in (("--help",), ("version",), ("kinds",)):
        result = smoke(venv_bin, *args)
        assert result.returncode == 0, (args, result.stdout + result.stderr)
        assert "Traceback" not in result.stdout + result.stderr


def test_every_example_validates(venv_bin: Path) -> None:
    result = smoke(venv_bin, "validate", *EXAMPLES, SSH_MPIJOB)
    assert_works_or_names_the_extra(result)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_example_renders(venv_bin: Path) -> None:
    for example in (*EXAMPLES, SSH_MPIJOB):
        result = smoke(venv_bin, "render", example)
        assert_works_or_names_the_extra(result)
        assert result.returncode == 0, (example.name, result.stdout + result.stderr)
        assert "kind:" in result.stdout, (example.name, result.stdout)


NEEDS_A_CLUSTER_CLIENT = (("operator", "--help"),)
"""The operator needs kopf (the kubernetes extra)."""
TALKS_TO_A_CLUSTER = (
    ("--substrate", "kubernetes", "get"),
    ("--substrate", "kubernetes", "delete", "no-such-job"),
    ("--substrate", "kubernetes", "cluster", "list"),
    ("install", "--dry-run"),
    ("uninstall",),
)
"""The SDK's and the CLI's cluster commands need no extra (kubemill's own HTTP client): with
no kubeconfig here, they say so."""


def test_a_cluster_command_without_the_kubernetes_extra_says_to_install_it(
    venv_bin: Path, request: pytest.FixtureRequest
) -> None:
    has_client = "kubernetes" in request.node.callspec.id
    for args in NEEDS_A_CLUSTER_CLIENT:
        result = smoke(venv_bin, *args)
        said = result.stdout + result.stderr
        assert "Traceback" not in said, (args, said)
        asks = "pip install 'kubemill[kubernetes]'" in said
        assert asks != has_client, (args, said)
        if not has_client:
            assert result.returncode != 0, (args, said)
    for args in TALKS_TO_A_CLUSTER:
        result = smoke(venv_bin, *args)
        said = result.stdout + result.stderr
        assert "Traceback" not in said and "pip install" not in said, (args, said)
        assert result.returncode == 0 or "kubeconfig" in said, (args, said)


def test_the_wheel_carries_the_dashboard_assets_and_the_agents(venv_bin: Path) -> None:
    listing = subprocess.run(
        [
            str(venv_bin / "python"),
            "-c",
            "from importlib.resources import files; import sys;"
            "root = files('kubemill');"
            "print(*(str(p) for p in sys.argv[1:] if not root.joinpath(p).is_file()))",
            "dashboard/static/dashboard.js",
            "dashboard/static/dashboard.css",
            "dashboard/static/favicon.svg",
            "engines/mpi/agent.py",
            "py.typed",
        ],
        env=clean_env(venv_bin),
        capture_output=True,
        text=True,
        check=True,
    )
    assert listing.stdout.strip() == "", f"missing from the wheel: {listing.stdout}"


def imported_modules() -> set[str]:
    """The top-level names every module in src/kubemill imports (function-local included)."""
    names: set[str] = set()
    for path in (ROOT / "src" / "kubemill").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".", 1)[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".", 1)[0])
    return names - set(sys.stdlib_module_names) - {"kubemill", "__future__"}


ENGINE_ENVIRONMENTS = {"mars"}
"""Imported only by programs that run in an environment kubemill builds for the engine
(``kubemill env create mars``), never by a command."""


def test_every_optional_import_is_an_extra_the_cli_names() -> None:
    core = closure(_PROJECT["dependencies"])
    distributions = packages_distributions()
    for module in sorted(imported_modules() - ENGINE_ENVIRONMENTS):
        owners = {canonicalize_name(d) for d in distributions.get(module, [])}
        assert owners, f"{module}: imported by kubemill, installed by nothing here"
        if owners & core:
            assert module not in EXTRA_OF_MODULE, f"{module} is a core dependency's"
            continue
        extra = EXTRA_OF_MODULE.get(module)
        assert extra is not None, f"{module}: not a core dependency, and no extra named for it"
        assert owners & closure(_PROJECT["optional-dependencies"][extra]), (
            f"{module}: EXTRA_OF_MODULE says the {extra} extra, which does not bring it"
        )


def test_a_missing_module_of_an_extra_says_what_to_install() -> None:
    try:
        raise RuntimeError("while connecting") from ModuleNotFoundError(
            "No module named 'kubernetes'", name="kubernetes"
        )
    except RuntimeError as exc:
        assert missing_extra(exc) == (
            "this needs the `kubernetes` module, which kubemill's `kubernetes` extra brings: "
            "pip install 'kubemill[kubernetes]'"
        )
    assert missing_extra(ModuleNotFoundError("x", name="somethingelse")) is None
