"""The shape of ``src/kubemill``: no module over :data:`MAX_LINES` lines, no import cycle.

A module that long holds several things (issue 17): split it along the seams it has. An
import cycle means two modules cannot be understood, tested or loaded one without the
other; it is broken by moving what both need down into a module of its own. Imports inside
functions count: a function-local import is still a dependency, only a later one.

The tables below list what is still to do, each row with its reason. They may only shrink:
a file or cycle not listed fails, and so does a row that no longer holds (remove it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "kubemill"
MAX_LINES = 600

# Modules allowed over the limit for now, each with why (path relative to src/kubemill ->
# reason); none since issue 17's splits. A row that no longer holds fails the test.
STILL_TOO_LONG: dict[str, str] = {}

# Import cycles still there, each as the sorted modules of one strongly connected
# component -> why it is not broken yet. None today.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def _line_count(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def _modules() -> Iterator[tuple[str, int]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), _line_count(path)


def test_no_module_is_too_long() -> None:
    too_long = {name: count for name, count in _modules() if count > MAX_LINES}
    unlisted = {name: count for name, count in too_long.items() if name not in STILL_TOO_LONG}
    assert unlisted == {}, f"over {MAX_LINES} lines: split these along their seams"
    stale = sorted(set(STILL_TOO_LONG) - set(too_long))
    assert stale == [], f"no longer over {MAX_LINES} lines (or gone): remove from the table"


def _cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph.modules)))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # Every import counts: inside functions and under TYPE_CHECKING too.
    return grimp.build_graph("kubemill", exclude_type_checking_imports=False, cache_dir=None)


def test_the_graph_counts_imports_inside_functions(graph: grimp.ImportGraph) -> None:
    # kubemill.cli.main imports the command tree in its body, on purpose (start-up time).
    assert "kubemill.cli.app" in graph.find_modules_directly_imported_by("kubemill.cli")
    assert graph.find_modules_directly_imported_by("kubemill.cli.app")


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    cycles = _cycles(graph)
    unlisted = [cycle for cycle in cycles if cycle not in KNOWN_CYCLES]
    assert unlisted == [], "import cycles: move what both sides need into a module below them"
    stale = sorted(set(KNOWN_CYCLES) - set(cycles))
    assert stale == [], "no longer a cycle: remove from the table"


def test_cycle_finder_finds_a_cycle() -> None:
    """The finder itself, on a graph with one cycle of three and a module outside it."""
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(module)
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a")]:
        graph.add_import(importer=importer, imported=imported)
    assert _cycles(graph) == [("p.a", "p.b", "p.c")]
