"""One folder per engine: nothing outside an engine's folder names that engine's kind.

Every kind an engine (or a controller) of the registry serves is named in its folder,
``src/kubemill/engines/<engine>/``, and its registry line points there; no other module of
``src/`` should know it. Where a module still does, it is listed in :data:`STILL_NAMED`
with how many times: the count may only go down (this test fails if a module not in the
table names a kind, or names kinds more often than the table allows), and a module whose
mentions are gone must leave the table, so that it cannot come back unnoticed.
"""

from __future__ import annotations

import re
from pathlib import Path

from kubemill.kinds import BUILTIN, CONTROLLERS

SRC = Path(__file__).parents[1] / "src" / "kubemill"

# The remaining work of issue 17 ("nothing outside an engine's folder names that engine's
# kind"): module (under src/kubemill) -> mentions of another folder's kind still allowed.
# Lower a count when you remove mentions; never raise one or add a module.
STILL_NAMED: dict[str, int] = {
    "cli/spark_cluster.py": 1,
    "cli/spark_submit.py": 5,
}


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
        )
    }
    for folder in folders.values():
        assert (SRC / folder / "entry.py").is_file(), folder


def test_no_module_outside_an_engine_folder_names_more_kinds_than_it_did() -> None:
    found = mentions()
    new = sorted(set(found) - set(STILL_NAMED))
    assert not new, f"these modules name an engine's kind outside its folder: {new}"
    risen = {m: (STILL_NAMED[m], n) for m, n in found.items() if n > STILL_NAMED[m]}
    assert not risen, f"more mentions of kinds than allowed (allowed, found): {risen}"


def test_the_table_lists_only_what_is_left() -> None:
    found = mentions()
    done = {m: n for m, n in STILL_NAMED.items() if found.get(m, 0) < n}
    assert not done, (
        f"fewer mentions now (allowed -> found): "
        f"{ {m: (n, found.get(m, 0)) for m, n in done.items()} }; lower the table to match"
    )


def test_a_kind_is_found_by_its_name_and_not_inside_another() -> None:
    pattern = kind_pattern("SparkApplication")
    assert len(pattern.findall("a SparkApplication, SparkApplications, SparkApplicationSpec")) == 3
    assert not pattern.findall("a ScheduledSparkApplication")
