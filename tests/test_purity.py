"""api, frameworks, the core and the engines' pure layers are pure: no clock reads, no terminal,
no files, no eval.

import-linter (``[tool.importlinter]`` in pyproject.toml) keeps I/O, clock and randomness
*modules* out of these packages, but it cannot see builtins (``open``, ``print``) or a
clock read through an allowed module (``datetime.now``). This test parses every module
of the pure packages and fails on such calls, resolving import aliases
(``from datetime import datetime as dt; dt.now()``). It is a lint, not a sandbox: code
that hides a call behind ``getattr`` is for review to catch.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "kubemill"
PURE_PACKAGES = ("api", "frameworks", "core")
PURE_ENGINE_LAYERS = ("api", "framework", "local", "entry", "schedule")
"""The pure layers of each engine folder (``engines/<engine>/<layer>.py`` or a package of
that name); its in-pod programs are not."""

FORBIDDEN_BUILTINS = frozenset(
    {"open", "print", "input", "exec", "eval", "compile", "__import__", "breakpoint"}
)
"""Builtins that read or write outside the function's inputs, or run code from strings."""

FORBIDDEN_CALLS = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
    }
)
"""Fully qualified calls that read the clock through an otherwise allowed module."""

FORBIDDEN_MODULES = ("time", "builtins")
"""Modules none of whose functions may be called (``time.time``, ``builtins.open``)."""


@dataclass(frozen=True)
class Violation:
    """One forbidden call: where, and what it resolves to."""

    file: str
    line: int
    call: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.call}()"


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the fully qualified name it was imported as, anywhere in the module."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _forbidden(qualified: str, *, bare_builtin: bool) -> bool:
    if bare_builtin:
        return qualified in FORBIDDEN_BUILTINS
    if qualified in FORBIDDEN_CALLS:
        return True
    module, _, name = qualified.partition(".")
    if module == "builtins":
        return name in FORBIDDEN_BUILTINS
    return bool(name) and module in FORBIDDEN_MODULES


def find_violations(source: str, file: str = "<snippet>") -> list[Violation]:
    """Every forbidden call in ``source``."""
    tree = ast.parse(source, filename=file)
    aliases = _aliases(tree)
    found: list[Violation] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts = _dotted(node.func)
        if parts is None:
            continue
        head = parts[0]
        if head in aliases:
            qualified = ".".join([aliases[head], *parts[1:]])
            bare = False
        else:
            qualified = ".".join(parts)
            bare = len(parts) == 1
        if _forbidden(qualified, bare_builtin=bare):
            found.append(Violation(file, node.lineno, qualified))
    return found


def pure_modules() -> list[Path]:
    found = {p for pkg in PURE_PACKAGES for p in (SRC / pkg).rglob("*.py")}
    found.add(SRC / "engines" / "base.py")
    for engine in (SRC / "engines").iterdir():
        for layer in PURE_ENGINE_LAYERS:
            found.update(engine.glob(f"{layer}.py"))
            found.update(engine.glob(f"{layer}/*.py"))
    return sorted(found)


def test_the_pure_packages_are_found() -> None:
    names = {p.relative_to(SRC).as_posix() for p in pure_modules()}
    assert {"api/loader.py", "engines/tensorflow/framework.py", "core/reconcile.py"} <= names


@pytest.mark.parametrize("module", pure_modules(), ids=lambda p: p.relative_to(SRC).as_posix())
def test_pure_module_makes_no_forbidden_call(module: Path) -> None:
    source = module.read_text(encoding="utf-8")
    violations = find_violations(source, module.relative_to(SRC).as_posix())
    assert not violations, "\n".join(map(str, violations))


# --- the checker itself --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snippet", "call"),
    [
        pytest.param("open('f')", "open", id="open"),
        pytest.param("print('x')", "print", id="print"),
        pytest.param("input()", "input", id="input"),
        pytest.param("eval('1')", "eval", id="eval"),
        pytest.param("exec('x = 1')", "exec", id="exec"),
        pytest.param("__import__('os')", "__import__", id="dunder-import"),
        pytest.param("import builtins\nbuiltins.open('f')", "builtins.open", id="builtins-open"),
        pytest.param("import datetime\ndatetime.datetime.now()", "datetime.datetime.now", id="dt"),
        pytest.param(
            "from datetime import datetime\ndatetime.utcnow()",
            "datetime.datetime.utcnow",
            id="from",
        ),
        pytest.param(
            "from datetime import datetime as D\nD.today()", "datetime.datetime.today", id="alias"
        ),
        pytest.param("from datetime import date\ndate.today()", "datetime.date.today", id="date"),
        pytest.param("import datetime as d\nd.date.today()", "datetime.date.today", id="mod-alias"),
        pytest.param("import time\ntime.time()", "time.time", id="time"),
        pytest.param("import time as t\nt.monotonic()", "time.monotonic", id="time-alias"),
        pytest.param("from time import sleep\nsleep(1)", "time.sleep", id="time-from"),
        pytest.param(
            "def f():\n    from time import perf_counter\n    return perf_counter()",
            "time.perf_counter",
            id="import-in-function",
        ),
    ],
)
def test_checker_catches(snippet: str, call: str) -> None:
    violations = find_violations(textwrap.dedent(snippet))
    assert [v.call for v in violations] == [call]


@pytest.mark.parametrize(
    "snippet",
    [
        pytest.param("from datetime import datetime\ndatetime(2024, 1, 1)", id="datetime-ctor"),
        pytest.param("from datetime import timedelta\ntimedelta(seconds=1)", id="timedelta"),
        pytest.param("import json\njson.dumps({})", id="json"),
        pytest.param("job.status.conditions.append(c)", id="method"),
        pytest.param("def f(now):\n    return now + 1\nf(2)", id="now-as-input"),
        pytest.param("x.open()", id="open-method"),
    ],
)
def test_checker_allows(snippet: str) -> None:
    assert find_violations(snippet) == []
