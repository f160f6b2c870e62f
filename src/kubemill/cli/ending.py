"""How the ``kubemill`` console script ends once a command has said everything.

Only the standard library is imported: the plain ``kubemill get`` ends here too, without
typer.
"""

from __future__ import annotations

import sys


def end_at_once(done: SystemExit) -> None:
    """End the process now that the command has said everything, skipping the teardown.

    Freeing every module's objects on the way out took 30-70 ms after `kubemill run` had
    printed its verdict, which a script waiting for the job's end pays each time; the
    kernel frees the memory at once. Only when nothing is left to do: the exit handlers
    run, the output is flushed, and no other (non-daemon) thread is still working, such
    as a supervisor that has not let go of its job, and no profiler or debugger is
    attached. Otherwise the usual exit happens.
    """
    import atexit
    import os
    import threading

    code = done.code
    if code is not None and not isinstance(code, int):
        return  # a message to print: the usual exit does that
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return  # a profiler or debugger writes its results once the program returns
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        return  # e.g. a closed pipe: let the usual exit report it as it always did
    os._exit(code or 0)


__all__ = ["end_at_once"]
