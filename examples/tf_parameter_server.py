"""Parameter-server training of a small classifier on scikit-learn's digits with TensorFlow.

Run by ``tf-parameter-server.yaml``: a TFJob with a Chief, parameter servers and workers.
Every replica reads its role and the cluster from ``TF_CONFIG`` (set by kubemill exactly as
the Kubeflow operator sets it) and prints it first, as ``TF_CONFIG_JSON=<json>``.

- The PS and worker replicas start a ``tf.distribute.Server`` and serve until the chief is
  done (see :mod:`cluster_watch`).
- The chief is the coordinator of ``tf.distribute.experimental.ParameterServerStrategy``: it
  creates the model's variables (they live on the PS), and schedules training steps on the
  workers with a ``ClusterCoordinator``. Each step runs on a worker, reads the variables
  from the PS and writes the updated values back (asynchronous SGD).

The training loop is written by hand (Keras 3's ``model.fit`` does not run under the
multi-worker strategies in this TensorFlow). The chief prints the mean loss of each epoch,
which falls, and the test accuracy, which rises; it exits 1 if the loss did not fall.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from cluster_watch import log, wait_until_gone

# TensorFlow's C++ start-up chatter would bury the training output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.3)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument(
        "--report-every", type=int, default=10, help="workers log every Nth step they take"
    )
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow intra-op threads")
    parser.add_argument(
        "--wait-for-chief",
        type=float,
        default=600.0,
        help="seconds a PS/worker waits for the chief to appear before giving up",
    )
    return parser.parse_args(argv)


def read_tf_config() -> dict[str, object]:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        sys.exit(
            "error: TF_CONFIG is not set. Run this as a TFJob replica "
            "(kubemill run examples/tf-parameter-server.yaml)."
        )
    config = json.loads(raw)
    # One line, so that a test can parse each replica's TF_CONFIG back out of its log.
    print("TF_CONFIG_JSON=" + json.dumps(config, separators=(",", ":")), flush=True)
    return config


def configure_threads(tf: Any, threads: int) -> None:
    # Several TensorFlow processes share few cores: keep each one small.
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)


def run_server(
    role: str, task_type: str, task_index: int, config: dict, args: argparse.Namespace
) -> int:
    import tensorflow as tf

    configure_threads(tf, args.threads)
    cluster = tf.train.ClusterSpec(config["cluster"])
    server = tf.distribute.Server(
        cluster,
        job_name=task_type,
        task_index=task_index,
        protocol="grpc",
        config=tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=2
        ),
        start=True,
    )
    log(role, f"tf.distribute.Server started at {server.target}")
    wait_until_gone(role, config["cluster"]["chief"], wait_for_start=args.wait_for_chief)
    return 0


def run_chief(role: str, args: argparse.Namespace) -> int:
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    configure_threads(tf, args.threads)
    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(1234).permutation(len(labels))
    n_test = len(labels) // 5
    test_x, test_y = features[order[:n_test]], labels[order[:n_test]]
    train_x, train_y = features[order[n_test:]], labels[order[n_test:]]

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    cluster = resolver.cluster_spec()
    log(
        role,
        f"ParameterServerStrategy with {cluster.num_tasks('worker')} workers and "
        f"{cluster.num_tasks('ps')} parameter servers",
    )

    def glorot(shape: tuple[int, int], seed: int) -> tf.Tensor:
        # Glorot-uniform initialisation, reproducible: the same seed gives the same weights.
        limit = (6.0 / sum(shape)) ** 0.5
        return tf.random.stateless_uniform(shape, seed=[seed, 0], minval=-limit, maxval=limit)

    with strategy.scope():
        # Created under the strategy's scope, so they are placed on the parameter servers.
        w1 = tf.Variable(glorot((64, args.hidden), 1), name="w1")
        b1 = tf.Variable(tf.zeros([args.hidden]), name="b1")
        w2 = tf.Variable(glorot((args.hidden, 10), 2), name="w2")
        b2 = tf.Variable(tf.zeros([10]), name="b2")
        steps_applied = tf.Variable(0, dtype=tf.int64, name="steps_applied")
    weights = [w1, b1, w2, b2]
    log(role, "variables placed on: " + ", ".join(sorted({v.device for v in weights})))

    def logits_of(x: tf.Tensor) -> tf.Tensor:
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2

    def dataset_fn() -> tf.data.Dataset:
        # Built on each worker; each shuffles with its own seed.
        ds = tf.data.Dataset.from_tensor_slices((train_x, train_y))
        return ds.shuffle(len(train_y)).repeat().batch(args.batch_size)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(iterator: object) -> tf.Tensor:
        def step_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits_of(x))
                )
            for var, grad in zip(weights, tape.gradient(loss, weights), strict=True):
                var.assign_sub(args.lr * grad)
            step = steps_applied.assign_add(1)
            if step % args.report_every == 0:
                # Runs on the worker that took this step: it shows up in that worker's log.
                tf.print("[worker] applied step", step, "loss", loss, output_stream=sys.stdout)
            return loss

        x, y = next(iterator)
        return strategy.run(step_fn, args=(x, y))

    epoch_losses: list[float] = []
    for epoch in range(1, args.epochs + 1):
        started = time.monotonic()
        results = [
            coordinator.schedule(train_step, args=(per_worker_iterator,))
            for _ in range(args.steps_per_epoch)
        ]
        coordinator.join()
        mean_loss = float(np.mean([r.fetch() for r in results]))
        epoch_losses.append(mean_loss)
        accuracy = float(np.mean(np.argmax(logits_of(test_x).numpy(), axis=1) == test_y))
        log(
            role,
            f"epoch {epoch}/{args.epochs} loss={mean_loss:.4f} test_accuracy={accuracy:.4f} "
            f"steps_on_ps={int(steps_applied.numpy())} ({time.monotonic() - started:.2f}s)",
        )

    if not epoch_losses[-1] < epoch_losses[0]:
        log(role, f"error: loss did not fall ({epoch_losses[0]:.4f} -> {epoch_losses[-1]:.4f})")
        return 1
    log(
        role,
        f"done: loss {epoch_losses[0]:.4f} -> {epoch_losses[-1]:.4f}, test_accuracy={accuracy:.4f}",
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = read_tf_config()
    task = config.get("task") or {}
    task_type, task_index = str(task.get("type", "")), int(task.get("index", 0))
    role = f"{task_type}-{task_index}"
    log(role, f"cluster={json.dumps(config.get('cluster'))}")
    if task_type in ("ps", "worker"):
        return run_server(role, task_type, task_index, config, args)
    if task_type == "chief":
        return run_chief(role, args)
    sys.exit(
        f"error: unexpected task type {task_type!r} in TF_CONFIG; expected chief, ps or worker"
    )


if __name__ == "__main__":
    sys.exit(main())
