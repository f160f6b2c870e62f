"""The function form through the Kubeflow SDK's own local backend, for bench/trainjob_local.py.

Run by that bench with the interpreter of a separate virtualenv that has ``kubeflow``
installed (never kubemill's): ``TrainerClient(backend_config=LocalProcessBackendConfig())``
trains ``allreduce`` of ``examples/trainjob/train_function.py`` (the very function the
kubemill side runs, its source read from that file, as kubemill does not import here) on
upstream's ``torch-distributed`` runtime with ``packages_to_install=["torch"]``, as a
Kubeflow user would, waits for it to complete and prints its log. The backend creates a
virtualenv for the job and pip-installs torch into it (from the package index, through
pip's cache), then runs one node: the bench reports the nodes it saw.

    <venv>/bin/python bench/kubeflow_sdk_local.py 2
"""

from __future__ import annotations

import ast
import importlib
import sys
import tempfile
import time
from pathlib import Path

FUNCTION_FILE = Path(__file__).resolve().parent.parent / "examples/trainjob/train_function.py"
FUNCTION = "allreduce"


def load_function(folder: Path) -> object:
    """``allreduce`` from the example, as its own module (the SDK reads a function's
    source with inspect, so it must come from a file)."""
    text = FUNCTION_FILE.read_text(encoding="utf-8")
    node = next(
        n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION
    )
    source = ast.get_source_segment(text, node)
    assert source is not None
    (folder / "kubeflow_bench_function.py").write_text(source + "\n", encoding="utf-8")
    sys.path.insert(0, str(folder))
    return importlib.import_module("kubeflow_bench_function").allreduce


def main(nodes: int) -> int:
    from kubeflow.trainer import CustomTrainer, LocalProcessBackendConfig, TrainerClient

    with tempfile.TemporaryDirectory(prefix="kubeflow-bench-") as tmp:
        func = load_function(Path(tmp))
        client = TrainerClient(backend_config=LocalProcessBackendConfig(cleanup_venv=True))
        start = time.perf_counter()
        name = client.train(
            runtime=client.get_runtime("torch-distributed"),
            # No func_args: this backend passes them as one positional dict (allreduce's
            # `base` would be the dict); its default, 1, is what the kubemill side passes.
            trainer=CustomTrainer(
                func=func,
                num_nodes=nodes,
                packages_to_install=["torch"],
            ),
        )
        job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=1800)
        wall = time.perf_counter() - start
        for line in client.get_job_logs(name):
            print(line, end="" if line.endswith("\n") else "\n")
        print(f"status={job.status} wall={wall:.2f}")
        return 0 if job.status == "Complete" else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
