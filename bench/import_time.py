"""How fast does the ``kubemill`` command start?

Four measurements, on demand (never from the test suite)::

    python bench/import_time.py --runs 15 [--baseline /tmp/base/src]

1. Import time, from ``python -X importtime``: of ``import kubemill.cli`` alone, and of
   everything ``kubemill --help`` imports (the console script run under ``-X importtime``;
   ``kubemill.cli`` itself defers the command tree to its ``main``). For the latter it
   lists the modules with the largest own import time and whether any heavy module
   (engines, the kubernetes client, pydantic, rich, ...) was imported; the CLI is meant to
   import those lazily, inside the commands that need them.
2. Wall time of ``kubemill --help`` against ``python -c pass`` (the interpreter's own
   start-up), both median of N runs, interleaved. The issue's goal: ``kubemill --help``
   under 50 ms.
3. The hot commands side by side: ``--help``, ``get`` (a state directory holding one job)
   and ``run --detach`` (a one-replica job, a fresh state directory each run; and again into
   one state directory kept from run to run, as a user submits job after job), with this
   tree's ``src`` first on ``PYTHONPATH`` and, with ``--baseline SRC``, another ``src`` tree
   (an earlier commit's: ``git archive <commit> src | tar -x -C /tmp/base``), rounds
   interleaved: the median wall time and the median CPU time of the command's process
   (user + system; on a shared machine the steadier figure), and the heavy modules each
   imports. Each measurement starts once the job a ``run --detach`` left has ended (its
   supervisor and replicas would otherwise take the CPU from the next). Beside them, each
   command's floor, measured in the same rounds: the interpreter and the libraries the
   command cannot do without (:data:`FLOOR_OF`), and what is kubemill's own above it (the
   command's CPU less its floor's); for ``run --detach`` also the job's schema alone
   (:data:`SCHEMA`: yaml and the kind's models validating the job, nothing else of
   kubemill's). Goals (issue 21): ``run --detach`` <= 0.15 s, ``--help`` <= 50 ms; where a
   floor alone is above its goal, the summary says so.
4. Where ``run --detach``'s CPU goes, tree by tree: the classes it makes on the way
   (dataclasses and pydantic models, counted and timed in the process) and the own import
   time of each package (``-X importtime``, the least of several runs per module), which
   holds that class making: what is left once only the job's own engine is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {name}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: python
            command: ["python", "-c", "print('hi')"]
"""
"""The job ``run --detach`` submits (and ``get`` lists): one replica, over at once."""
HEAVY = (
    "torch",
    "tensorflow",
    "sklearn",
    "numpy",
    "kubernetes",
    "kopf",
    "pydantic",
    "rich",
    "yaml",
    "sqlite3",
)
KEPT = "run -d, kept state"
KEPT_AS = {KEPT: "run --detach"}
"""``run --detach`` into a state directory earlier runs made (the others get a fresh one,
so that every run makes the store's tables): what submitting one more job costs."""
INTERPRETER = "python -c pass"
SCHEMA = "the job's schema, validated"
"""Not a floor of the libraries: kubemill's own models of the job's kind (a PyTorchJob's 29,
from its metadata and pod template to PyTorch's own), made and the job validated, with yaml
and nothing else of kubemill's. No CLI that checks this manifest with pydantic, field by
field, can start in less; what ``run --detach`` costs above it is the rest of kubemill's
(the local submission, the kind's registry, the CLI's settings)."""
FLOORS = {
    INTERPRETER: "pass",
    "import typer": "import typer",
    "import json, pathlib, sqlite3": "import json, pathlib, sqlite3",
    "import pydantic, yaml": "import pydantic.main, yaml",
    "a pydantic model, yaml": (
        "import yaml\nfrom pydantic import BaseModel\nclass M(BaseModel):\n    x: int\nM(x=1)"
    ),
    SCHEMA: (
        "import yaml\nfrom kubemill.engines.pytorch.api import PyTorchJob\n"
        f"PyTorchJob.model_validate(yaml.safe_load({JOB.format(name='floor')!r}))"
    ),
}
"""What a command cannot cost less than, tree or no tree (each run as ``python -c``): the
interpreter's start, and the libraries each hot command goes through (:data:`FLOOR_OF`).
``import pydantic`` alone is not all a model costs: making the first one imports
``pydantic.fields`` and its types, and reads every installed distribution's entry points
for pydantic's plugins, whatever the model; so the floor of a command that validates a job
is a one-field model made and validated (the bare import is still printed beside it)."""
FLOOR_OF = {
    "--help": ("import typer", "typer draws the help: all it imports beside kubemill's own"),
    "get": ("import json, pathlib, sqlite3", "the store's rows, read by the standard library"),
    "run --detach": (
        "a pydantic model, yaml",
        "yaml reads the manifest, pydantic validates the job (a plain command line is read"
        " without typer, and its two lines are drawn without rich, as get's table)",
    ),
}
"""Each hot command's floor (a :data:`FLOORS` label) and why it is that. ``run --detach``
into a kept state directory has the same floor as into a fresh one."""
GOAL_HELP_SECONDS = 0.050
GOAL_DETACH_SECONDS = 0.150
LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


def kubemill_command() -> list[str]:
    beside = Path(sys.executable).with_name("kubemill")
    if not beside.exists():
        sys.exit(f"error: no kubemill command next to {sys.executable}; install kubemill first")
    return [str(beside)]


def importtime(argv: list[str]) -> tuple[float, dict[str, tuple[int, int]]]:
    """Total import seconds of ``python -X importtime ARGV...`` and (own us, cumulative us)
    per module."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    modules: dict[str, tuple[int, int]] = {}
    total_us = 0
    for line in done.stderr.splitlines():
        match = LINE.match(line)
        if match:
            modules[match[4]] = (int(match[1]), int(match[2]))
            if len(match[3]) == 1:  # a top-level import: not nested in another one
                total_us += int(match[2])
    if not modules:
        sys.exit(f"error: no import times reported by {argv}:\n{done.stderr[-2000:]}")
    return total_us / 1e6, modules


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def spread(values: list[float]) -> str:
    return (
        f"median {ms(statistics.median(values)).strip()} "
        f"(min {ms(min(values)).strip()}, max {ms(max(values)).strip()})"
    )


def child_run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``argv`` to its end: (wall seconds, CPU seconds of it and its waited children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"error: {argv} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def wait_detached(state: Path, timeout: float = 120.0) -> None:
    """Wait until no process names ``state`` on its command line any more: the detached
    supervisor of the job ``run --detach`` left there (its replicas are its children) has
    ended, so that it takes no CPU from the next measurement."""
    needle = os.fsencode(state)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    alive = needle in (proc / "cmdline").read_bytes()
                except OSError:
                    continue  # ended meanwhile, or not ours to read
                if alive:
                    break
        if not alive:
            return
        time.sleep(0.05)
    sys.exit(f"error: the detached job under {state} still runs after {timeout:.0f} s")


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """The heavy modules (top-level names in :data:`HEAVY`, and kubemill's engines) that
    ``python -X importtime ARGV`` imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, text=True
    )
    names = {m[4] for m in map(LINE.match, done.stderr.splitlines()) if m}
    prefix = "kubemill.engines."
    engines = {n.split(".")[2] for n in names if n.startswith(prefix) and "." in n[len(prefix) :]}
    found = sorted(n for n in names if n in HEAVY)
    return found + ([f"engines: {', '.join(sorted(engines))}"] if engines else [])


def hot_commands(trees: dict[str, Path], runs: int, work: Path) -> None:
    """``--help``, ``get`` and ``run --detach`` of each tree, rounds interleaved."""
    kubemill = kubemill_command()
    listed = work / "listed"
    manifests = work / "manifests"
    manifests.mkdir()
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    heavy: dict[tuple[str, str], list[str]] = {}
    counter = 0
    kept = {tree: Path(tempfile.mkdtemp(prefix="kept-", dir=work)) for tree in trees}
    """Each tree's state directory that ``run --detach`` (:data:`KEPT`) submits into, run
    after run: the store is made once, as a user's is."""
    floors: dict[str, list[tuple[float, float]]] = {}

    def env_of(src: Path, state: Path) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(src), "KUBEMILL_STATE_DIR": str(state)}
        env.pop("KUBEMILL_SUBSTRATE", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: from bytecode
        return env

    def command(tree: str, what: str) -> tuple[list[str], dict[str, str]]:
        nonlocal counter
        src = trees[tree]
        if what == "--help":
            return [*kubemill, "--help"], env_of(src, listed)
        if what == "get":
            return [*kubemill, "get"], env_of(src, listed)
        counter += 1
        manifest = manifests / f"job-{counter}.yaml"
        manifest.write_text(JOB.format(name=f"job-{counter}"))
        fresh = what != KEPT
        state = Path(tempfile.mkdtemp(prefix="state-", dir=work)) if fresh else kept[tree]
        return [*kubemill, "run", "--detach", str(manifest)], env_of(src, state)

    argv, env = command(next(iter(trees)), "run --detach")
    env["KUBEMILL_STATE_DIR"] = str(listed)
    child_run(argv, env)  # the job `get` lists
    wait_detached(listed)
    whats = ("--help", "get", "run --detach", KEPT)
    for tree in trees:  # warm-up (compiles bytecode), not counted; the heavy modules
        for what in whats:
            argv, env = command(tree, what)
            child_run(argv, env)
            wait_detached(Path(env["KUBEMILL_STATE_DIR"]))
            argv, env = command(tree, what)
            heavy[(tree, what)] = heavy_imports(argv, env)
            wait_detached(Path(env["KUBEMILL_STATE_DIR"]))
    for round_ in range(runs):
        names = list(trees)
        shift = round_ % len(names)
        for tree in names[shift:] + names[:shift]:
            for what in whats:
                argv, env = command(tree, what)
                samples.setdefault((tree, what), []).append(child_run(argv, env))
                wait_detached(Path(env["KUBEMILL_STATE_DIR"]))
        for label, code in FLOORS.items():
            argv = [sys.executable, "-c", code]
            floors.setdefault(label, []).append(child_run(argv, env_of(SRC, listed)))
    print()
    print(f"hot commands, median of {runs} interleaved rounds: wall / CPU of the command")
    print(f"  {'command':<20}" + "".join(f"{tree:>24}" for tree in trees))
    for what in whats:
        cells = ""
        for tree in trees:
            got = samples[(tree, what)]
            wall_s = statistics.median(w for w, _ in got)
            cpu_s = statistics.median(c for _, c in got)
            cells += f"{ms(wall_s)} /{ms(cpu_s)}"
        print(f"  {what:<20}{cells}")
    for tree in trees:
        for what in whats:
            print(f"  heavy modules, {tree}, {what}: {', '.join(heavy[(tree, what)]) or 'none'}")
    floor_cpu = {label: statistics.median(c for _, c in got) for label, got in floors.items()}
    print("  the floor, the same rounds: the interpreter and the libraries each command needs")
    for label, got in floors.items():
        wall_s = statistics.median(w for w, _ in got)
        print(f"  {label:<40}{ms(wall_s)} /{ms(floor_cpu[label])}")
    print()
    print("each command's CPU: its floor (what it cannot do without) and kubemill's own above it")
    print(f"  {'command':<20}{'floor':>10}" + "".join(f"{tree + ': own':>20}" for tree in trees))
    for what in whats:
        label, why = FLOOR_OF[KEPT_AS.get(what, what)]
        cells = ""
        for tree in trees:
            own = statistics.median(c for _, c in samples[(tree, what)]) - floor_cpu[label]
            cells += f"{'+' + ms(own).strip():>20}"
        print(f"  {what:<20}{ms(floor_cpu[label])}{cells}")
        print(f"  {'':<20}  floor: {label}: {why}")
    print(f"  (the interpreter alone, {INTERPRETER}: {ms(floor_cpu[INTERPRETER]).strip()})")
    first = next(iter(trees))
    detach = statistics.median(w for w, _ in samples[(first, "run --detach")])
    detach_cpu = statistics.median(c for _, c in samples[(first, "run --detach")])
    verdict = "meets" if detach <= GOAL_DETACH_SECONDS else "misses"
    print(
        f"  goal: run --detach <= {GOAL_DETACH_SECONDS * 1000:.0f} ms: {verdict}"
        f" (wall {ms(detach).strip()}, CPU {ms(detach_cpu).strip()}; its floor alone"
        f" {ms(floor_cpu[FLOOR_OF['run --detach'][0]]).strip()} CPU)"
    )
    schema_cpu = floor_cpu[SCHEMA]
    print(
        f"  the job's schema alone (yaml, and pydantic making the PyTorchJob's models and"
        f" validating it): {ms(schema_cpu).strip()} CPU, {schema_cpu / GOAL_DETACH_SECONDS:.2f}x"
        f" the goal; run --detach above it: +{ms(detach_cpu - schema_cpu).strip()}"
    )
    typer_cpu = floor_cpu[FLOOR_OF["--help"][0]]
    help_cpu = statistics.median(c for _, c in samples[(first, "--help")])
    if typer_cpu > GOAL_HELP_SECONDS:
        print(
            f"  goal: --help <= {GOAL_HELP_SECONDS * 1000:.0f} ms: below its floor; `import typer`"
            f" alone takes {ms(typer_cpu).strip()} CPU (the interpreter included), and --help"
            f" {ms(help_cpu).strip()}: what is left above typer is kubemill's command tree"
        )
    else:
        verdict = "meets" if help_cpu <= GOAL_HELP_SECONDS else "misses"
        print(f"  goal: --help <= {GOAL_HELP_SECONDS * 1000:.0f} ms (CPU): {verdict}")


BREAKDOWN_PROBE = """\
import atexit, dataclasses, json, sys, time
report_to = sys.argv[1]
started = time.process_time()
spent = {"dataclasses": [0, 0.0], "pydantic models": [0, 0.0], "pydantic plugins": [0, 0.0]}
def timed(what, original):
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[what][0] += 1
            spent[what][1] += time.process_time() - start
    return wrapper
dataclasses._process_class = timed("dataclasses", dataclasses._process_class)
from pydantic._internal import _model_construction as construction
construction.ModelMetaclass.__new__ = staticmethod(
    timed("pydantic models", construction.ModelMetaclass.__new__)
)
from pydantic.plugin import _loader
_loader.get_plugins = timed("pydantic plugins", _loader.get_plugins)
def report():
    with open(report_to, "w") as out:
        json.dump({"cpu": time.process_time() - started, **spent}, out)
atexit.register(report)
sys.argv = ["kubemill", *sys.argv[2:]]
from kubemill.cli import main
main()
"""
"""Runs ``kubemill ARGS...`` as the console script does, timing every dataclass and every
pydantic model class made on the way (CPU), and writes them with the process's CPU time
after the interpreter's start to the file named first."""


WHAT_IS_MADE = {
    "dataclasses": "dataclasses made (classes, CPU)",
    "pydantic models": "pydantic models made (classes, CPU)",
    # Every schema validator asks for pydantic's plugins; the first ask reads every
    # installed distribution's entry points, through importlib.metadata (whose import the
    # probe makes beforehand: it counts under importlib). PYDANTIC_DISABLE_PLUGINS skips
    # both, but a job's processes would inherit it from the command.
    "pydantic plugins": "pydantic plugin look-ups (calls, CPU)",
}


def group_of(module: str) -> str:
    """The package a module's import time is counted under: kubemill's second level (its
    engines' and substrates' third), another distribution's top level."""
    parts = module.split(".")
    if parts[0] != "kubemill" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[: 3 if parts[1] in ("engines", "substrates") else 2])


def breakdown(trees: dict[str, Path], runs: int, work: Path, top: int) -> None:
    """Where ``run --detach``'s CPU goes, tree by tree (the least of ``runs`` each): the
    process's CPU after the interpreter's start, the classes it makes (dataclasses,
    pydantic models) and the own import time of each package, which includes them."""
    found: dict[str, dict[str, float]] = {}
    made: dict[str, dict[str, tuple[int, float]]] = {}
    for tree, src in trees.items():
        least: dict[str, int] = {}
        cpu: list[float] = []
        for run in range(runs):
            manifest = work / f"breakdown-{run}.yaml"
            manifest.write_text(JOB.format(name=f"breakdown-{run}"))
            state = Path(tempfile.mkdtemp(prefix="state-", dir=work))
            report = work / "breakdown.json"
            env = {**os.environ, "PYTHONPATH": str(src), "KUBEMILL_STATE_DIR": str(state)}
            env.pop("KUBEMILL_SUBSTRATE", None)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            argv = [sys.executable, "-X", "importtime", "-c", BREAKDOWN_PROBE, str(report)]
            argv += ["run", "--detach", str(manifest)]
            done = subprocess.run(argv, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"error: {argv} failed:\n{done.stderr[-2000:]}")
            for match in map(LINE.match, done.stderr.splitlines()):
                if match:
                    name, own = match[4], int(match[1])
                    least[name] = min(least.get(name, own), own)
            wait_detached(state)
            got = json.loads(report.read_text())
            cpu.append(got["cpu"])
            for what in WHAT_IS_MADE:
                count, seconds = got[what]
                best = made.setdefault(tree, {}).get(what)
                if best is None or seconds < best[1]:
                    made[tree][what] = (count, seconds)
        groups: dict[str, float] = {"(CPU after the interpreter's start)": min(cpu)}
        for name, own in least.items():
            groups[group_of(name)] = groups.get(group_of(name), 0.0) + own / 1e6
        found[tree] = groups
    print()
    print(f"where run --detach's CPU goes (least of {runs} runs):")
    print(f"  {'':<44}" + "".join(f"{tree:>20}" for tree in trees))
    for what, label in WHAT_IS_MADE.items():
        cells = "".join(f"{made[t][what][0]:>6} in{ms(made[t][what][1])}" for t in trees)
        print(f"  {label:<44}{cells}")
    first = found[next(iter(trees))]
    ranked = sorted(set().union(*found.values()), key=lambda g: -first.get(g, 0.0))
    print("  own import time by package (including the classes made on import):")
    for name in ranked[: top + 1]:
        cells = "".join(f"{ms(found[t].get(name, 0.0)):>20}" for t in trees)
        print(f"    {name:<42}{cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--module", default="kubemill.cli")
    parser.add_argument("--top", type=int, default=12, help="how many slowest modules to list")
    parser.add_argument("--baseline", type=Path, help="another src tree, measured beside")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    alone: list[float] = []
    for _ in range(args.runs):
        _, modules = importtime(["-c", f"import {args.module}"])
        alone.append(modules[args.module][1] / 1e6)
    print(f"python -X importtime -c 'import {args.module}' ({args.runs} runs)")
    print(f"  cumulative import time of {args.module}: {spread(alone)}")

    totals: list[float] = []
    for _ in range(args.runs):
        total, modules = importtime([*kubemill_command(), "--help"])
        totals.append(total)
    print(f"python -X importtime $(which kubemill) --help ({args.runs} runs)")
    print(f"  all imports, including the interpreter's own: {spread(totals)}")
    print(f"  {len(modules)} modules imported; largest own import time (last run):")
    for name, (own, total_us) in sorted(modules.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"    {own / 1000:7.1f} ms own {total_us / 1000:8.1f} ms cumulative  {name}")
    heavy = sorted(m for m in modules if m in HEAVY)
    print(f"  heavy modules imported: {', '.join(heavy) if heavy else 'none'}")

    help_argv = [*kubemill_command(), "--help"]
    baseline_argv = [sys.executable, "-c", "pass"]
    wall(help_argv)  # warm the file cache once; not counted
    helps: list[float] = []
    baselines: list[float] = []
    for _ in range(args.runs):
        helps.append(wall(help_argv))
        baselines.append(wall(baseline_argv))
    help_median, base_median = statistics.median(helps), statistics.median(baselines)
    print()
    print(f"wall time, median of {args.runs} interleaved runs")
    print(f"  python -c pass   {ms(base_median)}")
    print(f"  kubemill --help  {ms(help_median)}")
    print(f"  difference       {ms(help_median - base_median)} (kubemill's own start-up)")
    verdict = "meets" if help_median < GOAL_HELP_SECONDS else "misses"
    print(f"  goal: kubemill --help < {GOAL_HELP_SECONDS * 1000:.0f} ms: {verdict}")

    trees = {"this tree": SRC}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    with tempfile.TemporaryDirectory(prefix="import-time-") as tmp:
        breakdown(trees, max(3, args.runs // 3), Path(tmp), args.top)
        hot_commands(trees, args.runs, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
