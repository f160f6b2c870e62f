"""Distributed XGBoost on scikit-learn's digits: one worker per TrainJob node.

Run by ``xgboost.yaml`` on each node of a TrainJob through the ``xgboost-distributed``
runtime, whose policy gives every node ``DMLC_TRACKER_URI``, ``DMLC_TRACKER_PORT``,
``DMLC_TASK_ID`` and ``DMLC_NUM_WORKER``. Worker 0 starts XGBoost's tracker at that
address; every worker joins the collective, trains on its own shard of the training set
(the histograms are all-reduced, so all of them grow the same trees) and prints its test
accuracy and a digest of the model. Exits 1 if the accuracy is below ``--min-accuracy``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=120, help="seconds to wait for peers")
    parser.add_argument("--min-accuracy", type=float, default=0.8)
    args = parser.parse_args(argv)

    import numpy as np
    import xgboost
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from xgboost import collective
    from xgboost.tracker import RabitTracker

    rank = int(os.environ["DMLC_TASK_ID"])
    workers = int(os.environ["DMLC_NUM_WORKER"])
    host, port = os.environ["DMLC_TRACKER_URI"], int(os.environ["DMLC_TRACKER_PORT"])
    tracker = None
    if rank == 0:
        tracker = RabitTracker(n_workers=workers, host_ip=host, port=port, timeout=args.timeout)
        tracker.start()

    features, labels = load_digits(return_X_y=True)
    train_x, test_x, train_y, test_y = train_test_split(
        features, labels, test_size=0.25, random_state=0, stratify=labels
    )
    shard = slice(rank, None, workers)
    with collective.CommunicatorContext(
        dmlc_tracker_uri=host, dmlc_tracker_port=port, dmlc_task_id=str(rank)
    ):
        assert collective.get_world_size() == workers
        booster = xgboost.train(
            {"objective": "multi:softmax", "num_class": 10, "tree_method": "hist", "nthread": 1},
            xgboost.DMatrix(train_x[shard], label=train_y[shard]),
            num_boost_round=args.rounds,
        )
        rank_in_collective = collective.get_rank()
    predicted = booster.predict(xgboost.DMatrix(test_x))
    accuracy = float(np.mean(predicted == test_y))
    digest = hashlib.sha256(booster.save_raw("json")).hexdigest()[:16]
    print(
        f"[worker {rank_in_collective}/{workers}] rounds={args.rounds} "
        f"test_accuracy={accuracy:.4f} model={digest}",
        flush=True,
    )
    if tracker is not None:
        tracker.wait_for(args.timeout)
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
