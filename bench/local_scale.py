"""How do ``kubemill get`` and detached submission scale with the jobs in history?

For each history size (10, 100 and 1000 finished jobs by default) in a fresh state
directory, measures with the real ``kubemill`` console script, as a user would run it:

- ``get`` latency: wall time of ``kubemill get`` (every job listed), start-up included;
- detached submission: wall time of ``kubemill run --detach`` of a one-replica job, per
  job (the job itself, ``python -c pass``, runs on in the background), start-up included;
- the same submission from the SDK (``JobClient.submit(detach=True)`` in one process):
  what a submission itself costs -- validate, plan, record, start the supervisor --
  without an interpreter start and the import of typer, pydantic and the job models,
  which bound the command's figure from below.

The history is one real job, run to completion, recorded again under new names straight
into the state database (running a thousand jobs would measure the jobs, not the
history). Prints the medians (and min-max) side by side with the issue's goals (``get``
<= 0.1 s at 1000 jobs, submit <= 0.1 s per job) and whether each is met. Run on demand,
never from the test suite::

    python bench/local_scale.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from kubemill.sdk import JobClient
from kubemill.substrates.local.store import NewJob, Store, listing_fields

GOAL_GET = 0.1
GOAL_SUBMIT = 0.1


def manifest(name: str, argv: Sequence[str] = ("python", "-c", "pass")) -> dict[str, Any]:
    """A one-replica PyTorchJob named ``name`` running ``argv``."""
    container = {"name": "pytorch", "image": "local", "command": list(argv)}
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
            }
        },
    }


def kubemill_command() -> list[str]:
    """The ``kubemill`` console script of this interpreter's environment."""
    script = Path(sys.executable).parent / "kubemill"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kubemill.cli"]


def fill_history(state: Path, size: int) -> None:
    """``size`` finished jobs: one run for real, the rest recorded as copies of it."""
    client = JobClient(state_dir=state)
    seed = client.run(manifest("history-0"), timeout=120)
    assert seed.phase == "Succeeded", seed.phase
    store = Store(state)
    rec = store.job("default", "history-0")
    replicas = store.replicas(rec.uid)
    wanted, ttl = listing_fields(rec.load_job())
    for index in range(1, size):
        name = f"history-{index}"
        uid = str(uuid.uuid4())
        wire = dict(rec.manifest)
        wire["metadata"] = {**rec.manifest["metadata"], "name": name, "uid": uid}
        store.insert_job(
            NewJob(
                uid=uid,
                namespace=rec.namespace,
                name=name,
                kind=rec.kind,
                manifest=wire,
                status=rec.status,
                base_dir=rec.base_dir,
                job_dir=str(Path(rec.job_dir).with_name(f"{name}-{uid[:8]}")),
                environments=rec.environments,
                replicas=[
                    replace(r, job_uid=uid, name=r.name.replace("history-0", name))
                    for r in replicas
                ],
                ports={},
                supervisor_mode="detached",
                wanted=wanted,
                ttl=ttl,
            )
        )
        store.set_status(uid, rec.status, finished=True)
        store.set_supervisor_state(uid, "done")


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


@dataclass
class Figures:
    """The samples of one history size."""

    gets: list[float]
    submits: list[float]
    sdk_submits: list[float]


def measure(size: int, runs: int, work: Path) -> Figures:
    state = work / f"state-{size}"
    fill_history(state, size)
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(state)}
    command = kubemill_command()
    # One listing first, not counted: it migrates nothing, but warms the page cache.
    timed([*command, "get"], env, work)
    gets = [timed([*command, "get"], env, work) for _ in range(runs)]
    submits = []
    names = []
    for index in range(runs):
        path = work / f"submit-{size}-{index}.yaml"
        path.write_text(yaml.safe_dump(manifest(f"submit-{index}")))
        submits.append(timed([*command, "run", "--detach", str(path)], env, work))
        names.append(f"submit-{index}")
    client = JobClient(state_dir=state)
    sdk_submits = []
    for index in range(runs):
        start = time.perf_counter()
        client.submit(manifest(f"sdk-{index}"), detach=True, base_dir=str(work))
        sdk_submits.append(time.perf_counter() - start)
        names.append(f"sdk-{index}")
    for name in names:
        # Let each detached supervisor finish before the state directory goes.
        client.wait(name, timeout=120)
    return Figures(gets, submits, sdk_submits)


def summary(samples: list[float]) -> str:
    return f"{statistics.median(samples):.3f} ({min(samples):.3f}-{max(samples):.3f})"


def goal_cell(samples: list[float], goal: float) -> str:
    """``<=0.1 met`` or ``<=0.1 missed``: the goal beside the median it judges."""
    met = statistics.median(samples) <= goal
    return f"<={goal} {'met' if met else 'missed'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="samples per figure")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[10, 100, 1000], help="jobs in history"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kubemill-scale-"))
    rows: list[tuple[int, Figures]] = []
    try:
        for size in args.sizes:
            rows.append((size, measure(size, args.runs, work)))
            print(f"measured {size} jobs in history", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"median (min-max) of {args.runs} runs each, seconds; goals from issue 7")
    header = (
        f"{'history':>7}  {'kubemill get':<22} {'goal':<12}  {'run --detach, per job':<22}"
        f" {'goal':<12}  {'SDK submit, per job':<22} {'goal':<12}"
    )
    print(header)
    print("-" * len(header))
    for size, fig in rows:
        # The get goal is set at 1000 jobs; smaller histories show the trend.
        get_goal = goal_cell(fig.gets, GOAL_GET) if size >= 1000 else "-"
        print(
            f"{size:>7}  {summary(fig.gets):<22} {get_goal:<12}  {summary(fig.submits):<22}"
            f" {goal_cell(fig.submits, GOAL_SUBMIT):<12}  {summary(fig.sdk_submits):<22}"
            f" {goal_cell(fig.sdk_submits, GOAL_SUBMIT):<12}"
        )
    print(
        "`run --detach` includes the command's interpreter start and its imports (typer,"
        " pydantic, the job models); the SDK's submit is the submission itself"
    )


if __name__ == "__main__":
    main()
