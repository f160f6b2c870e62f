"""Python environments kubemill builds and manages itself, for engines whose pins conflict.

Mars (pymars 0.10.0) needs numpy 1.23, pandas < 2 and a Cython < 3 build from its sdist,
which the torch/TensorFlow environment cannot hold, so it gets a virtualenv of its own::

    kubemill env create mars     # idempotent; prints each step; resumes where it failed
    kubemill env python mars     # that environment's interpreter
    kubemill env list

**Where they live:** ``$KUBEMILL_ENVS_DIR/<name>`` if set, else
``$XDG_DATA_HOME/kubemill/envs/<name>`` (``~/.local/share/kubemill/envs/<name>``). An
environment is a plain venv; ``kubemill-env.json`` in it records the steps done, so a
failed ``create`` resumes at the failed step, and a complete one only re-checks.

**kubemill itself** is installed into it *editable* from the checkout the running kubemill
comes from (with its ``kubernetes`` extra, as the seed's program imports
``kubernetes.config``), so a program run with the environment's interpreter imports the
same ``kubemill.deploy`` as the CLI that created it. Moving or deleting that checkout
breaks the environment's ``import kubemill``; ``create`` then re-installs (its source
path is part of the step's record) and its final check says so. Every step after the
engine's own runs with the engine's pins as pip constraints, so nothing installed later
upgrades numpy under Mars.

**Images:** the local substrate maps an engine's image names (Mars's: ``kubemill-mars*``,
which ``scripts/build-image.sh mars`` builds with this module's recipe, and
``marsproject/mars*``) to its managed environment once it exists (see :mod:`.images`; the
config file's own mappings come first).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local.managed_images import MANAGED_IMAGES

ENVS_DIR_ENV = "KUBEMILL_ENVS_DIR"
RECORD_FILE = "kubemill-env.json"
CONSTRAINTS_FILE = "kubemill-constraints.txt"
LOG_DIR = "kubemill-logs"
_TAIL_LINES = 15


class ManagedEnvironmentError(SubstrateError):
    """A managed environment is unknown, not created yet, or could not be created."""


@dataclass(frozen=True)
class Step:
    """One step of building an environment: a program to run, and what to do if it fails."""

    title: str
    argv: Callable[[Path, Path], list[str]]
    """``(environment prefix, kubemill source) -> argv``; ``python`` is the env's own."""
    hint: str = ""
    """What usually fixes a failure of this step."""
    expected_seconds: int = 0
    """Said before a long step, so nobody thinks it hangs."""


@dataclass(frozen=True)
class EnvSpec:
    """What an engine's environment holds and how it is built."""

    name: str
    summary: str
    pins: tuple[str, ...]
    """Requirements installed first and kept as constraints for every later step."""
    steps: tuple[Step, ...]
    check: str
    """Python code the environment's interpreter must run without error once built."""
    programs: tuple[str, ...] = field(default=())
    """Executables its ``bin/`` must hold."""
    venv_args: tuple[str, ...] = field(default=())
    """Extra arguments of ``python -m venv``."""

    @property
    def images(self) -> tuple[str, ...]:
        """Image names (fnmatch globs) that stand for this environment locally (kept in
        :data:`.managed_images.MANAGED_IMAGES`, which resolving an image reads alone)."""
        return MANAGED_IMAGES.get(self.name, ())


def _pip(prefix: Path, *args: str) -> list[str]:
    return [
        str(prefix / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        *args,
    ]


MARS_PINS = (
    "cython<3",
    "numpy==1.23.5",
    "setuptools<64",
    "wheel",
    "scipy<1.11",
    "pandas<2",
    "scikit-learn<1.3",
    "sqlalchemy<2",
    "numexpr==2.8.4",
    "pyarrow==11.0.0",
)
"""What pymars 0.10.0 builds and runs with on Python 3.11: with numpy 2 ``import mars`` fails
on ``np.unicode_``, with numpy 1.26 ``describe()`` breaks; Cython 3 and setuptools >= 64
cannot build its sdist (there is no wheel for 3.11). pyarrow 11 is the last with
``pyarrow.plasma``: the plasma store Mars's Kubernetes config gives its workers (as the
in-pod worker of :mod:`kubemill.engines.mars.pod.entrypoint` does), and what Mars's own
Kubernetes image pins."""

MARS_BUILD_ONLY = ("cython<3", "wheel")
"""The pins only pymars's build needs: the Mars image (``scripts/build-image.sh mars``)
builds with every pin and leaves these out. (``setuptools`` stays: Mars imports
``pkg_resources`` to load its extensions.)"""

MARS_RUNTIME_PINS = tuple(pin for pin in MARS_PINS if pin not in MARS_BUILD_ONLY)
"""What a Mars process needs of :data:`MARS_PINS` once pymars is built."""

MARS_VERSION = "0.10.0"


def _constraints(prefix: Path) -> str:
    return str(prefix / CONSTRAINTS_FILE)


MARS = EnvSpec(
    name="mars",
    summary=f"Mars {MARS_VERSION} (pymars) with numpy 1.23, for kubemill.deploy's Mars clusters",
    pins=MARS_PINS,
    steps=(
        Step(
            "install Mars's build dependencies and pins",
            lambda prefix, _src: _pip(prefix, *MARS_PINS),
            hint="check the network (pip downloads from PyPI) and the log",
        ),
        Step(
            f"build and install pymars {MARS_VERSION} from its sdist",
            lambda prefix, _src: _pip(
                prefix,
                "--no-build-isolation",
                "-c",
                _constraints(prefix),
                f"pymars=={MARS_VERSION}",
            ),
            hint="the build needs a C compiler and Python's headers (apt-get install"
            " build-essential python3-dev)",
            expected_seconds=150,
        ),
        Step(
            "install kubemill (editable, from this checkout) with its kubernetes extra",
            lambda prefix, src: _pip(
                prefix, "-c", _constraints(prefix), "-e", f"{src}[kubernetes]"
            ),
            hint="the kubemill checkout must still be where the CLI runs from",
        ),
    ),
    check=(
        "import numpy, mars, mars.tensor, pyarrow, pyarrow.plasma, kubemill.deploy.local\n"
        "assert numpy.__version__ == '1.23.5', numpy.__version__\n"
        "assert pyarrow.__version__ == '11.0.0', pyarrow.__version__\n"
        f"assert mars.__version__ == {MARS_VERSION!r}, mars.__version__\n"
    ),
    programs=("mars-supervisor", "mars-worker"),
)

MANAGED: dict[str, EnvSpec] = {MARS.name: MARS}
"""Every environment kubemill knows how to build, by name."""


def envs_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$KUBEMILL_ENVS_DIR``, else ``$XDG_DATA_HOME/kubemill/envs``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    from_env = os.environ.get(ENVS_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "kubemill" / "envs"


def spec(name: str) -> EnvSpec:
    """The managed environment called ``name``; a clear error naming the known ones."""
    try:
        return MANAGED[name]
    except KeyError:
        raise ManagedEnvironmentError(
            f"no managed environment {name!r}; kubemill builds {sorted(MANAGED)}"
        ) from None


@dataclass(frozen=True)
class EnvStatus:
    """What is on disk for one managed environment."""

    spec: EnvSpec
    prefix: Path
    state: str
    """``ready``, ``incomplete`` (a create did not finish: run it again), ``stale`` (the
    kubemill checkout installed into it editable is gone: moved or deleted, so its
    ``import kubemill`` fails) or ``absent``."""
    source: str = ""
    """The kubemill checkout installed into it."""

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python"

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def where(self) -> str:
        """Its path, and for a stale one the checkout that is gone, for messages."""
        if self.state == "stale":
            return f"{self.prefix}, its kubemill was installed from {self.source}, which is gone"
        return str(self.prefix)


def _record(prefix: Path) -> dict[str, object]:
    try:
        data = json.loads((prefix / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def status(name: str, root: str | os.PathLike[str] | None = None) -> EnvStatus:
    """The state of environment ``name`` under ``root`` (see :func:`envs_dir`)."""
    env = spec(name)
    prefix = envs_dir(root) / name
    if not (prefix / "bin" / "python").exists():
        return EnvStatus(env, prefix, "absent")
    record = _record(prefix)
    complete = record.get("complete") is True and all(
        (prefix / "bin" / program).exists() for program in env.programs
    )
    source = str(record.get("source", ""))
    state = "ready" if complete else "incomplete"
    if complete and source and not (Path(source) / "src" / "kubemill").is_dir():
        # Found at use rather than as "No module named 'kubemill'" in a replica's log.
        state = "stale"
    return EnvStatus(env, prefix, state, source=source)


def list_environments(root: str | os.PathLike[str] | None = None) -> list[EnvStatus]:
    """Every managed environment, built or not."""
    return [status(name, root) for name in sorted(MANAGED)]


def python_of(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """The interpreter of a ready environment; an error saying how to create it otherwise."""
    found = status(name, root)
    if not found.ready:
        raise ManagedEnvironmentError(
            f"the {name} environment is {found.state} ({found.where}); create it with"
            f" `kubemill env create {name}`"
        )
    return found.python


def kubemill_source() -> Path:
    """The checkout the running kubemill comes from (the directory with its pyproject)."""
    import kubemill

    root = Path(kubemill.__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "kubemill"' not in pyproject.read_text("utf-8"):
        raise ManagedEnvironmentError(
            f"kubemill runs from {Path(kubemill.__file__).parent}, not from a checkout of its"
            " source, so it cannot be installed into a managed environment; run"
            " `kubemill env create` from a checkout's .venv (scripts/setup.sh)"
        )
    return root


@contextlib.contextmanager
def _locked(root: Path, name: str) -> Iterator[None]:
    """One ``create`` of an environment at a time (two would race on the same pip)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{name}.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ManagedEnvironmentError(
                f"another `kubemill env create {name}` is building {root / name}; wait for it"
            ) from None
        yield


def _digest(argv: list[str]) -> str:
    return hashlib.sha256("\0".join(argv).encode()).hexdigest()[:16]


def _tail(path: Path, lines: int = _TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


Progress = Callable[[str], None]


def create(
    name: str,
    root: str | os.PathLike[str] | None = None,
    *,
    fresh: bool = False,
    progress: Progress | None = None,
    base_python: str | None = None,
) -> EnvStatus:
    """Build environment ``name`` (idempotent): each step not yet done, then the check.

    ``progress`` gets one line per step as it starts and ends. A failing step raises
    :class:`ManagedEnvironmentError` naming the step, its last output lines, its log
    file and what to do; the steps done stay recorded, so running it again resumes.
    ``fresh`` deletes the environment first. ``base_python`` makes the venv (default:
    the interpreter kubemill runs on, whose base ``venv`` uses).
    """
    env = spec(name)
    say = progress or (lambda _line: None)
    top = envs_dir(root)
    prefix = top / name
    source = kubemill_source()
    with _locked(top, name):
        if fresh and prefix.exists():
            say(f"removing {prefix}")
            shutil.rmtree(prefix)
        record = _record(prefix)
        done = record.get("steps")
        steps_done: dict[str, str] = dict(done) if isinstance(done, dict) else {}
        total = len(env.steps) + 2
        logs = prefix / LOG_DIR
        if (prefix / "bin" / "python").exists():
            say(f"[1/{total}] virtualenv {prefix}: exists")
        else:
            say(f"[1/{total}] create the virtualenv {prefix}")
            prefix.parent.mkdir(parents=True, exist_ok=True)
            venv = [base_python or sys.executable, "-m", "venv", *env.venv_args, str(prefix)]
            _run(
                venv,
                top / f".{name}-venv.log",
                f"1/{total}",
                "create the virtualenv",
                env,
                "Python's venv module must be installed (apt-get install python3-venv)",
            )
        logs.mkdir(exist_ok=True)
        (prefix / CONSTRAINTS_FILE).write_text("\n".join(env.pins) + "\n", encoding="utf-8")
        record = {"name": name, "source": str(source), "steps": steps_done, "complete": False}
        _write_record(prefix, record)
        for number, step in enumerate(env.steps, start=2):
            argv = step.argv(prefix, source)
            where = f"{number}/{total}"
            if steps_done.get(step.title) == _digest(argv):
                say(f"[{where}] {step.title}: done before")
                continue
            slow = f" (about {step.expected_seconds} s)" if step.expected_seconds else ""
            say(f"[{where}] {step.title}{slow}")
            started = time.monotonic()
            _run(argv, logs / f"step-{number}.log", where, step.title, env, step.hint)
            say(f"[{where}] {step.title}: done in {time.monotonic() - started:.0f} s")
            steps_done[step.title] = _digest(argv)
            _write_record(prefix, record)
        where = f"{total}/{total}"
        say(f"[{where}] check the environment")
        check = [str(prefix / "bin" / "python"), "-c", env.check]
        _run(
            check,
            logs / "check.log",
            where,
            "check the environment",
            env,
            "a step's install was broken afterwards; run it again with --fresh",
        )
        missing = [p for p in env.programs if not (prefix / "bin" / p).exists()]
        if missing:
            raise ManagedEnvironmentError(
                f"environment {name} ({prefix}) has no {', '.join(missing)} in bin/ after"
                f" every step; run `kubemill env create {name} --fresh`"
            )
        record["complete"] = True
        _write_record(prefix, record)
    say(f"{name} is ready: {prefix / 'bin' / 'python'}")
    return status(name, root)


def _write_record(prefix: Path, record: dict[str, object]) -> None:
    temp = prefix / f".{RECORD_FILE}.tmp"
    temp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    temp.replace(prefix / RECORD_FILE)


def _run(argv: list[str], log: Path, where: str, title: str, env: EnvSpec, hint: str) -> None:
    """Run one step with its output in ``log``; raise naming the step if it fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    # The environment's own variables, minus a virtualenv the CLI runs in: pip must install
    # into the managed environment's interpreter, not the caller's.
    child_env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    try:
        with log.open("wb") as out:
            code = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=child_env,
                check=False,
            ).returncode
    except OSError as exc:
        raise ManagedEnvironmentError(
            f"creating the {env.name} environment failed at step {where} ({title}):"
            f" cannot run {argv[0]}: {exc.strerror}"
        ) from exc
    if code != 0:
        tail = _tail(log)
        raise ManagedEnvironmentError(
            f"creating the {env.name} environment failed at step {where} ({title}), exit"
            f" {code}.\n{tail}\n--\nThe whole output is in {log}. {hint.capitalize()}."
            f" Then run `kubemill env create {env.name}` again: it resumes at this step"
            f" (`--fresh` starts over)."
        )
