"""Real RayJobs on the local substrate, through the CLI: a Ray cluster of the RayJob's own
(a head and ``ray start`` workers), the Ray job submitted to it, and the RayJob's outcome
Ray's own, read from the head's job API.

- examples/ray/rayjob-sum.yaml (K8sJobMode): the submitter runs ``ray job submit
  --no-wait`` and follows; the job's tasks run on both workers and its sum checks; the
  RayJob Succeeds with KubeRay's status fields.
- examples/ray/rayjob-http.yaml (HTTPMode): kubemill submits the job over HTTP with its
  runtime environment; the job raises, and the RayJob is Failed with Ray's message.
- A RayJob with ``backoffLimit: 1`` whose entrypoint fails on its first attempt (a marker
  file in the test's directory says which attempt it is): retried on a new cluster (a new
  head: another Ray node id), it Succeeds with ``failed`` 1 and ``succeeded`` 1.

Nothing is left behind: every process these jobs started is gone at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.e2e_support import EXAMPLES, Cli, processes_with_token
from support.engines import skip_without

pytestmark = pytest.mark.engine


def _status(cli: Cli, name: str) -> dict[str, Any]:
    done = cli("get", "-o", "json", name)
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)["status"]
    assert isinstance(status, dict)
    return status


def test_a_rayjob_runs_tasks_on_two_workers_and_succeeds_as_ray_says(cli: Cli) -> None:
    skip_without("ray", "ray")
    done = cli.run(EXAMPLES / "ray" / "rayjob-sum.yaml")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    assert "RayJob rayjob-sum Succeeded" in done.stdout
    # Succeeded is Ray's SUCCEEDED: the entrypoint's own checks passed (its sum, and its
    # tasks on both workers). Its printed output is the submitter's to follow, which the
    # verdict may stop before the last line: not asserted.
    status = _status(cli, "rayjob-sum")
    assert status["jobStatus"] == "SUCCEEDED"
    assert status["jobDeploymentStatus"] == "Complete"
    assert status["jobId"].startswith("rayjob-sum-")
    assert status["dashboardURL"].startswith("127.0.0.1:")
    assert status["rayJobInfo"]["endTime"] >= status["rayJobInfo"]["startTime"]
    assert not processes_with_token(cli.token)


def test_a_ray_job_that_raises_fails_the_rayjob_with_rays_message(cli: Cli) -> None:
    skip_without("ray", "ray")
    done = cli.run(EXAMPLES / "ray" / "rayjob-http.yaml")
    assert done.returncode != 0, done.stdout[-4000:]
    assert "RayJob rayjob-http Failed" in done.stdout
    status = _status(cli, "rayjob-http")
    assert status["jobStatus"] == "FAILED"
    assert status["jobDeploymentStatus"] == "Failed"
    assert status["reason"] == "AppFailed"
    # Ray's message names the entrypoint's failure; the runtime environment reached it.
    assert "the answer is 41, not 42" in status["message"], status["message"]
    failed = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed and "the answer is 41" in failed[0]["message"]
    assert not processes_with_token(cli.token)


RETRIED_ENTRYPOINT = """python -c "
import os, sys, ray
ray.init()
marker = os.path.join(sys.argv[1], 'attempts')
with open(marker, 'a') as out:
    out.write(ray.get_runtime_context().get_node_id() + chr(10))
with open(marker) as seen:
    tries = len(seen.read().split())
sys.exit('the first attempt fails on purpose' if tries == 1 else 0)
" """


def test_a_failed_attempt_is_retried_on_a_new_cluster_and_the_second_succeeds(
    cli: Cli, tmp_path: Path
) -> None:
    skip_without("ray", "ray")
    doc = yaml.safe_load((EXAMPLES / "ray" / "rayjob-http.yaml").read_text(encoding="utf-8"))
    doc["metadata"]["name"] = "rayjob-retry"
    spec = doc["spec"]
    spec["backoffLimit"] = 1
    spec["submissionMode"] = "K8sJobMode"  # the submitter too is created anew
    spec["entrypoint"] = RETRIED_ENTRYPOINT + str(tmp_path)
    del spec["runtimeEnvYAML"]
    spec["rayClusterSpec"]["workerGroupSpecs"] = []
    manifest = tmp_path / "rayjob-retry.yaml"
    manifest.write_text(yaml.safe_dump(doc), encoding="utf-8")
    done = cli.run(manifest)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    assert "RayJob rayjob-retry Succeeded" in done.stdout
    status = _status(cli, "rayjob-retry")
    assert (status["failed"], status["succeeded"]) == (1, 1)
    assert status["jobStatus"] == "SUCCEEDED"
    assert status["jobDeploymentStatus"] == "Complete"
    # Two attempts, each on a cluster of its own: two heads, two Ray nodes.
    nodes = (tmp_path / "attempts").read_text(encoding="utf-8").split()
    assert len(nodes) == 2 and nodes[0] != nodes[1], nodes
    assert not processes_with_token(cli.token)
