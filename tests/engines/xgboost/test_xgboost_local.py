"""A real 2-worker XGBoost training on the local substrate, through XGBoost's collective:
examples/xgboost-collective.yaml through the CLI.

The Master runs the tracker at the MASTER_ADDR/MASTER_PORT kubemill gives both replicas;
each trains on a shard of its own, so only the collective (gradient histograms summed at
every split) can leave the two with the same model.
"""

from __future__ import annotations

import re

import pytest

from support.e2e_support import EXAMPLES, Cli, processes_with_token
from support.engines import skip_without

pytestmark = pytest.mark.engine

LINE = re.compile(r"^(master-0|worker-0) \| \[rank (\d)/2\] (.*)$")


def test_two_ranks_train_one_model_through_the_tracker(cli: Cli) -> None:
    skip_without("xgboost", "xgboost")
    done = cli.run(EXAMPLES / "xgboost-collective.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "XGBoostJob xgboost-collective Succeeded" in done.stdout

    said: dict[str, list[str]] = {"master-0": [], "worker-0": []}
    for line in done.stdout.splitlines():
        if match := LINE.match(line.rstrip()):
            # RANK: the Master 0, worker 0 is 1; the collective agrees.
            assert match[2] == ("0" if match[1] == "master-0" else "1"), line
            said[match[1]].append(match[3])
    digests = set()
    for replica, lines in said.items():
        rank = "0" if replica == "master-0" else "1"
        assert f"joined: collective rank {rank}" in lines, (replica, lines)
        errors = [
            float(m[1]) for text in lines if (m := re.match(r"round \d+/10 test_error=(.*)", text))
        ]
        assert len(errors) == 10 and errors[-1] < errors[0] and errors[-1] < 0.2, errors
        [digest] = [text for text in lines if text.startswith("model_digest=")]
        digests.add(digest)
    assert len(digests) == 1, digests
    assert not processes_with_token(cli.token)
