"""A replica of the chaos test (``test_chaos.py``): numbered lines, and a side file that
says what was written.

``python chaos_replica.py SIDE SUB REPLICA LINES INTERVAL PLAN DAEMON DEAF PAD``

Each run appends ``start <run> <pid>`` to the side file ``SIDE``, then writes line pairs
``sub=SUB run=R out N`` to stdout and ``sub=SUB run=R err N`` to stderr, one pair every
``INTERVAL`` seconds, ``LINES`` pairs (``PLAN`` ``forever``: until it is stopped). Each
line is flushed to the log file (the replica's stdout *is* the file) before it is noted
in the side file, which is fsynced: whatever the side file lists was in the log before
any kill. A run ends by noting ``exit <code>`` and exiting with that code. ``PLAN`` is
the exit code per run, comma-separated (``3,3,0``: fail twice, then succeed; the last
one repeats); the run number is the count of earlier ``start`` notes. ``DAEMON`` ``1``
starts a process in a new session first (it must not outlive the job); ``DEAF`` ``1``
ignores SIGTERM (it is stopped by SIGKILL, once its grace period is over). ``PAD`` > 0
ends each line with a space and that many ``x`` (logs grow fast enough to rotate).
"""

import os
import signal
import subprocess
import sys
import time


def main() -> int:
    side, sub, _replica, lines, interval, plan, daemon, deaf, pad = sys.argv[1:10]
    padding = f" {'x' * int(pad)}" if int(pad) else ""
    if deaf == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def note(text: str) -> None:
        os.write(fd, f"{text}\n".encode())
        os.fsync(fd)

    with open(side, encoding="utf-8") as seen:
        run = sum(1 for line in seen if line.startswith("start "))
    note(f"start {run} {os.getpid()}")
    if daemon == "1":
        # Leaves the replica's process group and session: only the supervisor's subreaper
        # and the replica mark can find it.
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    codes = plan.split(",")
    code = codes[min(run, len(codes) - 1)]
    n = 0
    while code == "forever" or n < int(lines):
        for stream, label in ((sys.stdout, "out"), (sys.stderr, "err")):
            text = f"sub={sub} run={run} {label} {n}{padding}"
            stream.write(f"{text}\n")
            stream.flush()
            note(text)
        n += 1
        time.sleep(float(interval))
    note(f"exit {code}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
