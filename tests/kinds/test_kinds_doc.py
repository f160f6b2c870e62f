"""docs/kinds.md is the registry's table, and `kubemill kinds` prints the registry."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from kubemill.cli.app import app
from kubemill.kinds import entries, markdown_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "kinds.md"


def test_the_docs_table_is_generated_from_the_registry() -> None:
    found = re.search(r"<!-- kinds:begin[^>]*-->\n(.*?)<!-- kinds:end -->", DOC.read_text(), re.S)
    assert found is not None, "docs/kinds.md lost its generated-table markers"
    assert found.group(1) == markdown_table(), (
        "docs/kinds.md is out of date: paste the output of "
        "`python -c 'from kubemill.kinds import markdown_table; print(markdown_table())'`"
    )


def test_kubemill_kinds_lists_every_registered_kind() -> None:
    result = CliRunner().invoke(app, ["kinds"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for engine in entries():
        line = next(line for line in result.output.splitlines() if line.startswith(engine.kind))
        assert engine.api.short_names[0] in line and engine.api.plural in line
