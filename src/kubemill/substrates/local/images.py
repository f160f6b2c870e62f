"""Which local Python environment a container image stands for.

There are no images locally, so an image name selects an *environment*: a directory
whose ``bin/`` goes first on the replica's PATH, so ``python`` (and ``torchrun``, ...)
in a command is that environment's. By default every image is the environment of the
interpreter running kubemill. A config file maps image names to other environments, so
engines with conflicting pins (one venv for TensorFlow, one for PyTorch) coexist::

    # $XDG_CONFIG_HOME/kubemill/config.yaml  (or the file named by $KUBEMILL_CONFIG)
    images:
      "kubeflow/tf-dist-mnist-test:1.0": ~/venvs/tf      # exact name
      "pytorch/*": /opt/venvs/torch                       # glob (fnmatch), first match wins

Exact names are tried before globs. An image no entry maps that stands for one of the
environments kubemill builds itself (:mod:`.environments`: Mars's ``kubemill-mars*`` and
``marsproject/mars*`` are the ``mars`` environment, ``kubemill env create mars``) runs
there; any other image uses the default environment.

The same file caps how many replicas one job may start on this machine (every replica is
a process)::

    maxReplicasPerJob: 1024      # default 512

and holds the local kubelet's other settings, read where they are used: ``replicaStarts``
(:class:`~.start_rate.StartLimits`: how fast replicas are started).
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local.managed_images import MANAGED_IMAGES

CONFIG_ENV = "KUBEMILL_CONFIG"
DEFAULT_MAX_REPLICAS_PER_JOB = 512
MAX_REPLICAS_KEY = "maxReplicasPerJob"
CONFIG_KEYS = frozenset(
    {
        "images",
        MAX_REPLICAS_KEY,
        "replicaStarts",
        "containerLogMaxSize",
        "containerLogMaxFiles",
        "runtimes",
    }
)
"""The config file's keys; ``replicaStarts`` is read by :class:`~.start_rate.StartLimits`, the log
ones by :class:`~.logs.LogPolicy`, ``runtimes`` by :mod:`.known_objects`."""


IMAGE_NOTES: tuple[tuple[str, str], ...] = (
    (
        "*horovod*",
        "Horovod images cannot stand in locally: Horovod does not build against the torch this"
        " project pins (2.13), so no environment here has it; examples/mpi-allreduce.yaml runs"
        " the same kind of job here (mpi4py)",
    ),
)
"""What to know about well-known images that cannot run locally (glob, note)."""


def image_note(image: str) -> str:
    """The note of the first :data:`IMAGE_NOTES` glob that ``image`` matches, or ``""``."""
    for pattern, note in IMAGE_NOTES:
        if fnmatch.fnmatchcase(image, pattern):
            return note
    return ""


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$KUBEMILL_CONFIG``, else ``$XDG_CONFIG_HOME/kubemill/config.yaml``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return Path(from_env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "kubemill" / "config.yaml"


def read_config(path: str | os.PathLike[str] | None = None) -> tuple[Mapping[str, Any], str]:
    """The config file's top-level mapping and the file's name, for a setting read where it
    is used; ``{}`` when there is no file or it is not a mapping (:meth:`ImageConfig.load`
    reports a broken shape), a :class:`SubstrateError` when it cannot be read or parsed."""
    file = config_path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return {}, str(file)
    except (OSError, yaml.YAMLError) as exc:
        raise SubstrateError(f"cannot read the config file {file}: {exc}") from exc
    return (data if isinstance(data, Mapping) else {}), str(file)


def config_whole_number(value: Any, minimum: int, where: str) -> int:
    """A whole-number setting of the config file: ``value`` when it is an integer (not a
    boolean) of at least ``minimum``, else a :class:`SubstrateError` naming ``where`` (the
    file and the setting's key)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SubstrateError(f"{where}: expected a whole number >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class Environment:
    """A local Python environment: where its executables are."""

    bin_dir: str
    source: str = "default"
    """How it was chosen: ``default`` or the config entry that matched."""

    @property
    def prefix(self) -> Path:
        return Path(self.bin_dir).parent

    @property
    def is_venv(self) -> bool:
        return (self.prefix / "pyvenv.cfg").is_file()

    @property
    def is_default(self) -> bool:
        return self.source == "default"

    def to_json(self) -> dict[str, str]:
        """As stored with a job, so its supervisor uses what was resolved at submit."""
        return {"bin_dir": self.bin_dir, "source": self.source}

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> Environment:
        return cls(bin_dir=data["bin_dir"], source=data.get("source", "default"))


def default_environment() -> Environment:
    """The environment of the interpreter running kubemill (its bin dir as invoked)."""
    # Not resolved: a venv's bin/python is a symlink to the base interpreter, and it is
    # the venv's bin dir (with its console scripts) that must come first on PATH.
    executable = sys.executable or "python3"
    return Environment(bin_dir=str(Path(executable).absolute().parent))


def managed_environment(
    image: str, root: str | os.PathLike[str] | None = None
) -> Environment | None:
    """The managed environment ``image`` stands for (:data:`.managed_images.MANAGED_IMAGES`),
    if any; a :class:`SubstrateError` saying how to create it when it is not built yet."""
    for name, patterns in MANAGED_IMAGES.items():
        if not any(fnmatch.fnmatchcase(image, pattern) for pattern in patterns):
            continue
        # The recipes' module, for an image that stands for one of them only.
        from kubemill.substrates.local import environments

        found = environments.status(name, root)
        if not found.ready:
            raise SubstrateError(
                f"image {image!r} stands for kubemill's {name} environment, which is"
                f" {found.state} ({found.where}): create it with `kubemill env create"
                f" {name}`, or map the image to a venv of yours in the config file"
            )
        return Environment(
            bin_dir=str(found.prefix / "bin"),
            source=f"managed environment {name} ({found.prefix})",
        )
    return None


@dataclass(frozen=True)
class ImageConfig:
    """The ``images:`` mapping of the config file (empty when there is no file)."""

    images: Mapping[str, str]
    path: Path | None = None
    max_replicas_per_job: int = DEFAULT_MAX_REPLICAS_PER_JOB
    """``maxReplicasPerJob``: a job asking for more replicas is refused at submit."""

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> ImageConfig:
        """Read the config file; a missing file means "no mappings", a broken one is an error."""
        file = config_path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            if path is not None:
                raise SubstrateError(f"config file {file} does not exist") from None
            return cls(images={}, path=None)
        except OSError as exc:
            raise SubstrateError(f"cannot read the config file {file}: {exc.strerror}") from exc
        try:
            data: Any = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise SubstrateError(f"{file}: not valid YAML: {exc}") from exc
        if not isinstance(data, Mapping):
            raise SubstrateError(f"{file}: expected a mapping with an `images:` key")
        unknown = sorted(set(data) - CONFIG_KEYS)
        if unknown:
            raise SubstrateError(
                f"{file}: unknown keys {unknown}; the known keys are {sorted(CONFIG_KEYS)}"
            )
        cap = data.get(MAX_REPLICAS_KEY, DEFAULT_MAX_REPLICAS_PER_JOB)
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise SubstrateError(
                f"{file}: {MAX_REPLICAS_KEY}: expected a positive integer, got {cap!r}"
            )
        images = data.get("images") or {}
        if not isinstance(images, Mapping):
            raise SubstrateError(
                f"{file}: images: expected a mapping of image name (or glob) to a venv path"
            )
        for key, value in images.items():
            if not isinstance(value, str) or not value:
                raise SubstrateError(
                    f"{file}: images.{key}: expected the path of a Python environment (a venv),"
                    f" got {value!r}"
                )
        return cls(
            images={str(k): v for k, v in images.items()}, path=file, max_replicas_per_job=cap
        )

    def resolve(self, image: str) -> Environment:
        """The environment for ``image``; raises if its mapping points nowhere usable."""
        for key in self._matches(image):
            where = f"{self.path}: images[{key!r}]"
            prefix = Path(self.images[key]).expanduser()
            bin_dir = prefix / "bin"
            if not bin_dir.is_dir():
                raise SubstrateError(
                    f"image {image!r} maps to {prefix} ({where}), which has no bin/ directory;"
                    " point it at a venv (python -m venv PATH) or fix the config"
                )
            return Environment(bin_dir=str(bin_dir.absolute()), source=where)
        return managed_environment(image) or default_environment()

    def _matches(self, image: str) -> list[str]:
        if image in self.images:
            return [image]
        return [k for k in self.images if fnmatch.fnmatchcase(image, k)][:1]
