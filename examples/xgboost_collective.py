"""Distributed XGBoost through its collective, one training process per XGBoostJob replica.

kubemill (like Kubeflow's training operator) gives every replica MASTER_ADDR, MASTER_PORT,
WORLD_SIZE and RANK. The Master (rank 0) starts XGBoost's tracker on MASTER_ADDR:MASTER_PORT
for WORLD_SIZE workers and trains as rank 0; every replica joins the collective there and
trains on its own shard of a synthetic classification problem. XGBoost sums the gradient
histograms of all shards at each split, so every rank builds the same trees: each prints
the error per round on a test set and a digest of the model it ends with, which must be
the same on every rank.

    kubemill run examples/xgboost-collective.yaml
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

import numpy as np

FEATURES = 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rows", type=int, default=2000, help="rows per rank")
    parser.add_argument("--timeout", type=int, default=120, help="seconds to find the peers")
    return parser.parse_args(argv)


def tracker_env() -> tuple[str, int, int, int]:
    try:
        return (
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            int(os.environ["WORLD_SIZE"]),
            int(os.environ["RANK"]),
        )
    except KeyError as missing:
        sys.exit(
            f"{missing} is not set: run this as an XGBoostJob "
            "(kubemill run examples/xgboost-collective.yaml)"
        )


def dataset(seed: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of one problem: the label is whether a fixed linear score is positive."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(rows, FEATURES))
    score = features @ np.linspace(-1.0, 1.0, FEATURES) + 0.5 * features[:, 0] * features[:, 1]
    return features, (score > 0).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    host, port, world, rank = tracker_env()

    import xgboost as xgb
    from xgboost import collective
    from xgboost.tracker import RabitTracker

    tracker = None
    if rank == 0:
        # The tracker listens on the address the workers are given (on Kubernetes the
        # Master pod's own name; locally the loopback address).
        tracker = RabitTracker(n_workers=world, host_ip=host, port=port, timeout=args.timeout)
        tracker.start()
    tag = f"[rank {rank}/{world}]"
    communicator = {
        "dmlc_communicator": "rabit",
        "dmlc_tracker_uri": host,
        "dmlc_tracker_port": port,
        "dmlc_task_id": str(rank),
        "dmlc_timeout": args.timeout,
    }
    with collective.CommunicatorContext(**communicator):
        print(f"{tag} joined: collective rank {collective.get_rank()}", flush=True)
        features, labels = dataset(1 + rank, args.rows)
        test_features, test_labels = dataset(0, 1000)  # the same test set on every rank
        train = xgb.DMatrix(features, label=labels)
        test = xgb.DMatrix(test_features, label=test_labels)
        history: dict[str, dict[str, list[float]]] = {}
        params = {"objective": "binary:logistic", "max_depth": 4, "eval_metric": "error"}
        booster = xgb.train(
            {**params, "nthread": 1},
            train,
            num_boost_round=args.rounds,
            evals=[(test, "test")],
            evals_result=history,
            verbose_eval=False,
        )
        for i, error in enumerate(history["test"]["error"], 1):
            print(f"{tag} round {i}/{args.rounds} test_error={error:.4f}", flush=True)
        digest = hashlib.sha256(bytes(booster.save_raw("json"))).hexdigest()[:16]
        print(f"{tag} model_digest={digest}", flush=True)
    if tracker is not None:
        tracker.wait_for(args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
