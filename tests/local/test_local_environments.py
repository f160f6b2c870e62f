"""Images name local Python environments: a real second virtualenv, chosen by the config file.

Two replicas of one job run under two interpreters (the default one and a venv mapped in
the config), which is how engines with conflicting pins coexist on one machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from local_support import container, log_text, pytorch_job

from kubemill.substrates.base import SubmitOptions
from kubemill.substrates.local import LocalBackend, SupervisorOptions

SHOW_PREFIX = "import json, sys; print(json.dumps({'prefix': sys.prefix}), flush=True)"
# The job succeeds when the master does, so the master waits until the worker has spoken.
WAIT_FOR_WORKER = "import os, time\nwhile not os.path.exists('worker-done'): time.sleep(0.01)\n"


def test_an_image_mapped_in_the_config_runs_in_that_venv(isolated: Path) -> None:
    venv = isolated / "other-env"
    # --without-pip: a real interpreter environment in about a second, nothing downloaded.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    config = isolated / "config.yaml"
    config.write_text(f"images:\n  'team/other:*': {venv}\n")
    backend = LocalBackend(
        isolated / "state", config_path=config, supervisor_options=SupervisorOptions()
    )
    job = pytorch_job(
        "two-envs",
        master=container(WAIT_FOR_WORKER + SHOW_PREFIX, image="team/other:1.0"),
        worker=container(SHOW_PREFIX + "; open('worker-done', 'w').close()", image="other"),
    )
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(isolated)))
    try:
        done = backend.wait("two-envs", timeout=120)
        assert done.phase == "Succeeded", done.status
        master = json.loads(log_text(backend, "two-envs", "master-0"))
        worker = json.loads(log_text(backend, "two-envs", "worker-0"))
        assert Path(master["prefix"]) == venv
        assert Path(worker["prefix"]) == Path(sys.prefix)
    finally:
        backend.delete("two-envs")
