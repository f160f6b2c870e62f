"""Data-parallel training of a small classifier on scikit-learn's digits with DDP over gloo.

Run by ``pytorch-ddp.yaml`` (one process per PyTorchJob replica, which gets MASTER_ADDR,
MASTER_PORT, WORLD_SIZE and RANK from kubemill) and by ``bench/local_overhead.py`` under
``torchrun --nproc_per_node=N`` (which also sets LOCAL_RANK) or by hand with the same four
variables. Every launcher ends up in ``init_process_group("gloo", init_method="env://")``.

Each rank trains on its own shard of the training set (DistributedSampler); DDP averages
the gradients with all-reduce, so every rank holds the same weights after every step. The
script checks that at the end (it exits 1 if the ranks disagree) and prints, per epoch and
rank, the mean training loss and the accuracy on the held-out test set. Rank 0 also reports
them to kubemill each epoch (``kubemill.report``; the job's status then has its progress
and metrics, ``kubemill get`` shows PROGRESS and ETA, the dashboard plots them), or, in an
image without kubemill, appends the same line to ``$KUBEMILL_PROGRESS_FILE`` itself.

The digits data set ships inside scikit-learn: nothing is downloaded.
"""

from __future__ import annotations

import time

# First thing, before the slow imports: the moment this rank's user code starts. The
# benchmark compares this marker across launchers (kubemill, torchrun, bare processes).
USER_CODE_START = time.time()

import argparse  # noqa: E402
import datetime  # noqa: E402
import ipaddress  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds to wait for the other ranks (gloo's default is 30 minutes)",
    )
    parser.add_argument(
        "--min-accuracy",
        type=float,
        default=0.0,
        help="exit 1 if the final test accuracy is below this",
    )
    return parser.parse_args(argv)


def report_progress(epoch: int, epochs: int, **metrics: float) -> None:
    """This epoch's numbers to kubemill (nothing when not run by kubemill)."""
    try:
        from kubemill import report
    except ImportError:  # an image without kubemill: the protocol is one JSON line
        import json

        path = os.environ.get("KUBEMILL_PROGRESS_FILE")
        if path:
            line = {"step": epoch, "total": epochs, "time": time.time(), **metrics}
            with open(path, "a", encoding="utf-8") as progress:
                progress.write(json.dumps(line) + "\n")
        return
    report(step=epoch, total=epochs, **metrics)


def log(rank: int, world_size: int, message: str) -> None:
    print(f"[rank {rank}/{world_size}] {message}", flush=True)


def rendezvous_env() -> tuple[int, int, str]:
    """Rank, world size and launcher name, from what the launcher put in the environment."""
    missing = [
        v for v in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK") if v not in os.environ
    ]
    if missing:
        sys.exit(
            f"error: {', '.join(missing)} not set. Run this under a PyTorchJob "
            "(kubemill run examples/pytorch-ddp.yaml), torchrun, or set MASTER_ADDR, "
            "MASTER_PORT, WORLD_SIZE and RANK by hand."
        )
    launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "env"
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), launcher


def pin_gloo_to_loopback() -> None:
    """Keep gloo on the loopback interface when the job itself runs on loopback.

    Gloo picks its interface from the host name, which may resolve to an external address
    on some machines; when every rank is on 127.0.0.1 that is both needless and wrong.
    """
    if "GLOO_SOCKET_IFNAME" in os.environ:
        return
    try:
        if not ipaddress.ip_address(os.environ["MASTER_ADDR"]).is_loopback:
            return
    except ValueError:  # a host name, as on a cluster: leave the choice to gloo
        return
    loopback = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    if loopback:
        os.environ["GLOO_SOCKET_IFNAME"] = loopback[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, world_size, launcher = rendezvous_env()
    log(
        rank,
        world_size,
        f"user code started at unix={USER_CODE_START:.6f} launcher={launcher} "
        f"local_rank={os.environ.get('LOCAL_RANK', '-')} "
        f"master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
    )

    import torch
    import torch.distributed as dist
    from sklearn.datasets import load_digits
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    # Several ranks share few cores: one thread each avoids oversubscription.
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    pin_gloo_to_loopback()
    dist.init_process_group(
        backend="gloo",
        init_method="env://",
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    assert dist.get_rank() == rank and dist.get_world_size() == world_size
    log(rank, world_size, f"joined process group: backend={dist.get_backend()}")

    # The same deterministic split on every rank; only the sampler shards it.
    digits = load_digits()
    features = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1234))
    n_test = len(labels) // 5
    test_idx, train_idx = order[:n_test], order[n_test:]
    train_set = TensorDataset(features[train_idx], labels[train_idx])
    test_x, test_y = features[test_idx], labels[test_idx]

    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    # DDP broadcasts rank 0's initial weights, so all ranks start equal.
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    log(rank, world_size, f"training on {len(sampler)} of {len(train_set)} samples per epoch")

    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        ddp.train()
        total_loss, batches = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()  # gradients are all-reduced here
            optimizer.step()
            total_loss += loss.item()
            batches += 1
        ddp.eval()
        with torch.no_grad():
            accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
        log(
            rank,
            world_size,
            f"epoch {epoch}/{args.epochs} loss={total_loss / max(batches, 1):.4f} "
            f"test_accuracy={accuracy:.4f}",
        )
        if rank == 0:
            report_progress(
                epoch, args.epochs, loss=total_loss / max(batches, 1), accuracy=accuracy
            )

    # All-reduce check: every rank must end with the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world_size)]
    dist.all_gather(gathered, flat)
    max_diff = max((g - flat).abs().max().item() for g in gathered)
    identical = max_diff == 0.0
    log(
        rank,
        world_size,
        f"allreduce check: world_size={dist.get_world_size()} "
        f"params_identical_across_ranks={identical} max_abs_diff={max_diff:.3g}",
    )
    dist.barrier()
    # Release DDP's reducer (and the gloo work it holds) before the process group goes.
    del ddp, optimizer
    dist.destroy_process_group()

    if not identical:
        log(rank, world_size, "error: ranks disagree on the parameters")
        return 1
    if accuracy < args.min_accuracy:
        log(rank, world_size, f"error: accuracy {accuracy:.4f} below {args.min_accuracy}")
        return 1
    log(rank, world_size, f"done: final test_accuracy={accuracy:.4f}")
    # The last moment of user code, for bench/local_overhead.py's end latency.
    log(rank, world_size, f"user code ended at unix={time.time():.6f}")
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without the interpreter's teardown. Once in a while (seen about once in tens
    # of runs on a loaded machine) gloo's C++ threads abort the process during that
    # teardown ("terminate called without an active exception", exit 134) after the work
    # is done and reported; exiting here keeps the exit code the one main() decided.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
