"""Packages whose public names load on first use still offer every one of them.

``kubemill.api``, ``kubemill.core``, ``kubemill.frameworks``,
``kubemill.substrates.kubernetes.client``, its ``operator`` and
``kubemill.substrates.local.supervisor`` import their names only for type checkers (so that
importing one of their submodules stays light) and load them at run time on first use.
Every name a type checker sees is in ``__all__`` and resolves at run time, to the object of
the submodule that defines it; anything else is an AttributeError; importing a submodule
loads none of the others'.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src"
LAZY = (
    "kubemill.api",
    "kubemill.core",
    "kubemill.frameworks",
    "kubemill.substrates.kubernetes.client",
    "kubemill.substrates.kubernetes.operator",
    "kubemill.substrates.local.supervisor",
)


def _checked_names(package: str) -> dict[str, str]:
    """Name -> module, of the imports under ``if TYPE_CHECKING:`` in the package's init."""
    path = SRC / package.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for child in node.body:
                if isinstance(child, ast.ImportFrom) and child.module:
                    names.update({alias.name: child.module for alias in child.names})
    return names


@pytest.mark.parametrize("package", LAZY)
def test_every_name_resolves_to_its_home(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    checked = _checked_names(package)
    assert checked
    assert sorted(checked) == sorted(module.__all__)
    for name, home in checked.items():
        source = __import__(home, fromlist=[name])
        assert getattr(module, name) is getattr(source, name), name


@pytest.mark.parametrize("package", LAZY)
def test_an_unknown_name_is_an_attribute_error(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = module.no_such_name


def test_from_import_in_a_fresh_process() -> None:
    code = (
        "from kubemill.api import Job, KindApi, parse_cron\n"
        "from kubemill.frameworks import Plan, PlanError\n"
        "from kubemill.substrates.kubernetes.client import KubernetesBackend, connect\n"
        "import kubemill.api as api\n"
        "assert api.KindApi is KindApi\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC)},
    )
    assert done.stdout == "ok\n", done.stderr


READ_RECORDS = ("EventRecord", "LogLine", "LogQuery", "ProgressPoint", "ResourceReport")


@pytest.mark.parametrize("module", ["kubemill.substrates.base", "kubemill.sdk"])
def test_read_records_resolve_to_their_module(module: str) -> None:
    # The records of a job's reads live in kubemill.substrates.reads; the modules that
    # offered them before still do, loading them on first use.
    from kubemill.substrates import reads

    offered = __import__(module, fromlist=["__name__"])
    for name in READ_RECORDS if module != "kubemill.sdk" else ("EventRecord", "LogLine"):
        assert getattr(offered, name) is getattr(reads, name), name
    if module == "kubemill.sdk":
        from kubemill.substrates.history import JobRecord

        assert offered.JobRecord is JobRecord
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = offered.no_such_name


def test_a_submission_loads_no_reader() -> None:
    # What `kubemill run --detach` imports (the SDK, the local backend) makes none of a
    # read's records (nor a deleted job's, a probe's or an environment recipe's) and loads
    # none of their modules: each costs start-up time of every job.
    code = (
        "import sys\n"
        "import kubemill.sdk\n"
        "from kubemill.substrates.local import LocalBackend\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubemill.substrates.') and ("
        "m.endswith(('.reads', '.log_reads', '.job_reads', '.progress', '.sampling',"
        " '.history', '.probes', '.environments')))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC)},
    )
    assert done.stdout == "[]\n", done.stdout + done.stderr
