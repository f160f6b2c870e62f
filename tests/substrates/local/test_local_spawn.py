"""Starting a process tied to its supervisor (``spawn.start_tied``): it dies with the thread
that started it, even when the whole supervisor is SIGKILLed and nobody kills its group;
it never runs when its supervisor died before the death signal was set; it runs on its
cores from the start; and a program that cannot run raises as ``Popen`` does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.substrates.local import procinfo, spawn
from kubemill.substrates.local.spawn import start_tied, tied_argv

STARTER = textwrap.dedent(
    """
    import os, sys, threading, time
    from kubemill.substrates.local.spawn import start_tied

    def start():
        child = start_tied(
            ["sleep", "300"], env=None, cwd=None, stdin=None, stdout=None, stderr=None
        )
        # Past setpriv and the shell: the death signal is set (see spawn's docstring for
        # a thread that ends sooner).
        comm = f"/proc/{child.pid}/comm"
        while open(comm).read().strip() != "sleep":
            time.sleep(0.001)
        print(child.pid, flush=True)
        if sys.argv[1] == "thread-lives":
            time.sleep(300)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    print("thread ended", flush=True)
    time.sleep(300)
    """
)
"""A supervisor's stand-in: starts ``sleep 300`` from a thread that then lives on
(``thread-lives``) or ends (``thread-ends``), and itself lives on."""


@pytest.fixture
def starter() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _start(starter: list[subprocess.Popen[str]], mode: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-c", STARTER, mode], stdout=subprocess.PIPE, text=True
    )
    starter.append(process)
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def _running(pid: int) -> procinfo.ProcessId:
    child = procinfo.identify(pid)
    assert child is not None and procinfo.is_alive(child)
    info = procinfo.stat(pid)
    assert info is not None and info.pgid == pid  # the leader of a group (and session) of its own
    return child


def test_a_process_dies_with_its_supervisor_killed_by_sigkill(
    starter: list[subprocess.Popen[str]],
) -> None:
    supervisor, pid = _start(starter, "thread-lives")
    child = _running(pid)
    supervisor.kill()  # SIGKILL: nothing of the supervisor's own code runs
    supervisor.wait()
    # Nobody signals the child's group here: only the kernel's death signal can end it.
    assert procinfo.wait_gone(child, timeout=30)


def test_a_process_dies_with_the_thread_that_started_it(
    starter: list[subprocess.Popen[str]],
) -> None:
    supervisor, pid = _start(starter, "thread-ends")
    child = procinfo.identify(pid)
    assert child is not None
    assert supervisor.stdout is not None
    assert supervisor.stdout.readline() == "thread ended\n"
    assert procinfo.wait_gone(child, timeout=30)
    assert supervisor.poll() is None  # the supervisor itself still runs


def test_a_process_whose_supervisor_died_before_the_death_signal_never_runs(
    tmp_path: Path,
) -> None:
    # The command line as a supervisor prepared it (its pid inside), run by another
    # process: what the new process sees when its supervisor died before setpriv's prctl.
    marker = tmp_path / "ran"
    prepare = (
        "import json, sys; from kubemill.substrates.local.spawn import tied_argv;"
        f" print(json.dumps(tied_argv(['touch', {str(marker)!r}])))"
    )
    argv = json.loads(subprocess.check_output([sys.executable, "-c", prepare], text=True))
    done = subprocess.run(argv, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert not marker.exists()
    # The same command line from the process that prepared it runs the command.
    assert subprocess.run(tied_argv(["touch", str(marker)]), timeout=60).returncode == 0
    assert marker.exists()


def test_a_process_runs_on_its_cores_and_the_starting_thread_keeps_its_own(
    tmp_path: Path,
) -> None:
    own = os.sched_getaffinity(0)
    core = min(own)
    out = tmp_path / "out"
    with out.open("wb") as sink:
        child = start_tied(
            ["grep", "Cpus_allowed_list", "/proc/self/status"],
            env=None,
            cwd=None,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=None,
            cores=frozenset({core}),
        )
    assert child.wait(timeout=60) == 0
    assert out.read_text().split() == ["Cpus_allowed_list:", str(core)]
    assert os.sched_getaffinity(0) == own


def test_a_program_that_cannot_run_raises_as_popen_does(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    env = {"PATH": str(tmp_path)}
    cases = [("no-such-program", FileNotFoundError), ("plain", PermissionError)]
    cases += [("./plain", PermissionError), ("./missing", FileNotFoundError)]
    for program, error in cases:
        with pytest.raises(error) as caught:
            tied_argv([program], env=env, cwd=tmp_path)
        assert caught.value.filename == program
        with pytest.raises(error):  # Popen's own verdict, for the record
            subprocess.Popen([program], env=env, cwd=tmp_path)
    plain.chmod(0o755)
    assert tied_argv(["plain"], env=env, cwd=tmp_path)[-1] == "plain"
    assert tied_argv(["./plain"], env=env, cwd=tmp_path)[-1] == "./plain"


def test_without_setpriv_a_start_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spawn, "_setpriv", None)  # looked up afresh, on an empty PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(os, "defpath", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"setpriv \(util-linux"):
        start_tied(["/bin/true"], env=None, cwd=None, stdin=None, stdout=None, stderr=None)
