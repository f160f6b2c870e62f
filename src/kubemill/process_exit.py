"""Ending a kubemill process at once when it has nothing left to do (:func:`exit_at_once`).

Freeing every module's objects on the way out costs tens of milliseconds (more on a busy
machine) that someone waits for: a script waiting for ``kubemill run``'s verdict, or
``JobClient.delete``, which returns only once the job's detached supervisor has exited. The
kernel frees the memory at once. The standard library only, so that any process may import
it at its end for nothing.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def exit_at_once(code: int) -> None:
    """End the process now with ``code``, skipping the interpreter's teardown; return (for
    the usual exit) when something is left to do: the exit handlers run and the output is
    flushed first, and nothing happens while another (non-daemon) thread is still working
    or a profiler or debugger is attached (it writes its results once the program returns).
    """
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        return  # e.g. a closed pipe: let the usual exit report it as it always did
    os._exit(code)


__all__ = ["exit_at_once"]
