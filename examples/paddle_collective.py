"""Data-parallel linear regression in PaddlePaddle over its CPU collective (gloo), started
by ``python -m paddle.distributed.launch`` on every PaddleJob worker.

kubemill (like Kubeflow's training operator) gives every worker PADDLE_MASTER,
PADDLE_NNODES and PADDLE_JOB_ID, which the launcher reads: worker 0 serves the rendezvous
on its own address, the others find it there, and the launcher starts this program with
its rank. Each rank checks an ``all_reduce``, then trains on its own shard, averaging the
gradients of all ranks with ``all_reduce`` at every step, so every rank ends with the same
weights, which it prints.

    kubemill run examples/paddle-collective.yaml
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

TRUE_WEIGHTS = np.array([[1.5], [-2.0], [0.25]], dtype=np.float32)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=256, help="rows per rank")
    parser.add_argument("--learning-rate", type=float, default=0.3)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import paddle
    import paddle.distributed as dist

    paddle.set_device("cpu")
    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    tag = f"[rank {rank}/{world}]"

    total = paddle.to_tensor([float(rank + 1)])
    dist.all_reduce(total)
    print(f"{tag} all_reduce={float(total.numpy()[0])} expected={world * (world + 1) / 2}")

    rng = np.random.default_rng(rank)
    features = rng.normal(size=(args.rows, 3)).astype(np.float32)
    x = paddle.to_tensor(features)
    y = paddle.to_tensor(features @ TRUE_WEIGHTS)
    paddle.seed(0)  # the same starting weights on every rank
    model = paddle.nn.Linear(3, 1, bias_attr=False)
    optimizer = paddle.optimizer.SGD(args.learning_rate, parameters=model.parameters())
    for epoch in range(1, args.epochs + 1):
        loss = paddle.mean((model(x) - y) ** 2)
        loss.backward()
        for parameter in model.parameters():
            dist.all_reduce(parameter.grad)
            parameter.grad.set_value(parameter.grad / world)
        optimizer.step()
        optimizer.clear_grad()
        dist.all_reduce(loss)
        print(f"{tag} epoch {epoch}/{args.epochs} loss={float(loss.numpy()) / world:.6f}")
    weights = model.weight.numpy().ravel()
    print(f"{tag} weights={','.join(f'{v:.4f}' for v in weights)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
