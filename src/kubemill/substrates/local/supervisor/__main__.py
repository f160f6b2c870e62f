"""A detached supervisor's process: ``python -m kubemill.substrates.local.supervisor
--state-dir D --job-uid U`` (started by ``kubemill run --detach``)."""

from __future__ import annotations

import logging
import os
import signal
import sys

from kubemill.process_exit import exit_at_once
from kubemill.substrates.local import detached
from kubemill.substrates.local.known_objects import know_local_objects
from kubemill.substrates.local.store import Store
from kubemill.substrates.local.supervisor.loop import Supervisor

log = logging.getLogger("kubemill.local.supervisor")


def main(argv: list[str] | None = None) -> int:
    """Entry point of a detached supervisor process."""
    args = detached.start(
        argv,
        prog="python -m kubemill.substrates.local.supervisor",
        description="Supervise one recorded kubemill job (started by `kubemill run --detach`).",
    )
    store = Store(args.state_dir)
    # The job may name a runtime its run was given (kept in the state directory).
    know_local_objects(store.state_dir)
    if not detached.claim(store, args.job_uid):
        log.error("job %s is gone or has another supervisor; exiting", args.job_uid)
        return 1
    # This process runs the one job: whatever ends up below it is the job's.
    supervisor = Supervisor(store, args.job_uid, exclusive=True)
    signals_seen = 0

    def on_stop(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        why = f"{signal.Signals(signum).name} to its supervisor (pid {os.getpid()})"
        supervisor.interrupt(force=signals_seen > 1, why=why)

    detached.on_stop_signals(on_stop)
    supervisor.run()
    return 0


if __name__ == "__main__":
    code = main()
    # JobClient.delete returns once this process is gone: no teardown to wait for.
    logging.shutdown()
    exit_at_once(code)
    sys.exit(code)
