"""A job's delivered files on this machine: each file set (a ConfigMap's or a Secret's) is a
directory under the job's ``files`` directory, written atomically file by file, with its
digest beside it, so that a later supervisor (after a resume) sees what is there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kubemill.core import ChildKind, DeleteChild, WriteFiles
from kubemill.substrates.files import resolved_contents

FILE_KINDS: tuple[ChildKind, ...] = ("ConfigMap", "Secret")
DIGEST_FILE = ".kubemill-digest"
"""In each file set's directory: ``<ConfigMap|Secret> <digest>`` of what was written."""


def written_file_sets(files_dir: Path) -> dict[tuple[ChildKind, str], str]:
    """The file sets a job's files directory holds, as the core's observed children."""
    found: dict[tuple[ChildKind, str], str] = {}
    if not files_dir.is_dir():
        return found
    for marker in sorted(files_dir.glob(f"*/{DIGEST_FILE}")):
        written, _, digest = marker.read_text(encoding="utf-8").strip().partition(" ")
        for kind in FILE_KINDS:
            if written == kind:
                found[(kind, marker.parent.name)] = digest
    return found


def write_file_set(root: Path, action: WriteFiles, *, owner: str) -> tuple[ChildKind, str]:
    """A FileSet becomes ``<job dir>/files/<set>/``; each file is replaced atomically, so
    a replica reading a hostfile while it is rewritten sees the old or the new one.
    The directory is the one the Plan's env points at (``Network.files_path``)."""
    target = root / action.name
    target.mkdir(parents=True, exist_ok=True)
    contents = resolved_contents(action.files, owner=owner)
    for file in action.files:
        for path in file.mounted_as:
            staged = target / f".{path}.new"
            staged.write_text(contents[file.name], encoding="utf-8")
            staged.chmod(file.mode & 0o700 if action.secret else file.mode)
            staged.replace(target / path)
    kind: ChildKind = "Secret" if action.secret else "ConfigMap"
    # The digest beside the files, so that a later supervisor (after a resume) sees
    # what is there, as the operator reads it from the object's annotation.
    (target / DIGEST_FILE).write_text(f"{kind} {action.digest}\n", encoding="utf-8")
    return kind, action.digest


def delete_file_set(root: Path, action: DeleteChild) -> None:
    """Remove a file set the core deleted (nothing for other kinds of children)."""
    if action.kind in FILE_KINDS:
        shutil.rmtree(root / action.name, ignore_errors=True)
