"""A gloo all-reduce across every process torchrun starts, checked.

Run by ``trainjob.yaml`` as ``torchrun allreduce.py`` on each TrainJob node: torchrun reads
the node count, processes per node, node rank and master address from the ``PET_*``
variables the torch-distributed runtime gives each node, and hands every process it starts
``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``. Each process contributes
``rank + 1``; after the all-reduce every one must hold ``1 + 2 + ... + world_size``. Prints
one line per process, exits 1 if the sum is wrong.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the other processes"
    )
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method="env://", timeout=datetime.timedelta(seconds=args.timeout)
    )
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    node = os.environ.get("GROUP_RANK", "?")
    ok = value.item() == expected
    print(
        f"[rank {rank}/{world}] node={node} allreduce={value.item():g} expected={expected:g} "
        f"ok={ok}",
        flush=True,
    )
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
