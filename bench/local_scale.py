"""How do ``kubemill get`` and detached submission scale with the jobs in history?

For each history size (10, 100 and 1000 finished jobs by default) in a fresh state
directory, measures with the real ``kubemill`` console script, as a user would run it:

- ``get`` latency: wall time of ``kubemill get`` (every job listed), start-up included;
- detached submission: wall time of ``kubemill run --detach`` of a one-replica job, per
  job (the job itself, ``python -c pass``, runs on in the background).

The history is one real job, run to completion, recorded again under new names straight
into the state database (running a thousand jobs would measure the jobs, not the
history). Prints the medians (and min-max) side by side with the issue's goals:
``get`` <= 0.1 s at 1000 jobs, submit <= 0.1 s per job. Run on demand, never from the
test suite::

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
from dataclasses import replace
from pathlib import Path

import yaml

from kubemill.sdk import JobClient
from kubemill.substrates.local.store import NewJob, Store, listing_fields

GOAL_GET = 0.1
GOAL_SUBMIT = 0.1


def manifest(name: str) -> dict[str, object]:
    container = {"name": "pytorch", "image": "local", "command": ["python", "-c", "pass"]}
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


def measure(size: int, runs: int, work: Path) -> tuple[list[float], list[float]]:
    state = work / f"state-{size}"
    fill_history(state, size)
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(state)}
    command = kubemill_command()
    gets = [timed([*command, "get"], env, work) for _ in range(runs)]
    submits = []
    for index in range(runs):
        path = work / f"submit-{size}-{index}.yaml"
        path.write_text(yaml.safe_dump(manifest(f"submit-{index}")))
        submits.append(timed([*command, "run", "--detach", str(path)], env, work))
    client = JobClient(state_dir=state)
    for index in range(runs):
        # Let each detached supervisor finish before the state directory goes.
        client.wait(f"submit-{index}", timeout=120)
    return gets, submits


def summary(samples: list[float]) -> str:
    return f"{statistics.median(samples):.3f} ({min(samples):.3f}-{max(samples):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="samples per figure")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[10, 100, 1000], help="jobs in history"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kubemill-scale-"))
    rows = []
    try:
        for size in args.sizes:
            gets, submits = measure(size, args.runs, work)
            rows.append((size, summary(gets), summary(submits)))
            print(f"measured {size} jobs in history", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'history':>8}  {'kubemill get, s':<24}  {'run --detach, s per job':<24}")
    for size, get, submit in rows:
        print(f"{size:>8}  {get:<24}  {submit:<24}")
    print(f"goals: get <= {GOAL_GET} s at 1000 jobs; submit <= {GOAL_SUBMIT} s per job")
    print(f"median (min-max) of {args.runs} runs each")


if __name__ == "__main__":
    main()
