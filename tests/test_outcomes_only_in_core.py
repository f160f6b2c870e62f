"""Every outcome comes out of the core: no module outside ``kubemill.core`` writes one.

A job's conditions and completion time are the core's verdict (docs/architecture.md:
a substrate reports what it saw and never writes a phase or a condition). This scans the source with
``ast`` and fails on any module outside ``src/kubemill/core`` that calls
``set_condition``, constructs a ``Condition``, assigns to ``.conditions`` or
``.completion_time``, or mutates ``.conditions`` in place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "kubemill"
CORE = SRC / "core"

_WRITTEN_ATTRIBUTES = frozenset({"conditions", "completion_time"})
_MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "sort"})


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        out: list[ast.expr] = []
        for target in node.targets:
            out.extend(target.elts if isinstance(target, ast.Tuple | ast.List) else [target])
        return out
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def outcome_writes(source: str, filename: str = "<snippet>") -> list[str]:
    """Every place in ``source`` that writes an outcome, as ``file:line: what``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            called = _name(node.func)
            if called == "set_condition":
                found.append(f"{where}: calls set_condition")
            elif called == "Condition":
                found.append(f"{where}: constructs a Condition")
            elif (
                called in _MUTATORS
                and isinstance(node.func, ast.Attribute)
                and _name(node.func.value) == "conditions"
            ):
                found.append(f"{where}: mutates .conditions ({called})")
        for target in _targets(node):
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr in _WRITTEN_ATTRIBUTES:
                found.append(f"{where}: writes .{target.attr}")
    return found


def _modules_outside_core() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if CORE not in p.parents)


def test_the_scan_covers_the_substrates_sdk_and_cli() -> None:
    scanned = {p.relative_to(SRC).parts[0] for p in _modules_outside_core()}
    assert {"substrates", "sdk", "cli", "api", "frameworks"} <= scanned
    assert not any(CORE in p.parents for p in _modules_outside_core())


def test_no_module_outside_the_core_writes_an_outcome() -> None:
    violations: list[str] = []
    for path in _modules_outside_core():
        violations += outcome_writes(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    assert violations == [], "outcomes are the core's to write:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        pytest.param(
            "from kubemill.core import set_condition\n"
            "set_condition(status, 'Failed', 'True', reason='X', message='', now=now)\n",
            "calls set_condition",
            id="set_condition",
        ),
        pytest.param(
            "import kubemill.core as core\ncore.set_condition(status, kind, 'True')\n",
            "calls set_condition",
            id="set_condition-attribute",
        ),
        pytest.param(
            "status.conditions = [Condition(type='Failed', status='True')]\n",
            "constructs a Condition",
            id="Condition",
        ),
        pytest.param("status.conditions = []\n", "writes .conditions", id="assign-conditions"),
        pytest.param(
            "view.status.completion_time = now\n", "writes .completion_time", id="completion"
        ),
        pytest.param(
            "status.completion_time: datetime = now\n", "writes .completion_time", id="annotated"
        ),
        pytest.param(
            "a, status.completion_time = 1, now\n", "writes .completion_time", id="tuple-target"
        ),
        pytest.param("status.conditions[0] = c\n", "writes .conditions", id="item"),
        pytest.param("status.conditions.append(c)\n", "mutates .conditions", id="append"),
    ],
)
def test_the_scan_catches_a_violation(snippet: str, what: str) -> None:
    found = outcome_writes(snippet)
    assert len(found) >= 1
    assert any(what in item for item in found), found


@pytest.mark.parametrize(
    "snippet",
    [
        pytest.param("failed = status.condition(ConditionType.FAILED)\n", id="read"),
        pytest.param("for c in status.conditions:\n    print(c.reason)\n", id="iterate"),
        pytest.param("took = status.completion_time - status.start_time\n", id="read-time"),
        pytest.param("rs.active = 0\n", id="replica-count"),
    ],
)
def test_the_scan_lets_reads_through(snippet: str) -> None:
    assert outcome_writes(snippet) == []
