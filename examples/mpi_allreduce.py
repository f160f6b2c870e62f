"""An MPI allreduce over mpi4py: each rank says where it runs and how it was started.

Every rank adds ``rank + 1`` into a global sum with ``MPI.COMM_WORLD.allreduce`` and rank 0
prints one line per rank: its worker (``POD_NAME``, which the manifest takes from the pod's
own name), the global sum, and the process that started it -- ``orted``, itself started by
the remote-shell agent's side (the kubelet's exec on Kubernetes, kubemill's supervisor
locally), not by ``mpirun``. The lines are gathered to rank 0 so they never interleave.
"""

from __future__ import annotations

import os
from pathlib import Path

from mpi4py import MPI


def command_of(pid: int) -> str:
    """A process's program name (``/proc/<pid>/comm``), or ``?`` if it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def parent_of(pid: int) -> int:
    """A process's parent pid, from ``/proc/<pid>/stat`` (field 4, after the command)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def main() -> None:
    world = MPI.COMM_WORLD
    total = world.allreduce(world.rank + 1)
    daemon = os.getppid()
    starter = parent_of(daemon)
    line = (
        f"rank {world.rank}/{world.size} on {os.environ.get('POD_NAME', '?')}: sum {total}; "
        f"started by {command_of(daemon)} (pid {daemon}), which "
        f"{command_of(starter)} (pid {starter}) started"
    )
    lines = world.gather(line, root=0)
    if world.rank == 0:
        assert lines is not None
        print("\n".join(lines), flush=True)
        expected = world.size * (world.size + 1) // 2
        print(f"allreduce: {total} (expected {expected})", flush=True)
        if total != expected:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
