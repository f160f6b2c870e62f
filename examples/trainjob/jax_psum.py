"""A psum across JAX processes over CPU collectives, one process per TrainJob node.

Upstream's jax plugin (the ``jax-distributed`` runtime) gives every node JAX_NUM_PROCESSES,
JAX_PROCESS_ID and JAX_COORDINATOR_ADDRESS (node 0's ``host:port``, where node 0 serves the
coordinator) and JAX_DISTRIBUTED_BACKEND (``gloo``). Each process contributes its id + 1
to a ``jax.lax.psum``; every process must see the same sum, n(n+1)/2.

    kubemill run examples/trainjob/jax.yaml
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=int, default=120, help="seconds to find the peers")
    args = parser.parse_args(argv)
    try:
        address = os.environ["JAX_COORDINATOR_ADDRESS"]
        processes = int(os.environ["JAX_NUM_PROCESSES"])
        process = int(os.environ["JAX_PROCESS_ID"])
    except KeyError as missing:
        sys.exit(f"{missing} is not set: run this as a TrainJob of the jax-distributed runtime")

    import jax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.config.update("jax_platforms", "cpu")
    # The collectives the runtime names (gloo over TCP between the processes).
    jax.config.update(
        "jax_cpu_collectives_implementation", os.environ.get("JAX_DISTRIBUTED_BACKEND", "gloo")
    )
    # Node 0 serves the coordinator on exactly the address the others are given (its pod's
    # name on Kubernetes, the loopback address locally), not on every interface.
    jax.distributed.initialize(
        coordinator_address=address,
        num_processes=processes,
        process_id=process,
        coordinator_bind_address=address if process == 0 else None,
        initialization_timeout=args.timeout,
    )
    mesh = Mesh(np.array(jax.devices()), ("p",))
    local = np.array([process + 1.0], dtype=np.float32)
    summed = jax.jit(
        jax.shard_map(lambda x: jax.lax.psum(x, "p"), mesh=mesh, in_specs=P("p"), out_specs=P())
    )(jax.make_array_from_process_local_data(NamedSharding(mesh, P("p")), local))
    total = float(summed.addressable_data(0)[0])
    expected = processes * (processes + 1) / 2
    print(
        f"[process {process}/{processes}] psum={total} expected={expected} ok={total == expected}",
        flush=True,
    )
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
