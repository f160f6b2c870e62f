"""Fixtures for operator tests (:mod:`support.operator_fixtures`; the helpers live in
:mod:`support.operator_support`), and the order they run in."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.operator_fixtures import cluster, kubelet, namespace, operator

__all__ = ["cluster", "kubelet", "namespace", "operator"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the RBAC usage check last: it reads the calls of every other operator test. With
    pytest-xdist's workers (``--dist loadgroup``, as scripts/test.sh runs them) it, the tests
    here and every test elsewhere that runs the operator run in one worker, so the record it
    reads is whole."""
    here = Path(__file__).parent
    rbac = here / "test_rbac.py"
    items.sort(key=lambda item: item.path == rbac)
    for item in items:
        if here in item.path.parents or _runs_the_operator(item):
            item.add_marker(pytest.mark.xdist_group("operator_calls"))


def _runs_the_operator(item: pytest.Item) -> bool:
    """Whether ``item`` runs the real operator through :mod:`support.operator_support`,
    which records its requests for test_rbac: its module calls ``running_operator``, or it
    takes the ``operator`` fixture of :mod:`support.operator_fixtures`."""
    if hasattr(getattr(item, "module", None), "running_operator"):
        return True
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get("operator", ()) if info is not None else ()
    return any(d.func.__module__ == "support.operator_fixtures" for d in defs)
