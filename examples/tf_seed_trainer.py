"""A trainer in the seed's style: ``--ps_hosts --worker_hosts --job_name --task_index``.

The survey that kubemill grew from starts distributed TensorFlow by hand on four hosts::

    python trainer.py --ps_hosts=ps0:2222,ps1:2222 --worker_hosts=worker0:2222,worker1:2222 \
        --job_name=worker --task_index=0

``tf-seed-style.yaml`` runs this unchanged: kubemill gives every TFJob replica
``TF_PS_HOSTS``, ``TF_WORKER_HOSTS``, ``TF_JOB_NAME`` and ``TF_TASK_INDEX``, and the
manifest's ``args`` pass them as the flags via ``$(VAR)`` expansion.

The training is between-graph replication with asynchronous SGD, the design such trainers
use: every process builds the cluster from the flags and starts a ``tf.distribute.Server``.

- A PS holds the variables and serves until every worker is done.
- Each worker builds the same graph; ``replica_device_setter`` puts the variables on the
  PS and the computation on the worker itself. Worker 0 initialises the variables; the
  others wait for that, and all of them wait until every worker has joined. Each worker
  trains on its own shard of the digits data set and updates the shared variables, until
  the shared ``global_step`` reaches ``--steps``.
  Worker 0 then reports the test accuracy; the job succeeds when worker 0 does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from cluster_watch import log, wait_until_gone

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps_hosts", required=True, help="comma-separated host:port list")
    parser.add_argument("--worker_hosts", required=True, help="comma-separated host:port list")
    parser.add_argument("--job_name", required=True, choices=["ps", "worker"])
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--steps", type=int, default=200, help="global steps over all workers")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--report_every", type=int, default=25)
    parser.add_argument(
        "--wait_for_workers",
        type=float,
        default=600.0,
        help="seconds to wait for the workers (PS: the first one; workers: all) to join",
    )
    return parser.parse_args(argv)


def hosts(flag: str, value: str) -> list[str]:
    found = [h.strip() for h in value.split(",") if h.strip()]
    if not found or any(":" not in h for h in found):
        sys.exit(f"error: --{flag} must be a comma-separated list of host:port, got {value!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ps_hosts = hosts("ps_hosts", args.ps_hosts)
    worker_hosts = hosts("worker_hosts", args.worker_hosts)
    role = f"{args.job_name}-{args.task_index}"
    mine = ps_hosts if args.job_name == "ps" else worker_hosts
    if not 0 <= args.task_index < len(mine):
        sys.exit(
            f"error: --task_index={args.task_index} but there are {len(mine)} {args.job_name} hosts"
        )
    log(role, f"ps_hosts={ps_hosts} worker_hosts={worker_hosts}")

    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    session_config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=1,
        inter_op_parallelism_threads=2,
        # A worker talks to the PS and to itself only, not to the other workers.
        device_filters=["/job:ps", f"/job:{args.job_name}/task:{args.task_index}"],
    )
    server = tf.distribute.Server(
        cluster,
        job_name=args.job_name,
        task_index=args.task_index,
        config=session_config,
        start=True,
    )
    log(role, f"server started at {server.target}")

    if args.job_name == "ps":
        wait_until_gone(role, worker_hosts, wait_for_start=args.wait_for_workers)
        return 0
    return train(role, args, cluster, server, session_config, n_workers=len(worker_hosts))


def train(
    role: str,
    args: argparse.Namespace,
    cluster: Any,
    server: Any,
    session_config: Any,
    *,
    n_workers: int,
) -> int:
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(1234).permutation(len(labels))
    n_test = len(labels) // 5
    test_x, test_y = features[order[:n_test]], labels[order[:n_test]]
    shard = order[n_test:][args.task_index :: n_workers]  # this worker's part of the training set
    train_x, train_y = features[shard], labels[shard]
    log(role, f"training on a shard of {len(shard)} samples")

    worker_device = f"/job:worker/task:{args.task_index}"
    with tf.Graph().as_default():
        with tf.compat.v1.device(
            tf.compat.v1.train.replica_device_setter(worker_device=worker_device, cluster=cluster)
        ):
            x = tf.compat.v1.placeholder(tf.float32, [None, 64], name="x")
            y = tf.compat.v1.placeholder(tf.int64, [None], name="y")
            init = tf.compat.v1.glorot_uniform_initializer(seed=0)
            w1 = tf.compat.v1.get_variable("w1", [64, args.hidden], initializer=init)
            b1 = tf.compat.v1.get_variable("b1", [args.hidden], initializer=tf.zeros_initializer())
            w2 = tf.compat.v1.get_variable("w2", [args.hidden, 10], initializer=init)
            b2 = tf.compat.v1.get_variable("b2", [10], initializer=tf.zeros_initializer())
            global_step = tf.compat.v1.train.get_or_create_global_step()
            # Counts the workers that have joined, so that they start training together.
            workers_ready = tf.compat.v1.get_variable(
                "workers_ready", [], tf.int64, tf.zeros_initializer(), trainable=False
            )
            join = tf.compat.v1.assign_add(workers_ready, 1)
            logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
            accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
            train_op = tf.compat.v1.train.GradientDescentOptimizer(args.lr).minimize(
                loss, global_step=global_step
            )
            init_op = tf.compat.v1.global_variables_initializer()
        log(role, f"variables on {sorted({v.device for v in tf.compat.v1.global_variables()})}")

        with tf.compat.v1.Session(server.target, config=session_config) as session:
            if args.task_index == 0:
                session.run(init_op)
                log(role, "initialised the shared variables")
            else:
                not_ready = tf.compat.v1.report_uninitialized_variables()
                while len(session.run(not_ready)) > 0:
                    time.sleep(0.2)
                log(role, "shared variables are ready")
            session.run(join)
            deadline = time.monotonic() + args.wait_for_workers
            while (joined := session.run(workers_ready)) < n_workers:
                if time.monotonic() > deadline:
                    log(role, f"error: only {joined} of {n_workers} workers joined")
                    return 1
                time.sleep(0.1)
            log(role, f"all {n_workers} workers joined; training")

            rng = np.random.default_rng(args.task_index)
            first_loss: float | None = None
            step, local_steps = 0, 0
            while step < args.steps:
                batch = rng.choice(len(train_y), size=args.batch_size, replace=False)
                _, batch_loss, step = session.run(
                    [train_op, loss, global_step], {x: train_x[batch], y: train_y[batch]}
                )
                local_steps += 1
                if first_loss is None:
                    first_loss = float(batch_loss)
                if local_steps % args.report_every == 0:
                    log(role, f"global_step={step} local_steps={local_steps} loss={batch_loss:.4f}")
            test_loss, test_accuracy = session.run([loss, accuracy], {x: test_x, y: test_y})
    log(
        role,
        f"done: global_step={step} local_steps={local_steps} first_batch_loss={first_loss:.4f} "
        f"test_loss={test_loss:.4f} test_accuracy={test_accuracy:.4f}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
