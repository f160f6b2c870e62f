"""The client side of the Kubernetes substrate has one HTTP layer and one pod parser.

Checked on the source: the client package sends requests only through
:mod:`kubemill.substrates.kubernetes.transport` (no ``call_api``, no HTTP library of its own),
and reads pod statuses only through :mod:`kubemill.substrates.kubernetes.observe` (no
``containerStatuses`` parsing of its own). And, run: a process of the SDK that talks to a
cluster imports neither the ``kubernetes`` package nor urllib3 (kubemill's own client).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kubemill.substrates.kubernetes.client as client_package
from kubemill.substrates.kubernetes import observe, transport

CLIENT_MODULES = sorted(Path(client_package.__file__).parent.glob("*.py"))
HTTP_LIBRARIES = ("urllib3", "urllib.request", "http.client", "requests", "aiohttp", "httpx")


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _called(tree: ast.AST) -> set[str]:
    """The methods a module calls (``x.call_api(...)`` -> ``call_api``)."""
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }


def _strings(tree: ast.AST) -> set[str]:
    """String constants: the fields a module reads from API objects (``.get("phase")``)."""
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_the_client_modules_are_found() -> None:
    assert {p.stem for p in CLIENT_MODULES} >= {"backend", "connection", "logs", "views"}


@pytest.mark.parametrize("path", CLIENT_MODULES, ids=lambda p: p.stem)
def test_the_client_sends_requests_only_through_the_transport(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = _imports(tree)
    assert not {m for m in imported if m.startswith(HTTP_LIBRARIES)}
    assert not {m for m in imported if m == "kubernetes" or m.startswith("kubernetes.")}
    assert not {"call_api", "param_serialize", "request", "urlopen"} & _called(tree)


@pytest.mark.parametrize("path", CLIENT_MODULES, ids=lambda p: p.stem)
def test_the_client_reads_pod_statuses_only_through_the_shared_observation(path: Path) -> None:
    fields = {"containerStatuses", "initContainerStatuses", "restartCount", "exitCode", "phase"}
    assert not fields & _strings(ast.parse(path.read_text()))


def test_the_shared_modules_are_where_those_things_happen() -> None:
    """The checks above look for the right words: the shared modules do use them."""
    transport_tree = ast.parse(Path(transport.__file__).read_text())
    assert {"call_api", "param_serialize"} <= _called(transport_tree)
    observe_tree = ast.parse(Path(observe.__file__).read_text())
    assert {"containerStatuses", "restartCount", "exitCode", "phase"} <= _strings(observe_tree)


SDK_PROCESS = """\
import json, sys
from kubemill.substrates.kubernetes.client import KubernetesBackend
backend = KubernetesBackend(kubeconfig=sys.argv[1])
listed = backend.list("default")
backend.close()
print(json.dumps([len(listed), sorted(m for m, v in sys.modules.items() if v is not None)]))
"""


def test_an_sdk_process_imports_neither_the_kubernetes_package_nor_urllib3(
    kubeconfig: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SDK_PROCESS, str(kubeconfig)],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed, modules = json.loads(done.stdout)
    assert listed == 0
    assert "kubemill.http_client" in modules
    assert [m for m in modules if m.partition(".")[0] in ("kubernetes", "urllib3")] == []
