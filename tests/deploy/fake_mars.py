"""A stand-in for the Mars environment's ``python``, for testing what
``kubemill.deploy.local.new_cluster`` does with the cluster's job rather than what Mars does.

Installed as ``bin/python`` of a fake environment, it answers the one command a cluster's
replicas run, ``python -m kubemill.engines.mars.pod.entrypoint supervisor|worker``, as the
entrypoint's contract says: it writes the readiness file (``KUBEMILL_MARS_READY_FILE``) once
"up", removes it and exits 0 on SIGTERM. Each starts a child first (as Mars's sub-pools are)
and records its pid, its child's and its Mars environment in ``$FAKE_MARS_REGISTRY/<role>-<pid>``.
``FAKE_MARS_MODE``: ``crash`` makes workers exit 3 at once, saying so; ``shy`` keeps them from
ever getting ready.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SHOWN = ("MARS_", "KUBEMILL_MARS_", "PYTHONPATH", "X")
"""The environment variables a replica reports (by prefix)."""


def main() -> int:
    if sys.argv[1:3] != ["-m", "kubemill.engines.mars.pod.entrypoint"] or len(sys.argv) != 4:
        sys.stderr.write(f"fake Mars python: unexpected command {sys.argv[1:]}\n")
        return 2
    role = sys.argv[3]
    mode = os.environ.get("FAKE_MARS_MODE", "")
    if role == "worker" and mode == "crash":
        print("boom: this worker cannot start", flush=True)
        return 3
    ready = Path(os.environ["KUBEMILL_MARS_READY_FILE"])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    registry = Path(os.environ["FAKE_MARS_REGISTRY"])
    (registry / f"{role}-{os.getpid()}").write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "child": child.pid,
                "env": {k: v for k, v in os.environ.items() if k.startswith(SHOWN)},
            }
        )
    )

    def stop(signum: int, frame: object) -> None:
        ready.unlink(missing_ok=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    time.sleep(0.2)
    if not (role == "worker" and mode == "shy"):
        ready.parent.mkdir(parents=True, exist_ok=True)
        ready.write_text("ready\n")
    while True:
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
