"""Nothing in the project refers to a file that is not in it.

Docs, docstrings and comments cite files (``docs/notes/kmock-gaps.md``,
``substrates/local/store.py``): a reader who follows one must find it. This scans every
tracked text file for the paths it cites (a backticked path with a directory, or any
``*.md`` name) and fails on one that no tracked file's path ends with. A move or a removal
that leaves its citations behind fails here.

Paths inside other projects (Mars's package, Kubernetes' source) are cited with the
prefixes below; placeholders (``DIR/``) likewise.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FOREIGN_PREFIXES = (
    "mars/",  # Mars's own package (its Kubernetes config)
    "pkg/",  # Kubernetes' source tree
    "DIR/",  # a directory the reader chooses
    "kubeflow/",  # Kubeflow's repositories (kubeflow/trainer/...)
)

SCANNED = (".py", ".md", ".sh", ".toml", ".txt", ".yaml", ".yml")
CITED_PATH = re.compile(r"`{1,2}([\w.][\w.\-]*(?:/[\w.\-]+)+/?)`{1,2}")
"""A backticked path with at least one directory: ``a/b.py`` or ``a/b/``."""
FILE_LIKE = re.compile(r"\.(py|md|sh|toml|ya?ml|json|go|mod|sum|js|css|txt)$")
MARKDOWN_NAME = re.compile(r"(?<![\w/.\-])([\w.\-]+(?:/[\w.\-]+)*\.md)\b")
"""Any ``*.md`` name, backticked or not (``README.md``, ``docs/fields.md``)."""


def tracked_files() -> list[str]:
    listing = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [path for path in listing.stdout.splitlines() if (ROOT / path).is_file()]


def citations(text: str) -> list[tuple[int, str]]:
    """(line, cited path) for each path ``text`` cites."""
    found: list[tuple[int, str]] = []
    for match in CITED_PATH.finditer(text):
        path = match.group(1)
        if FILE_LIKE.search(path) or path.endswith("/"):
            found.append((text.count("\n", 0, match.start()) + 1, path))
    for match in MARKDOWN_NAME.finditer(text):
        found.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return found


def test_every_cited_file_is_in_the_project() -> None:
    files = tracked_files()
    folders = {
        "/".join(path.split("/")[:depth])
        for path in files
        for depth in range(1, path.count("/") + 1)
    }
    names = set(files) | folders

    def exists(cited: str) -> bool:
        cited = cited.rstrip("/")
        return cited in names or any(name.endswith("/" + cited) for name in names)

    missing = [
        f"{path}:{line}: {cited}"
        for path in files
        if path.endswith(SCANNED) and path != "tests/test_references.py"  # its examples
        for line, cited in citations((ROOT / path).read_text(encoding="utf-8", errors="replace"))
        if not cited.startswith(FOREIGN_PREFIXES) and not exists(cited)
    ]
    assert not missing, "these cite files the project does not have:\n" + "\n".join(missing)


def test_a_citation_of_a_missing_file_is_found() -> None:
    text = "see ``docs/notes/no-such-note.md`` and `src/kubemill/core/reconcile.py`\n"
    assert citations(text) == [
        (1, "docs/notes/no-such-note.md"),
        (1, "src/kubemill/core/reconcile.py"),
        (1, "docs/notes/no-such-note.md"),
    ]
