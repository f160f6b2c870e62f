"""Starting a replica's process from its :class:`~.launch.LaunchSpec`: its own session, its
private temporary directory, its cores, and ``PR_SET_PDEATHSIG`` so that it dies with the
process that started it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from kubemill.substrates.local.launch import LaunchSpec
from kubemill.substrates.local.log_keeper import KEEPER
from kubemill.substrates.local.logs import open_for_replica


def make_private_dir(path: str) -> None:
    """Create ``path`` (and its parents) readable by this user alone; an existing one is
    kept as it is (a restarted replica finds its files again)."""
    Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)


PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None = None


def _load_prctl() -> Callable[..., int]:
    global _prctl
    if _prctl is None:
        libc = ctypes.CDLL(None, use_errno=True)
        _prctl = libc.prctl
    return _prctl


def die_with_parent(parent_pid: int, cores: frozenset[int] | None = None) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child die with the thread that forks it, and pins
    it to ``cores`` (before exec, so no thread of the program ever runs elsewhere)."""
    prctl = _load_prctl()  # resolved in the parent: the child only makes one call

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:
            # The parent died between fork and prctl: nobody would ever reap us.
            os.kill(os.getpid(), signal.SIGKILL)
        if cores:
            os.sched_setaffinity(0, cores)

    return preexec


def spawn(spec: LaunchSpec, *, cores: frozenset[int] | None = None) -> subprocess.Popen[bytes]:
    """Start the replica's process on ``cores``, its stdout and stderr appended to its log files.

    The files are written by the process itself (:mod:`.logs`); this process's log
    keeper marks and rotates them while it runs. Raises ``OSError`` (FileNotFoundError,
    PermissionError) when exec fails.
    """
    if spec.tmp_dir is not None:
        make_private_dir(spec.tmp_dir)
    out_fd, err_fd = open_for_replica(spec.log_path)
    try:
        popen = subprocess.Popen(
            list(spec.argv),
            env=dict(spec.env),
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out_fd,
            stderr=err_fd,
            close_fds=True,
            start_new_session=True,
            preexec_fn=die_with_parent(os.getpid(), cores),
        )
    finally:
        os.close(out_fd)
        os.close(err_fd)
    KEEPER.watch(spec.log_path, popen)
    return popen
