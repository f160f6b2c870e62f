"""One folder per engine: nothing outside an engine's folder names that engine's kind.

Every kind an engine (or a controller) of the registry serves is named in its folder,
``src/kubemill/engines/<engine>/``, and its registry line points there; no other module of
``src/`` should know it, not even in a docstring: a module that needs to tell kinds apart
asks the registry, and one that gives an example names the shape (a schedule, a service
cluster) or the engine.
"""

from __future__ import annotations

import re
from pathlib import Path

from kubemill.kinds import BUILTIN, CONTROLLERS

SRC = Path(__file__).parents[1] / "src" / "kubemill"


def _folder(module: str) -> str:
    """``kubemill.engines.<engine>.…`` -> ``engines/<engine>/``."""
    parts = module.split(".")
    assert parts[:2] == ["kubemill", "engines"], f"{module} is not in an engine's folder"
    return f"engines/{parts[2]}/"


def kinds_by_folder() -> dict[str, str]:
    """Every built-in kind and the folder of the engine that serves it."""
    return {entry.kind: _folder(entry.api.model.__module__) for entry in (*BUILTIN, *CONTROLLERS)}


def kind_pattern(kind: str) -> re.Pattern[str]:
    """A kind's name, not inside a longer name (SparkApplication in ScheduledSparkApplication);
    derived names (TFJobSpec, MarsClusters) count: they name the kind too."""
    return re.compile(r"(?<![A-Za-z])" + re.escape(kind))


def mentions() -> dict[str, int]:
    """Module -> how many times it names a kind whose engine folder it is not in."""
    kinds = kinds_by_folder()
    patterns = {kind: kind_pattern(kind) for kind in kinds}
    found: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        text = path.read_text(encoding="utf-8")
        count = sum(
            len(pattern.findall(text))
            for kind, pattern in patterns.items()
            if not module.startswith(kinds[kind])
        )
        if count:
            found[module] = count
    return found


def test_every_builtin_kind_lives_in_an_engine_folder() -> None:
    folders = kinds_by_folder()
    assert set(folders.values()) == {
        f"engines/{name}/"
        for name in (
            "tensorflow",
            "pytorch",
            "mpi",
            "spark",
            "mars",
            "jax",
            "xgboost",
            "paddle",
            "trainer",
            "ray",
        )
    }
    for folder in folders.values():
        assert (SRC / folder / "entry.py").is_file(), folder


def test_no_module_outside_an_engine_folder_names_its_kind() -> None:
    found = mentions()
    assert not found, f"these modules name an engine's kind outside its folder: {found}"


def test_a_kind_is_found_as_a_word_and_in_derived_names_only() -> None:
    pattern = kind_pattern("SparkApplication")
    assert pattern.search("a SparkApplication's driver")
    assert pattern.search("SparkApplicationSpec")  # a derived name names it too
    assert not pattern.search("ScheduledSparkApplication")  # another kind
