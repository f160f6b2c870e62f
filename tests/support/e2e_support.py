"""Helpers of the end-to-end tests: the real ``kubemill`` CLI against a private state dir.

The examples run exactly as a user runs them (``kubemill run examples/...yaml``), from a
working directory that is not the repository, so the manifest-relative paths are tested
too. Every process a test's jobs start carries a token in its environment, so a test can
check that none outlives its job; whatever is left is deleted through the CLI (and any
process still carrying the token is killed) at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
KUBEMILL = Path(sys.executable).with_name("kubemill")
TOKEN_VAR = "KUBEMILL_E2E_TOKEN"
RUN_TIMEOUT = 300.0
"""Seconds before a hung ``kubemill run`` is given up on (the examples take seconds)."""


@dataclass
class Cli:
    """The real ``kubemill`` console script, run in a subprocess with one state directory."""

    state_dir: Path
    cwd: Path
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Marks every process started through this CLI (see :func:`processes_with_token`)."""

    @property
    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "KUBEMILL_STATE_DIR": str(self.state_dir),
            # No user config: every image means this interpreter's environment.
            "XDG_CONFIG_HOME": str(self.cwd.parent / "config"),
            TOKEN_VAR: self.token,
        }
        for inherited in ("KUBEMILL_SUBSTRATE", "KUBEMILL_CONFIG"):
            env.pop(inherited, None)
        return env

    def __call__(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBEMILL), *args],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def run(self, manifest: Path) -> subprocess.CompletedProcess[str]:
        """``kubemill run MANIFEST`` in the foreground, until the job ends."""
        return self("run", str(manifest), timeout=RUN_TIMEOUT)

    def job_names(self) -> list[str]:
        done = self("get", "-o", "json")
        if done.returncode != 0:
            return []
        return [item["metadata"]["name"] for item in json.loads(done.stdout).get("items", [])]


def processes_with_token(token: str) -> dict[int, str]:
    """Live (non-zombie) processes whose environment carries ``KUBEMILL_E2E_TOKEN=token``.

    Replicas inherit the environment of the ``kubemill`` that started them, so this finds
    every process a test's jobs started (supervisors included), whether or not the local
    substrate still records its PID.
    """
    needle = f"{TOKEN_VAR}={token}".encode()
    found: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state != "Z":
            found[int(proc.name)] = cmdline.strip()
    return found


@contextmanager
def fresh_cli(tmp_path: Path) -> Iterator[Cli]:
    """The CLI with a fresh state directory and working directory under ``tmp_path``; at
    the end it deletes every job left, and kills any process still carrying its token."""
    state_dir, workdir = tmp_path / "state", tmp_path / "cwd"
    state_dir.mkdir()
    workdir.mkdir()
    runner = Cli(state_dir=state_dir, cwd=workdir)
    try:
        yield runner
    finally:
        for name in runner.job_names():
            runner("delete", name)
        for pid in processes_with_token(runner.token):  # never leave a process behind
            os.kill(pid, signal.SIGKILL)
