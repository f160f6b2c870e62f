"""An MPI allreduce over mpi4py, one rank per TrainJob node: every rank adds ``rank + 1``
into a global sum, and rank 0 prints one line per rank (gathered, so they never interleave):
the host it runs on (``HOSTNAME``: its node's pod name) and the sum, n(n+1)/2 for n ranks.

    kubemill run examples/trainjob/mpi.yaml
"""

from __future__ import annotations

import os

from mpi4py import MPI


def main() -> None:
    world = MPI.COMM_WORLD
    total = world.allreduce(world.rank + 1)
    expected = world.size * (world.size + 1) // 2
    line = (
        f"[rank {world.rank}/{world.size}] host={os.environ.get('HOSTNAME', '?')} "
        f"allreduce={total} expected={expected} ok={total == expected}"
    )
    lines = world.gather(line, root=0)
    if world.rank == 0 and lines is not None:
        for each in lines:
            print(each, flush=True)


if __name__ == "__main__":
    main()
