"""A stand-in for Mars's ``mars-supervisor`` and ``mars-worker``, for testing what
``kubemill.deploy.local`` does with the processes rather than what Mars does.

Installed as both commands in a fake environment's ``bin/``. The supervisor serves Mars's
``/api/cluster/nodes`` on its web port and lists as ready the workers that have registered
(a file each in ``$FAKE_MARS_REGISTRY``); a worker registers, starts a child (as Mars's
sub-pools are) and waits. ``FAKE_MARS_MODE``: ``crash`` makes workers fail, ``shy`` keeps
them from registering. Each records its TMPDIR and argv in its registry file.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

SHOWN = {"MARS_SPILL_DIRS", "MARS_CACHE_MEM_SIZE", "OMP_NUM_THREADS", "KUBEMILL_MARS_CLUSTER", "X"}
"""The environment variables a worker reports."""


def arg(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def supervisor(argv: list[str], registry: Path) -> None:
    web = int(arg(argv, "-w"))

    class Nodes(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            role = parse_qs(urlparse(self.path).query).get("role", ["1"])[0]
            if role == "0":
                nodes = {f"127.0.0.1:{arg(argv, '-p')}": {"status": 1}}
            else:
                nodes = {p.name: {"status": 1} for p in registry.glob("worker-*")}
            body = json.dumps({"nodes": nodes}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    (registry / f"supervisor-{os.getpid()}").write_text(
        json.dumps({"tmpdir": os.environ.get("TMPDIR"), "argv": argv})
    )
    server = http.server.HTTPServer(("127.0.0.1", web), Nodes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    child.wait()


def worker(argv: list[str], registry: Path, mode: str) -> None:
    if mode == "crash":
        print("boom: this worker cannot start", flush=True)
        sys.exit(3)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(0.3)
    if mode != "shy":
        (registry / f"worker-{arg(argv, '-p')}").write_text(
            json.dumps(
                {
                    "tmpdir": os.environ.get("TMPDIR"),
                    "argv": argv,
                    "child": child.pid,
                    "env": {k: v for k, v in os.environ.items() if k in SHOWN},
                }
            )
        )
    child.wait()


def main() -> None:
    registry = Path(os.environ["FAKE_MARS_REGISTRY"])
    mode = os.environ.get("FAKE_MARS_MODE", "")
    if Path(sys.argv[0]).name == "mars-supervisor":
        supervisor(sys.argv[1:], registry)
    else:
        worker(sys.argv[1:], registry, mode)


if __name__ == "__main__":
    main()
