"""The MarsCluster kind outside the operator: it loads and renders (the local substrate's
plan: tests/frameworks/test_mars_local_plan.py; real runs: tests/e2e/test_mars_cluster_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubemill.api import ManifestError
from kubemill.kinds import load_one
from kubemill.sdk.manifests import load_path
from kubemill.substrates.kubernetes.render import render_job

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mars-cluster.yaml"


def test_the_example_renders_the_cluster_owned_by_it() -> None:
    (job,) = load_path(EXAMPLE)
    objects = render_job(job, namespace="team-a")
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Role", "mars-demo-pod-reader"),
        ("RoleBinding", "mars-demo-pod-reader"),
        ("Deployment", "mars-demo-supervisor"),
        ("Deployment", "mars-demo-worker"),
        ("Service", "mars-demo-web"),
    ]
    for obj in objects:
        assert obj["metadata"]["namespace"] == "team-a"
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "MarsCluster",
            "mars-demo",
            True,
        )


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"workerMem": "1g"}, "spec.workerCpu"),
        ({"workerCpu": 1, "workerMem": "1g", "minWorkerNum": 5}, "spec.minWorkerNum"),
        ({"workerCpu": 1, "workerMem": "1q"}, "spec.workerMem"),
        ({"workerCpu": 1, "workerMem": "1g", "workerCacheMem": "101%"}, "spec.workerCacheMem"),
    ],
)
def test_bad_fields_are_refused_at_their_path(spec: dict[str, object], path: str) -> None:
    manifest = {"apiVersion": "kubemill.dev/v1", "kind": "MarsCluster", "metadata": {"name": "m"}}
    with pytest.raises(ManifestError) as caught:
        load_one({**manifest, "spec": spec})
    assert path in str(caught.value)
