"""How fast does the ``kubemill`` command start?

Two measurements, on demand (never from the test suite)::

    python bench/import_time.py --runs 15

1. Import time, from ``python -X importtime``: of ``import kubemill.cli`` alone, and of
   everything ``kubemill --help`` imports (the console script run under ``-X importtime``;
   ``kubemill.cli`` itself defers the command tree to its ``main``). For the latter it
   lists the modules with the largest own import time and whether any heavy module
   (engines, the kubernetes client, pydantic, rich, ...) was imported; the CLI is meant to
   import those lazily, inside the commands that need them.
2. Wall time of ``kubemill --help`` against ``python -c pass`` (the interpreter's own
   start-up), both median of N runs, interleaved. The issue's goal: ``kubemill --help``
   under 150 ms.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
GOAL_HELP_SECONDS = 0.150
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--module", default="kubemill.cli")
    parser.add_argument("--top", type=int, default=12, help="how many slowest modules to list")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
