"""A real 2-process JAX job on the local substrate: examples/jax-psum.yaml through the CLI.

Both workers find worker 0's coordinator from the env kubemill gives them, a ``psum``
across the processes sums their ids, and the data-parallel training (gradients summed
with ``psum`` each step) leaves the same weights on both.
"""

from __future__ import annotations

import re

import pytest

from support.e2e_support import EXAMPLES, Cli, processes_with_token
from support.engines import skip_without

pytestmark = pytest.mark.engine

LINE = re.compile(r"^worker-(\d) \| \[process (\d)/2\] (.*)$")


def test_two_jax_processes_psum_over_cpu_collectives_and_train_alike(cli: Cli) -> None:
    skip_without("jax", "jax")
    done = cli.run(EXAMPLES / "jax-psum.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "JAXJob jax-psum Succeeded" in done.stdout

    said: dict[int, list[str]] = {0: [], 1: []}
    for line in done.stdout.splitlines():
        if match := LINE.match(line.rstrip()):
            # Worker i is process i: PROCESS_ID is the replica's index.
            assert match[1] == match[2], line
            said[int(match[1])].append(match[3])
    weights = set()
    for process, lines in said.items():
        assert "psum=3.0 expected=3.0" in lines, (process, lines)
        losses = [
            float(m[1]) for text in lines if (m := re.match(r"epoch \d+/\d+ loss=(.*)", text))
        ]
        assert len(losses) == 20 and losses[-1] < losses[0] / 100, losses
        [final] = [text for text in lines if text.startswith("weights=")]
        weights.add(final)
    # Every step applied the psum of both shards' gradients: one model on both.
    assert len(weights) == 1, weights
    learned = [float(v) for v in weights.pop().removeprefix("weights=").split(",")]
    assert learned == pytest.approx([2.0, -3.0, 0.5], abs=0.05)
    assert not processes_with_token(cli.token)
