"""Data-parallel least squares in JAX over CPU collectives, one process per JAXJob worker.

kubemill (like Kubeflow's training operator) gives every worker COORDINATOR_ADDRESS,
COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID; worker 0 serves JAX's coordinator there.
Each process holds one shard of a synthetic regression problem; every step sums the
shards' gradients with ``jax.lax.psum`` across the processes (gloo over TCP), so every
process applies the same update. It prints a psum check, the loss per epoch and the
weights it ends with, which must be the same on every process.

    kubemill run examples/jax-psum.yaml
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

TRUE_WEIGHTS = np.array([2.0, -3.0, 0.5], dtype=np.float32)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--rows", type=int, default=256, help="rows per process")
    parser.add_argument("--learning-rate", type=float, default=0.3)
    parser.add_argument("--timeout", type=int, default=120, help="seconds to find the peers")
    return parser.parse_args(argv)


def coordinator() -> tuple[str, int, int]:
    """The coordinator's address, the number of processes and this one's id, from the env."""
    try:
        address = f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}"
        return address, int(os.environ["NUM_PROCESSES"]), int(os.environ["PROCESS_ID"])
    except KeyError as missing:
        sys.exit(
            f"{missing} is not set: run this as a JAXJob (kubemill run examples/jax-psum.yaml)"
        )


def shard(process: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """This process's rows of the regression problem (each process draws its own)."""
    rng = np.random.default_rng(process)
    features = rng.normal(size=(rows, TRUE_WEIGHTS.size)).astype(np.float32)
    noise = rng.normal(scale=0.01, size=rows).astype(np.float32)
    return features, features @ TRUE_WEIGHTS + noise


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    address, processes, process = coordinator()

    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.config.update("jax_platforms", "cpu")
    # Process 0 serves the coordinator on exactly the address the others are given (on
    # Kubernetes its own pod's name; locally the loopback address), not on every interface.
    jax.distributed.initialize(
        coordinator_address=address,
        num_processes=processes,
        process_id=process,
        coordinator_bind_address=address if process == 0 else None,
        initialization_timeout=args.timeout,
    )
    tag = f"[process {process}/{processes}]"
    mesh = Mesh(np.array(jax.devices()), ("p",))
    sharded, replicated = NamedSharding(mesh, P("p")), NamedSharding(mesh, P())

    def global_array(local: np.ndarray, sharding: NamedSharding) -> jax.Array:
        return jax.make_array_from_process_local_data(sharding, local)

    # The collective itself: every process contributes its id + 1.
    total = jax.jit(
        jax.shard_map(lambda x: jax.lax.psum(x, "p"), mesh=mesh, in_specs=P("p"), out_specs=P())
    )(global_array(np.array([process + 1.0], dtype=np.float32), sharded))
    expected = processes * (processes + 1) / 2
    print(f"{tag} psum={float(total.addressable_data(0)[0])} expected={expected}", flush=True)

    rows = processes * args.rows

    def local_step(w: jax.Array, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        error = x @ w - y
        gradient = jax.lax.psum(x.T @ error, "p") / rows
        loss = jax.lax.psum(jnp.sum(error**2), "p") / rows
        return w - args.learning_rate * gradient, loss

    step = jax.jit(
        jax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("p"), P("p")), out_specs=(P(), P()))
    )
    features, targets = shard(process, args.rows)
    x, y = global_array(features, sharded), global_array(targets, sharded)
    w = global_array(np.zeros(TRUE_WEIGHTS.size, dtype=np.float32), replicated)
    for epoch in range(1, args.epochs + 1):
        w, loss = step(w, x, y)
        print(
            f"{tag} epoch {epoch}/{args.epochs} loss={float(loss.addressable_data(0)):.6f}",
            flush=True,
        )
    weights = np.asarray(w.addressable_data(0))
    print(f"{tag} weights={','.join(f'{v:.4f}' for v in weights)}", flush=True)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
