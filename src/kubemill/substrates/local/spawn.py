"""Starting a process tied to the supervisor: a replica's from its
:class:`~.launch.LaunchSpec`, a command exec'd into a replica, a probe's.

Every such process leads its own session, runs on the cores it is given, and dies with
the thread that starts it (``PR_SET_PDEATHSIG``), so that a supervisor that dies, even by
SIGKILL, leaves none behind. :func:`start_tied` keeps both guarantees without a
``preexec_fn``, because a ``preexec_fn`` makes CPython fork instead of vfork: a copy of
the supervisor's page tables on every start, with the starting thread blocked until the
child execs (7-26 ms, more under load, against ~0.2 ms):

- the death signal: the command runs behind ``setpriv --pdeathsig KILL --`` (util-linux,
  ``Priority: required`` on Debian; the option exists since util-linux 2.33, Debian 12
  has 2.38), which sets it and execs the rest of the command line. The kernel sends it
  when the *thread* that created the process exits, which is the thread that called
  :func:`start_tied` (vfork or fork alike), so that thread must live as long as the
  process. Had the supervisor died between the start and setpriv's ``prctl``, the signal
  would never come: so after setpriv, ``/bin/sh`` checks that its parent is still the
  supervisor (``$PPID``) and kills itself otherwise, then execs the command, as the
  ``preexec_fn`` checked after its ``prctl``. The two small programs cost the new
  process a few milliseconds of its start, and the supervisor nothing. One thing the
  ``preexec_fn`` had that this has not: its thread stayed blocked until the ``prctl``
  was done. A thread that ended in the few milliseconds before setpriv's ``prctl`` would
  leave its process to another thread of the supervisor (the shell's check sees the same
  process), to die with the supervisor's process instead. No thread here ends so soon
  after a start: the supervisor's ends once its job's processes are stopped, and an
  exec's once its process has ended.
- the cores: the starting thread pins *itself* to them around the start, since a child
  inherits its creator's affinity, and then restores its own. The process is on its
  cores from its first instruction; pinning it by pid after the start would race with
  the threads the program starts, which keep the mask they were created with.

Before the wrapper starts, the program is looked up as ``Popen`` looks it up (the
environment's ``PATH``, a relative path from the working directory), so that a missing or
non-executable program raises ``FileNotFoundError`` or ``PermissionError`` as before;
what is left to the exec itself is the shell's (a file the kernel cannot execute is run
by ``/bin/sh``, as ``execvp`` does). With setpriv missing (no util-linux), every start
fails with an ``OSError`` that names it: there is no second way to start a process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from kubemill.substrates.local.launch import LaunchSpec
from kubemill.substrates.local.log_keeper import KEEPER
from kubemill.substrates.local.logs import open_for_replica

SHELL = "/bin/sh"
PARENT_CHECK = '[ "$PPID" = "$1" ] || kill -KILL $$; shift; exec "$@"'
"""Run by :data:`SHELL` after setpriv with ``$1`` the supervisor's pid: die if the parent
is already someone else (the supervisor died before the death signal was set), else
become the command. ``$0`` (``kubemill-start``) names the shell in its messages."""

Stdio = int | IO[Any] | None
"""What ``Popen`` takes as a standard stream: a descriptor, a file, ``DEVNULL``, None."""

_setpriv: str | None = None


def setpriv() -> str:
    """The path of util-linux's ``setpriv``, looked up once; ``FileNotFoundError`` if missing."""
    global _setpriv
    if _setpriv is None:
        found = shutil.which("setpriv") or shutil.which("setpriv", path=os.defpath)
        if found is None:
            raise FileNotFoundError(
                errno.ENOENT,
                "setpriv (util-linux 2.33 or later) is not installed; the local substrate"
                " starts every process through it so that the process dies with its"
                " supervisor",
                "setpriv",
            )
        _setpriv = found
    return _setpriv


def check_runnable(
    program: str, env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None
) -> None:
    """Raise the ``OSError`` that exec'ing ``program`` would, looked up as ``Popen`` does:
    a name with a slash from ``cwd``, a bare name on the environment's ``PATH``."""
    base = Path(cwd if cwd is not None else "")
    if "/" in program:
        candidates = [base / program]
    else:
        candidates = [base / directory / program for directory in os.get_exec_path(env)]
    refused = False
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return
        refused = refused or path.exists()
    # Like exec: a candidate that exists but cannot be run beats the ones that do not exist.
    code = errno.EACCES if refused else errno.ENOENT
    raise OSError(code, os.strerror(code), program)


def tied_argv(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> list[str]:
    """``argv`` behind setpriv's death signal and the shell's check of the parent (this
    process); raises as :func:`check_runnable` when ``argv[0]`` cannot be run."""
    check_runnable(argv[0], env, cwd)
    death = [setpriv(), "--pdeathsig", "KILL", "--"]
    check = [SHELL, "-c", PARENT_CHECK, "kubemill-start", str(os.getpid())]
    return [*death, *check, *argv]


@contextlib.contextmanager
def thread_pinned(cores: frozenset[int] | None) -> Iterator[None]:
    """This thread on ``cores`` for the block (nothing when None or empty), so that the
    processes it starts inherit them; its own cores restored after."""
    if not cores:
        yield
        return
    own = os.sched_getaffinity(0)  # 0: the calling thread, not the whole process
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, own)


def start_tied(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
    cores: frozenset[int] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, on ``cores``, dying with this thread.

    No ``preexec_fn``: CPython vforks. Raises ``OSError`` (FileNotFoundError,
    PermissionError) when the program cannot be run, as ``Popen`` does.
    """
    command = tied_argv(argv, env=env, cwd=cwd)
    with thread_pinned(cores):
        return subprocess.Popen(
            command,
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            close_fds=True,
            start_new_session=True,
        )


def make_private_dir(path: str) -> None:
    """Create ``path`` (and its parents) readable by this user alone; an existing one is
    kept as it is (a restarted replica finds its files again)."""
    Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)


def spawn(spec: LaunchSpec, *, cores: frozenset[int] | None = None) -> subprocess.Popen[bytes]:
    """Start the replica's process on ``cores``, its stdout and stderr appended to its log files.

    The files are written by the process itself (:mod:`.logs`); this process's log
    keeper marks and rotates them while it runs. Raises ``OSError`` (FileNotFoundError,
    PermissionError) when its program cannot be run.
    """
    if spec.tmp_dir is not None:
        make_private_dir(spec.tmp_dir)
    out_fd, err_fd = open_for_replica(spec.log_path)
    try:
        popen = start_tied(
            spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out_fd,
            stderr=err_fd,
            cores=cores,
        )
    finally:
        os.close(out_fd)
        os.close(err_fd)
    KEEPER.watch(spec.log_path, popen)
    return popen
