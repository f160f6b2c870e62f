"""A TrainJob's ``runtimePatches`` (upstream's field): what a manager patches in the steps'
pod templates reaches the pods kubemill renders for Kubernetes (valid for Kubernetes' own
schemas and the generated CRD) and the processes it runs locally; what kubemill cannot
realise is refused at its field path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ManifestError
from kubemill.kinds import crds, load_one
from kubemill.substrates.kubernetes.render import render_job
from support.e2e_support import Cli
from support.manifest_checks import crd_validator, k8s_errors
from support.trainer_runtimes import node_runtime

UPSTREAM = "trainer.kubeflow.org/v1alpha1"
JOB = "trainingRuntimeSpec.template.spec.replicatedJobs"


def patch(manager: str, *jobs: dict[str, Any], **template: Any) -> dict[str, Any]:
    """A runtime patch of ``manager`` over the given replicated jobs' patches."""
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {**template, "spec": {"replicatedJobs": list(jobs)}}},
    }


def pods_of(name: str, *, metadata: Any = None, **spec: Any) -> dict[str, Any]:
    """A replicated job's patch of its pods' metadata and spec."""
    pod: dict[str, Any] = {"spec": spec}
    if metadata is not None:
        pod["metadata"] = metadata
    return {"name": name, "template": {"spec": {"template": pod}}}


def trainjob(*patches: dict[str, Any], runtime: str = "torch-distributed") -> dict[str, Any]:
    return {
        "apiVersion": UPSTREAM,
        "kind": "TrainJob",
        "metadata": {"name": "patched"},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {"image": "python:3.12", "command": ["torchrun", "train.py"]},
            "runtimePatches": list(patches),
        },
    }


SIDECAR = {"name": "sidecar", "image": "busybox", "command": ["sleep", "1"]}


def test_patches_reach_the_rendered_pods_in_order() -> None:
    first = patch(
        "kueue.x-k8s.io/manager",
        pods_of(
            "node",
            metadata={"labels": {"queue": "a", "team": "ml"}, "annotations": {"note": "x"}},
            nodeSelector={"pool": "cpu"},
            tolerations=[{"key": "spot", "operator": "Exists"}],
            volumes=[{"name": "data", "emptyDir": {}}],
            serviceAccountName="trainer",
        ),
    )
    second = patch(
        "me",
        pods_of(
            "node",
            metadata={"labels": {"queue": "b"}},
            nodeSelector={"zone": "z1"},
            tolerations=[{"key": "gpu", "operator": "Exists"}],
            volumes=[{"name": "data", "hostPath": {"path": "/data"}}],
            schedulingGates=[{"name": "example.com/wait"}],
        ),
    )
    job = load_one(trainjob(first, second))
    pods = [o for o in render_job(job) if o["kind"] == "Pod"]
    assert len(pods) == 1
    (pod,) = pods
    assert k8s_errors(pod) == []
    labels = pod["metadata"]["labels"]
    assert (labels["queue"], labels["team"]) == ("b", "ml")  # the later patch wins by key
    assert pod["metadata"]["annotations"]["note"] == "x"
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"pool": "cpu", "zone": "z1"}
    assert [t["key"] for t in spec["tolerations"]] == ["spot", "gpu"]
    assert spec["volumes"] == [{"name": "data", "hostPath": {"path": "/data"}}]
    assert spec["serviceAccountName"] == "trainer"
    assert spec["schedulingGates"] == [{"name": "example.com/wait"}]
    # The trainer's values still apply on top, to the container the TrainJob owns.
    assert spec["containers"][0]["command"] == ["torchrun", "train.py"]


def test_a_side_containers_env_and_mounts_are_patched() -> None:
    from kubemill.engines.trainer.api import runtimes
    from kubemill.engines.trainer.api.defaults import DEFAULT_RUNTIMES

    doc = copy.deepcopy(DEFAULT_RUNTIMES[0])
    doc["metadata"]["name"] = "torch-with-sidecar"
    node = doc["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["spec"]["template"]["spec"]["containers"].append(
        {**SIDECAR, "env": [{"name": "LEVEL", "value": "info"}]}
    )
    added = runtimes.add(doc)
    try:
        side = {
            "name": "sidecar",
            "env": [{"name": "LEVEL", "value": "debug"}, {"name": "EXTRA", "value": "1"}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        }
        job = load_one(
            trainjob(patch("me", pods_of("node", containers=[side])), runtime="torch-with-sidecar")
        )
        (pod,) = [o for o in render_job(job) if o["kind"] == "Pod"]
        sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == "sidecar")
        assert sidecar["env"] == [
            {"name": "LEVEL", "value": "debug"},
            {"name": "EXTRA", "value": "1"},
        ]
        assert sidecar["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    finally:
        runtimes.remove(added)


def test_a_patched_trainjob_is_valid_for_the_generated_crd() -> None:
    doc = trainjob(
        patch(
            "kueue.x-k8s.io/manager",
            pods_of("node", metadata={"labels": {"q": "a"}}, nodeSelector={"pool": "cpu"}),
        )
    )
    (crd,) = [c for c in crds() if c["spec"]["names"]["kind"] == "TrainJob"]
    ours = {**doc, "apiVersion": "kubemill.dev/v1"}
    assert [e.message for e in crd_validator(crd).iter_errors(ours)] == []
    # The schema types the patch: a field upstream's patch lacks is not accepted.
    bad = copy.deepcopy(ours)
    bad["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][
        0
    ]["template"]["spec"]["template"]["spec"]["hostNetwork"] = True
    assert [e.message for e in crd_validator(crd).iter_errors(bad)] != []


@pytest.mark.parametrize(
    ("patches", "runtime", "path", "said"),
    [
        pytest.param(
            [patch("me"), patch("me")],
            "torch-distributed",
            "spec.runtimePatches[1].manager",
            "one patch per manager",
            id="manager-twice",
        ),
        pytest.param(
            [patch("me", pods_of("workers"))],
            "torch-distributed",
            f"spec.runtimePatches[0].{JOB}[0].name",
            "no replicated job 'workers'",
            id="unknown-replicated-job",
        ),
        pytest.param(
            [patch("me", pods_of("node", containers=[{"name": "helper"}]))],
            "torch-distributed",
            f"spec.runtimePatches[0].{JOB}[0].template.spec.template.spec.containers[0].name",
            "no container 'helper'",
            id="unknown-container",
        ),
        pytest.param(
            [
                patch(
                    "me",
                    pods_of("node", containers=[{"name": "node", "env": [{"name": "A"}]}]),
                )
            ],
            "torch-distributed",
            f"spec.runtimePatches[0].{JOB}[0].template.spec.template.spec.containers[0].env",
            "is the TrainJob's to set",
            id="env-of-the-trainer",
        ),
        pytest.param(
            [
                patch(
                    "me",
                    pods_of("launcher", containers=[{"name": "launcher", "env": [{"name": "A"}]}]),
                )
            ],
            "mpi-distributed",
            f"spec.runtimePatches[0].{JOB}[0].template.spec.template.spec.containers[0].env",
            "the one kubemill runs as step 'launcher'",
            id="env-of-the-step-kubemill-runs",
        ),
        pytest.param(
            [patch("me", metadata={"labels": {"a": "b"}})],
            "torch-distributed",
            "spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.labels",
            "creates no JobSet",
            id="jobset-metadata",
        ),
        pytest.param(
            [
                patch(
                    "me",
                    {"name": "node", "template": {"metadata": {"annotations": {"a": "b"}}}},
                )
            ],
            "torch-distributed",
            f"spec.runtimePatches[0].{JOB}[0].template.metadata.annotations",
            "creates no Job per replicated job",
            id="job-metadata",
        ),
    ],
)
def test_what_kubemill_cannot_realise_is_refused_at_its_path(
    patches: list[dict[str, Any]], runtime: str, path: str, said: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        load_one(trainjob(*patches, runtime=runtime))
    found = {e.path: e for e in caught.value.errors}
    assert path in found, [str(e) for e in caught.value.errors]
    assert said in found[path].message


def test_patched_pod_labels_reach_the_local_processes(cli: Cli) -> None:
    node = {"name": "node", "image": "local", "command": ["sh", "-c", "echo queue=$QUEUE"]}
    runtime = node_runtime("labelled", node)
    job = {
        "apiVersion": UPSTREAM,
        "kind": "TrainJob",
        "metadata": {"name": "labelled-job"},
        "spec": {
            "runtimeRef": {"name": "labelled"},
            "trainer": {
                "env": [
                    {
                        "name": "QUEUE",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['queue']"}},
                    }
                ]
            },
            "runtimePatches": [
                patch(
                    "kueue.x-k8s.io/manager", pods_of("node", metadata={"labels": {"queue": "q1"}})
                )
            ],
        },
    }
    rt = Path(cli.cwd / "rt.yaml")
    rt.write_text(yaml.safe_dump(runtime), encoding="utf-8")
    manifest = Path(cli.cwd / "job.yaml")
    manifest.write_text(yaml.safe_dump(job), encoding="utf-8")
    done = cli("run", str(manifest), "--runtime", str(rt), timeout=120)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count("queue=q1") == 2, done.stdout
