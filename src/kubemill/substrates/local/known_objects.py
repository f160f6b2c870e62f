"""Objects a local job may name that a cluster would hold (training runtimes), known without one.

On a cluster an administrator applies them and the operator reads them; here they come from
two places, both read by every local process that loads a job (the CLI, a detached
supervisor, ``kubemill get`` in another shell), so that a job recorded against one still loads:

- the config file's ``runtimes:`` (:func:`.images.config_path`), a list of manifest files,
  relative to the config file's folder::

      runtimes:
        - ~/runtimes/torch-tuned.yaml

- the files given to a run (``kubemill run job.yaml --runtime FILE``), which the state
  directory keeps, as applying them to a cluster would (:func:`keep`): under
  ``<state dir>/objects/``, one file per object, a later one of the same kind, namespace
  and name replacing it.

Each file may hold several documents. Which engine takes an object of which kind is the
registry's business (:func:`kubemill.kinds.add_known_objects`); an object given here replaces
a default of the same name, and the state directory's replace the config file's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kubemill.api import FieldError, ManifestError
from kubemill.kinds import add_known_objects
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local.images import read_config
from kubemill.substrates.local.state_schema import default_state_dir

RUNTIMES_KEY = "runtimes"
"""The config file's list of runtime manifest files."""
KEPT_DIR = "objects"
"""The state directory's folder of objects given to runs."""

_seen: dict[str, tuple[tuple[str, int], ...]] = {}
"""The files last made known, with their modification times: read again once one changed."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def read_documents(file: Path) -> list[Any]:
    """Every YAML document of ``file`` (empty ones skipped); a :class:`ManifestError` naming
    the file when it cannot be read or parsed."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ManifestError(
            [FieldError("", f"cannot read: {why or exc}", source=str(file))]
        ) from exc
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise ManifestError([FieldError("", f"not valid YAML: {exc}", source=str(file))]) from exc


def config_files(config: str | os.PathLike[str] | None = None) -> list[Path]:
    """The files the config file's ``runtimes:`` lists, relative to its folder."""
    data, name = read_config(config)
    listed = data.get(RUNTIMES_KEY) or []
    if not isinstance(listed, list) or not all(isinstance(p, str) and p for p in listed):
        raise SubstrateError(f"{name}: {RUNTIMES_KEY}: expected a list of manifest files")
    folder = Path(name).parent
    return [folder / Path(p).expanduser() for p in listed]


def kept_files(state_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The objects the state directory keeps, in name order."""
    folder = default_state_dir(state_dir) / KEPT_DIR
    return sorted(folder.glob("*.yaml")) if folder.is_dir() else []


def make_known(files: Sequence[Path]) -> int:
    """Make every object of ``files`` known, in order (a later one of the same name wins),
    unless the same files were made known unchanged before; returns how many were added."""
    stamps = tuple((str(f.absolute()), _stamp(f)) for f in files)
    if stamps == _seen.get("last"):
        return 0
    added = sum(add_known_objects(read_documents(f), source=str(f)) for f in files)
    _seen["last"] = stamps
    return added


def _stamp(file: Path) -> int:
    try:
        return file.stat().st_mtime_ns
    except OSError:
        return -1  # read_documents says why


def know_local_objects(
    state_dir: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
) -> int:
    """Make known what the config file lists, then what the state directory keeps."""
    return make_known([*config_files(config), *kept_files(state_dir)])


def keep(
    files: Sequence[str | os.PathLike[str]], state_dir: str | os.PathLike[str] | None = None
) -> int:
    """Make the objects of ``files`` known and keep them in the state directory, for the
    processes that load a job naming one later; nothing is kept if one is invalid."""
    docs: list[tuple[Mapping[str, Any], str]] = []
    for raw in files:
        file = Path(raw).expanduser()
        found = read_documents(file)
        add_known_objects(found, source=str(file))
        docs += [(doc, str(file)) for doc in found]
    folder = default_state_dir(state_dir) / KEPT_DIR
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for doc, _ in docs:
            metadata = doc.get("metadata") or {}
            parts = (doc.get("kind"), metadata.get("namespace") or "", metadata.get("name"))
            target = folder / (".".join(_UNSAFE.sub("_", str(p)) for p in parts) + ".yaml")
            target.write_text(yaml.safe_dump(dict(doc), sort_keys=False), encoding="utf-8")
    except OSError as exc:
        raise SubstrateError(f"cannot keep the runtimes in {folder}: {exc.strerror}") from exc
    return len(docs)


__all__ = [
    "KEPT_DIR",
    "RUNTIMES_KEY",
    "config_files",
    "keep",
    "kept_files",
    "know_local_objects",
    "make_known",
    "read_documents",
]
