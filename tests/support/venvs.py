"""Fresh virtual environments holding kubemill's wheel and exactly one set of its extras.

A user installs ``pip install 'kubemill[torch,mpi]'`` and nothing else; a command that
imports a module of another extra must say which extra it needs, not end in a traceback.
To test that for the bare package and for each extra alone, each environment here gets:

- the wheel ``python -m build`` makes of this checkout, installed by pip without its
  dependencies (so the wheel's own contents are what runs: a file left out of it fails);
- the distributions the wheel's requirements name for that set of extras, with their
  dependency closure, taken from the test run's own environment. They are linked file by
  file from there (their RECORD), not downloaded again: torch alone is several GB, and the
  tests run without a network. A module of a distribution outside the closure is absent,
  exactly as in a fresh install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def build_wheel(source: Path, out: Path) -> Path:
    """``python -m build --wheel`` of the files git tracks in ``source``, into ``out``.

    The tracked files are copied first, as a clone has them: the build writes its
    ``build/`` and egg-info beside them, not into the checkout, and an untracked file
    cannot slip into the wheel. This interpreter's setuptools builds it (no isolated
    build environment: no network here)."""
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=source, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    tree = out / "source"
    for name in filter(None, tracked):
        if (source / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, tree / name)
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=tree,
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("kubemill-*.whl")
    return wheel


def wheel_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of the wheel's METADATA: what the wheel itself declares."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        headers = HeaderParser().parsestr(archive.read(name).decode("utf-8"))
    return headers.get_all("Requires-Dist") or []


def closure(requirements: Iterable[str], extras: Iterable[str] = ()) -> set[str]:
    """The installed distributions ``requirements`` need on this platform, transitively
    (canonical names); each requirement's own extras are followed, as pip would."""
    wanted_extras = set(extras)
    found: set[str] = set()
    pending = [(Requirement(text), frozenset(wanted_extras)) for text in requirements]
    while pending:
        requirement, active = pending.pop()
        environments = [{**default_environment(), "extra": extra} for extra in active or {""}]
        if requirement.marker and not any(requirement.marker.evaluate(e) for e in environments):
            continue
        name = canonicalize_name(requirement.name)
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in found:
            continue
        found.add(key)
        distribution = metadata.distribution(name)
        pending.extend(
            (Requirement(text), frozenset(requirement.extras))
            for text in distribution.requires or ()
        )
    return {key.split("[", 1)[0] for key in found}


def link_distribution(name: str, site_packages: Path) -> int:
    """Link every file ``name``'s RECORD lists under site-packages into ``site_packages``
    (real directories, a symlink per file). Scripts outside site-packages are left out.
    Returns how many files were linked."""
    distribution = metadata.distribution(name)
    source_root = Path(str(distribution.locate_file("")))
    linked = 0
    for entry in distribution.files or ():
        relative = Path(str(entry))
        if ".." in relative.parts or relative.suffix == ".pyc":
            continue
        source = source_root / relative
        if not source.is_file():
            continue
        target = site_packages / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.symlink_to(source)
            linked += 1
    return linked


def make_venv(where: Path, wheel: Path, extras: tuple[str, ...]) -> Path:
    """A venv at ``where`` with the wheel (no dependencies) and the closure of its
    requirements for ``extras``, linked from this environment. Returns its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        # Without this checkout's sources on the path, or pip finds kubemill installed.
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    site_packages = Path(purelib)
    for name in sorted(closure(wheel_requirements(wheel), extras) - {"kubemill"}):
        link_distribution(name, site_packages)
    return where / "bin"


def clean_env(bin_dir: Path) -> dict[str, str]:
    """The environment a user of that venv has: its bin first on PATH, no PYTHONPATH (which
    would put this checkout's sources before the wheel), no other virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"])
    return env


__all__ = [
    "build_wheel",
    "clean_env",
    "closure",
    "link_distribution",
    "make_venv",
    "wheel_requirements",
]
