"""Reading manifest files: the file-system side of :func:`kubemill.api.load`.

``kubemill.api`` is pure (it parses text and dicts, never touches the disk), so the
SDK and the CLI read files here and hand the text to ``load``, naming the file so
every error says where it came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kubemill.api import FieldError, Job, ManifestError, load

MANIFEST_SUFFIXES = (".yaml", ".yml")
"""What a directory's manifests are called (JSON is YAML too, but is not searched for)."""


def load_path(path: str | Path) -> list[Job]:
    """Load every job in a YAML file; a file that cannot be read is a ManifestError."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(
            [FieldError("", f"cannot read: {exc.strerror or exc}", source=str(file))]
        ) from exc
    except UnicodeDecodeError as exc:
        raise ManifestError(
            [FieldError("", f"not UTF-8 text: {exc.reason}", source=str(file))]
        ) from exc
    return load(text, name=str(file))


def manifest_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories into their ``*.yaml``/``*.yml`` files (recursively, sorted);
    other paths are kept as given, so a missing file is reported when it is loaded."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(
                sorted(p for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file())
            )
        else:
            found.append(path)
    return found


__all__ = ["MANIFEST_SUFFIXES", "load_path", "manifest_files"]
