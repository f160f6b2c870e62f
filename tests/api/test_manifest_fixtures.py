"""The broken manifests under tests/manifests/broken yield exactly the errors they declare.

Each broken file lists the field paths of its problems in ``# expect: PATH`` comment lines
(``<document>`` for a problem with the document as a whole), one line per error. The CLI
tests rely on the same headers for ``kubemill validate``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kubemill.api import ManifestError
from kubemill.sdk.manifests import load_path

BROKEN = Path(__file__).parents[1] / "manifests" / "broken"
BROKEN_FILES = sorted(BROKEN.glob("*.yaml"))


def expected_paths(file: Path) -> Counter[str]:
    return Counter(
        line.split(":", 1)[1].strip()
        for line in file.read_text(encoding="utf-8").splitlines()
        if line.startswith("# expect:")
    )


def test_there_are_broken_fixtures() -> None:
    assert len(BROKEN_FILES) >= 10


@pytest.mark.parametrize("file", [pytest.param(f, id=f.stem) for f in BROKEN_FILES])
def test_broken_manifest_yields_exactly_its_declared_errors(file: Path) -> None:
    expected = expected_paths(file)
    assert expected, f"{file.name} declares no '# expect:' lines"
    with pytest.raises(ManifestError) as caught:
        load_path(file)
    errors = caught.value.errors
    assert Counter(e.path or "<document>" for e in errors) == expected, "\n".join(map(str, errors))
    for error in errors:
        assert error.source.startswith(str(file))
        assert "\n" not in str(error), "one line per error"
        assert error.message
