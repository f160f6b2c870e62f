"""The MPIJob manifests under tests/manifests/mpi: the good ones load, each broken one
yields exactly the errors it declares in its ``# expect: PATH`` lines, at the paths of the
apiVersion it is written in.

They live apart from tests/manifests/good and broken because MPIJob is not registered
in :mod:`kubemill.kinds` yet: those folders are loaded with the registered kinds.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kubemill.api import KindTable, ManifestError
from kubemill.api.loader import load
from kubemill.engines.mpi.api import MPIJOB, MPIJob
from kubemill.engines.pytorch.api import PYTORCHJOB
from kubemill.engines.tensorflow.api import TFJOB

MPI = Path(__file__).parents[2] / "manifests" / "mpi"
GOOD_FILES = sorted((MPI / "good").glob("*.yaml"))
BROKEN_FILES = sorted((MPI / "broken").glob("*.yaml"))
KINDS = KindTable([TFJOB, PYTORCHJOB, MPIJOB])


def expected_paths(file: Path) -> Counter[str]:
    return Counter(
        line.split(":", 1)[1].strip()
        for line in file.read_text(encoding="utf-8").splitlines()
        if line.startswith("# expect:")
    )


def test_there_are_fixtures() -> None:
    assert len(GOOD_FILES) >= 3
    assert len(BROKEN_FILES) >= 5


@pytest.mark.parametrize("file", [pytest.param(f, id=f.stem) for f in GOOD_FILES])
def test_good_manifest_loads(file: Path) -> None:
    jobs = load(file.read_text(encoding="utf-8"), kinds=KINDS, name=str(file))
    assert [type(j) for j in jobs] == [MPIJob]


@pytest.mark.parametrize("file", [pytest.param(f, id=f.stem) for f in BROKEN_FILES])
def test_broken_manifest_yields_exactly_its_declared_errors(file: Path) -> None:
    expected = expected_paths(file)
    assert expected, f"{file.name} declares no '# expect:' lines"
    with pytest.raises(ManifestError) as caught:
        load(file.read_text(encoding="utf-8"), kinds=KINDS, name=str(file))
    errors = caught.value.errors
    assert Counter(e.path or "<document>" for e in errors) == expected, "\n".join(map(str, errors))
    for error in errors:
        assert error.source == str(file)
        assert "\n" not in str(error), "one line per error"
        assert error.message
