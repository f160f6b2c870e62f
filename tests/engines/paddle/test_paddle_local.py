"""A real 2-process PaddlePaddle collective on the local substrate:
examples/paddle-collective.yaml through the CLI.

Each worker runs ``python -m paddle.distributed.launch``, which reads PADDLE_MASTER,
PADDLE_NNODES and PADDLE_JOB_ID; worker 0 serves the rendezvous on its POD_IP_DUMMY. An
``all_reduce`` sums the ranks, and gradients averaged with ``all_reduce`` leave the same
weights on both.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.e2e_support import EXAMPLES, Cli, fresh_cli, processes_with_token
from support.engines import skip_without

pytestmark = pytest.mark.engine

LINE = re.compile(r"^(worker-\d) \| \[rank (\d)/2\] (.*)$")
LOGS = EXAMPLES / "log"


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    with fresh_cli(tmp_path) as runner:
        yield runner
    shutil.rmtree(LOGS, ignore_errors=True)  # the launchers' logs, next to the example


def test_two_paddle_workers_all_reduce_and_train_alike(cli: Cli) -> None:
    skip_without("paddle", "paddle")
    done = cli.run(EXAMPLES / "paddle-collective.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PaddleJob paddle-collective Succeeded" in done.stdout

    said: dict[str, list[str]] = {"worker-0": [], "worker-1": []}
    for line in done.stdout.splitlines():
        if match := LINE.match(line.rstrip()):
            said[match[1]].append(match[3])
    weights = set()
    for replica, lines in said.items():
        assert "all_reduce=3.0 expected=3.0" in lines, (replica, lines)
        losses = [
            float(m[1]) for text in lines if (m := re.match(r"epoch \d+/\d+ loss=(.*)", text))
        ]
        assert len(losses) == 20 and losses[-1] < losses[0] / 100, losses
        [final] = [text for text in lines if text.startswith("weights=")]
        weights.add(final)
    assert len(weights) == 1, weights
    learned = [float(v) for v in weights.pop().removeprefix("weights=").split(",")]
    assert learned == pytest.approx([1.5, -2.0, 0.25], abs=0.01)
    # Each launcher kept its logs in a directory of its own (log/<replica>).
    assert sorted(p.name for p in LOGS.iterdir()) == [
        "paddle-collective-worker-0",
        "paddle-collective-worker-1",
    ]
    assert not processes_with_token(cli.token)
