"""A TrainJob's own run policy on the local substrate, through the real CLI: its
``activeDeadlineSeconds`` fails it with upstream's reason, and a node's non-zero exit
fails it (the runtime's pods restart ``OnFailure`` up to the Job's ``backoffLimit``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from support.e2e_support import Cli, processes_with_token


def write_trainjob(cli: Cli, name: str, command: list[str], **spec: Any) -> Path:
    path = cli.cwd / f"{name}.yaml"
    manifest = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"image": "local", "numNodes": 2, "command": command},
            **spec,
        },
    }
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return path


def conditions(cli: Cli, name: str) -> dict[str, dict[str, Any]]:
    shown = cli("get", name, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    return {c["type"]: c for c in json.loads(shown.stdout)["status"]["conditions"]}


def test_the_deadline_fails_a_trainjob_with_upstreams_reason(cli: Cli) -> None:
    path = write_trainjob(cli, "late", ["sleep", "60"], activeDeadlineSeconds=1)
    done = cli.run(path)
    assert done.returncode != 0, done.stdout
    failed = conditions(cli, "late")["Failed"]
    assert (failed["status"], failed["reason"]) == ("True", "DeadlineExceeded")
    assert not processes_with_token(cli.token), "a node outlived its job"


def test_a_node_failing_for_good_fails_the_trainjob(cli: Cli) -> None:
    # Node 1 always exits 3; OnFailure restarts it in place until the backoff limit (6).
    script = 'test "$PET_NODE_RANK" = 0 || exit 3'
    path = write_trainjob(cli, "broken", ["sh", "-c", script])
    done = cli.run(path)
    assert done.returncode != 0, done.stdout
    failed = conditions(cli, "broken")["Failed"]
    assert (failed["status"], failed["reason"]) == ("True", "BackoffLimitExceeded")
    shown = json.loads(cli("get", "broken", "-o", "json").stdout)
    # Restarts over the backoff limit fail it: the seventh.
    assert shown["status"]["replicaStatuses"]["node"]["restarts"] == 7
