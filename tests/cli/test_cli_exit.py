"""The console script ends at once after a command (no interpreter teardown), and loses
nothing by it: exit handlers run, output is flushed, exit codes are kept, and a thread
still working (a supervisor) is waited for as usual."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import atexit, sys, threading, time
from kubemill.cli import main
atexit.register(lambda: print("exit handler ran", flush=True))
if "--busy-thread" in sys.argv:
    sys.argv.remove("--busy-thread")
    def work():
        time.sleep(0.5)
        print("thread finished", flush=True)
    threading.Thread(target=work).start()
sys.argv[0] = "kubemill"
main()
"""


def console(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(tmp_path / "state")}
    env.pop("KUBEMILL_SUBSTRATE", None)
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_output_and_exit_handlers_survive_the_quick_exit(tmp_path: Path) -> None:
    done = console(tmp_path, "version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("kubemill ")
    assert done.stdout.rstrip().endswith("exit handler ran")


def test_an_error_keeps_its_exit_code_and_message(tmp_path: Path) -> None:
    done = console(tmp_path, "get", "no-such-job")
    assert done.returncode == 1
    assert "no job 'no-such-job'" in done.stderr
    assert "exit handler ran" in done.stdout


def test_a_thread_still_working_is_waited_for(tmp_path: Path) -> None:
    done = console(tmp_path, "--busy-thread", "version")
    assert done.returncode == 0, done.stderr
    assert "thread finished" in done.stdout
    assert "exit handler ran" in done.stdout
