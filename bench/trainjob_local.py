"""What does running a 2-node torch TrainJob through kubemill's local substrate cost?

Runs the same program, ``examples/trainjob/allreduce.py`` under ``torchrun`` on each of two
nodes (one process each, a gloo all-reduce), two ways, interleaved round by round (the
order alternates so that neither always runs first on a warm or cold cache):

- ``kubemill``: ``kubemill run examples/trainjob/trainjob.yaml`` in the foreground, with a
  fresh state directory per run: the TrainJob is resolved against the ``torch-distributed``
  runtime and its nodes get ``PET_*`` from the planner;
- ``by hand``: two ``torchrun allreduce.py`` processes started directly, with the
  ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` and
  ``PET_MASTER_PORT`` a user would have to set themselves;
- ``function`` (with ``--function``): the function form, ``python
  examples/trainjob/train_function.py``: ``JobClient.train`` of a function doing the same
  all-reduce on two nodes, through a detached supervisor, waited for, its logs read.

- ``kubeflow SDK`` (with ``--sdk``): the same function through the Kubeflow SDK's own local
  backend (``TrainerClient`` with ``LocalProcessBackendConfig``, ``bench/kubeflow_sdk_local.py``)
  in a separate virtualenv (``--sdk-venv``, default under /tmp; ``kubeflow`` is pip-installed
  there when missing, never into kubemill's). For each job the backend creates a virtualenv
  and pip-installs the runtime's packages (torch, through pip's cache), then runs one node
  only: the table says how many nodes each way ran. If the SDK cannot be installed, the
  bench says why and measures nothing for it. kubemill installs nothing per job.

The figure is the wall time from starting the launcher(s) until every process has exited
and both nodes printed ``ok=True``; it prints the median (and min-max) of each over
``--runs`` rounds side by side and the ratio kubemill / by hand (issue 19's goal: <= 1.05).
Run on demand, never from the test suite::

    python bench/trainjob_local.py --runs 5
    python bench/trainjob_local.py --runs 3 --sdk
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "trainjob"
MANIFEST = EXAMPLE / "trainjob.yaml"
NODES = 2
ARGS = ["--timeout", "120"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def beside_python(name: str) -> str:
    """A console script of this interpreter's environment (``kubemill``, ``torchrun``)."""
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        sys.exit(f"error: {name} is not installed in this environment")
    return str(path)


def run_kubemill(workdir: Path) -> str:
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(workdir / "state")}
    done = subprocess.run(
        [beside_python("kubemill"), "run", str(MANIFEST)],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"kubemill run failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def run_by_hand(workdir: Path) -> str:
    port = str(free_port())
    processes = []
    for rank in range(NODES):
        env = {
            **os.environ,
            "PET_NNODES": str(NODES),
            "PET_NPROC_PER_NODE": "1",
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": "127.0.0.1",
            "PET_MASTER_PORT": port,
        }
        processes.append(
            subprocess.Popen(
                [beside_python("torchrun"), "allreduce.py", *ARGS],
                env=env,
                cwd=EXAMPLE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate()[0] for p in processes]
    if any(p.returncode != 0 for p in processes):
        sys.exit("torchrun by hand failed:\n" + "\n".join(outputs))
    return "\n".join(outputs)


def run_function(workdir: Path) -> str:
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(workdir / "state")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "train_function.py")],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"the function form failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


SDK_VERSION = "0.5.0"
DEFAULT_SDK_VENV = Path(tempfile.gettempdir()) / "kubemill-bench-kubeflow-sdk"


def sdk_python(venv: Path) -> tuple[str | None, str]:
    """The interpreter of a virtualenv with the Kubeflow SDK (created and installed into when
    missing), or None and why it could not be had."""
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import kubeflow.trainer"]
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return str(python), ""
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", f"kubeflow=={SDK_VERSION}"],
        check,
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return None, f"{' '.join(argv[:4])} failed: {' | '.join(tail)}"
    return str(python), ""


def sdk_runner(python: str) -> Callable[[Path], str]:
    def run_sdk(workdir: Path) -> str:
        # The SDK's own environment only (its jobs get none of ours: the backend starts them
        # with the trainer's env alone); `python` on PATH is the one it makes venvs from.
        env = {
            "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", str(workdir)),
            "TMPDIR": str(workdir),
        }
        done = subprocess.run(
            [python, str(ROOT / "bench" / "kubeflow_sdk_local.py"), str(NODES)],
            env=env,
            cwd=workdir,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"the Kubeflow SDK's local backend failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    return run_sdk


def timed_run(run: Callable[[Path], str], *, all_nodes: bool = True) -> tuple[float, int]:
    """Wall seconds and how many nodes printed ok=True (every one, unless ``all_nodes`` is
    False: the SDK's local backend runs one)."""
    with tempfile.TemporaryDirectory(prefix="trainjob-bench-") as tmp:
        start = time.perf_counter()
        output = run(Path(tmp))
        wall = time.perf_counter() - start
    nodes = output.count("ok=True")
    if nodes != NODES and (all_nodes or nodes == 0):
        sys.exit(f"expected {NODES} nodes to print ok=True:\n{output}")
    return wall, nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--function", action="store_true", help="also the function form")
    parser.add_argument(
        "--sdk",
        action="store_true",
        help="also the function form through the Kubeflow SDK's local backend (implies --function)",
    )
    parser.add_argument("--sdk-venv", type=Path, default=DEFAULT_SDK_VENV)
    args = parser.parse_args()
    ways: dict[str, Callable[[Path], str]] = {"kubemill": run_kubemill, "by hand": run_by_hand}
    if args.function or args.sdk:
        ways["function"] = run_function
    sdk_missing = ""
    if args.sdk:
        python, sdk_missing = sdk_python(args.sdk_venv)
        if python is not None:
            ways["kubeflow SDK"] = sdk_runner(python)
    walls: dict[str, list[float]] = {name: [] for name in ways}
    nodes: dict[str, int] = {}
    for round_ in range(args.runs):
        order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
        for name in order:
            wall, nodes[name] = timed_run(ways[name], all_nodes=name != "kubeflow SDK")
            walls[name].append(wall)
            print(f"round {round_ + 1}: {name:12} {wall:.2f} s", file=sys.stderr)
    print(f"{'launcher':13} {'nodes':>5} {'median s':>9} {'min-max s':>13}")
    for name, values in walls.items():
        low, high = min(values), max(values)
        print(f"{name:13} {nodes[name]:5} {statistics.median(values):9.2f} {low:6.2f}-{high:.2f}")
    ratio = statistics.median(walls["kubemill"]) / statistics.median(walls["by hand"])
    print(f"kubemill / by hand: {ratio:.3f} (goal <= 1.05)")
    if "function" in walls:
        ratio = statistics.median(walls["function"]) / statistics.median(walls["by hand"])
        print(f"function / by hand: {ratio:.3f}")
    if "kubeflow SDK" in walls:
        ratio = statistics.median(walls["kubeflow SDK"]) / statistics.median(walls["function"])
        print(
            f"kubeflow SDK local / kubemill function: {ratio:.3f} (the SDK ran "
            f"{nodes['kubeflow SDK']} of {NODES} nodes, after a venv and a torch install)"
        )
    elif args.sdk:
        print(f"kubeflow SDK local backend: not measured: {sdk_missing}")


if __name__ == "__main__":
    main()
