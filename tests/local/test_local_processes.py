"""Process handling of the local kubelet under abuse (issue 7): restarts only the core allows.

Real processes throughout; replicas coordinate through files in the test's ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

from local_support import SLEEPER, pytorch_job

from kubemill.api import ConditionType
from kubemill.substrates.base import JobView, SubmitOptions
from kubemill.substrates.local import LocalBackend

COUNT_RUN = (
    "import os\n"
    "runs = int(open('{name}').read()) + 1 if os.path.exists('{name}') else 1\n"
    "open('{name}.tmp', 'w').write(str(runs))\n"
    "os.replace('{name}.tmp', '{name}')\n"
)


def run(backend: LocalBackend, job: object, tmp_path: Path, *, detach: bool = False) -> JobView:
    view = backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))  # type: ignore[arg-type]
    done = backend.wait(view.name, timeout=120)
    assert done.finished, f"{view.name} did not finish: {done.status}"
    return done


def test_on_failure_never_starts_a_run_past_the_backoff_limit(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job(
        "limit",
        master=SLEEPER,
        worker=COUNT_RUN.format(name="runs") + "raise SystemExit(3)",
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 2},
    )
    view = run(backend, job, tmp_path)
    failed = view.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    # One run and two restarts; the third failure is judged before any fourth run.
    assert (tmp_path / "runs").read_text() == "3"
    worker = next(r for r in view.replicas if r.name.endswith("worker-0"))
    # The last real exit, not the SIGTERM of a run started only to be stopped.
    assert (worker.phase, worker.exit_code) == ("Failed", 3)
    assert worker.restarts == 3
