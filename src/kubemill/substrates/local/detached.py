"""What every detached process of the local substrate does around its work.

The backend starts two kinds of detached process, each as ``python -m MODULE --state-dir D
--job-uid U`` for one recorded job: a job's supervisor (:mod:`.supervisor`) and a
schedule's loop (:mod:`.schedules`). Both read the same two arguments, log the same way,
register the engines from outside kubemill (the job may be of a kind a plugin registered
in the process that submitted it), take the job from the store before doing anything (as
its first process, or once the process that started it on ``resume`` handed it over), and
turn SIGTERM and SIGINT into a stop of their own while a closed terminal (SIGHUP) is no
reason to stop. What each then runs, and what a stop means to it, stays in its module.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from kubemill.substrates.local import procinfo
from kubemill.substrates.local.store import Store
from kubemill.substrates.plugins import load_plugins

HANDOVER_WAIT = 5.0
"""How long a new detached process waits for the process that started it to hand it the
job (``Store.hand_over`` runs just after the start, on resume)."""
CLAIM_POLL = 0.02
"""Seconds between two tries to take the job while it is being handed over."""


@dataclass(frozen=True)
class DetachedArgs:
    """The job a detached process is for."""

    state_dir: Path
    job_uid: str


def start(argv: list[str] | None, *, prog: str, description: str) -> DetachedArgs:
    """Read ``--state-dir`` and ``--job-uid``, set up logging and load engine plugins."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--job-uid", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    load_plugins()
    return DetachedArgs(state_dir=Path(args.state_dir), job_uid=args.job_uid)


def claim(store: Store, uid: str) -> bool:
    """Take the job for this process: as its first detached process, or once the resuming
    process handed it over. False if it is gone, finished, or another process has it."""
    me = procinfo.identify(os.getpid())
    if me is None:
        return False
    deadline = time.monotonic() + HANDOVER_WAIT
    while True:
        if store.claim_supervisor(uid, me, mode="detached"):
            return True
        rec = store.job_by_uid(uid)
        if rec is None or rec.finished or time.monotonic() >= deadline:
            return False
        time.sleep(CLAIM_POLL)


def on_stop_signals(stop: Callable[[int], None]) -> None:
    """Call ``stop(signum)`` on SIGTERM and SIGINT; ignore SIGHUP (no terminal to lose)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop(signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


__all__ = ["CLAIM_POLL", "HANDOVER_WAIT", "DetachedArgs", "claim", "on_stop_signals", "start"]
