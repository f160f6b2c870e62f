"""``JobClient`` refuses what it cannot use, with errors that say what was expected.

A ``Job`` model changed in code is validated as a manifest would be (a name such as
``../../../escaped`` never reaches the disk); a value that is no job at all, or a
timeout below zero, is a clear ``TypeError``/``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.api import ManifestError
from kubemill.kinds import load_one
from kubemill.sdk import JobClient
from kubemill.sdk.manifests import load_path
from kubemill.substrates.local import NotRunnableLocally


def model(name: str = "fine") -> Any:
    container = {"name": "pytorch", "image": "local", "command": ["python", "-c", "pass"]}
    return load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "restartPolicy": "Never",
                        "template": {"spec": {"containers": [container]}},
                    }
                }
            },
        }
    )


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobClient]:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.chdir(tmp_path)
    local = JobClient(state_dir=tmp_path / "state")
    yield local
    for view in local.list():
        local.delete(view.name, view.namespace)


@pytest.mark.parametrize("bad", ["../../../escaped", "UPPER", ""])
def test_a_job_model_is_validated_like_a_manifest(
    client: JobClient, tmp_path: Path, bad: str
) -> None:
    job = model()
    job.metadata.name = bad
    with pytest.raises(ManifestError) as exc:
        client.submit(job)
    assert exc.value.errors[0].path == "metadata.name"
    assert exc.value.errors[0].source == "PyTorchJob object"
    assert client.list() == []
    assert not list(tmp_path.rglob("escaped*"))


def test_a_valid_job_model_still_runs(client: JobClient) -> None:
    job = model("valid")
    job.metadata.labels = {"team": "ml"}
    client.submit(job, detach=False)
    done = client.wait("valid", timeout=60)
    assert done.phase == "Succeeded"
    assert done.job.metadata.labels == {"team": "ml"}
    assert job.metadata.uid is None  # the caller's model is not changed


@pytest.mark.parametrize("bad", [42, None, 1.5, ["a.yaml"], b"kind: PyTorchJob"])
def test_something_that_is_no_job_is_a_clear_type_error(client: JobClient, bad: object) -> None:
    with pytest.raises(TypeError) as exc:
        client.submit(bad)  # type: ignore[arg-type]
    message = str(exc.value)
    assert message.startswith("a job is a Job model, a manifest file's path, YAML text or")
    assert f"got {type(bad).__name__}" in message


@pytest.mark.parametrize("timeout", [-1, -0.001, math.nan])
def test_a_negative_timeout_is_refused(client: JobClient, timeout: float) -> None:
    with pytest.raises(ValueError, match=r"timeout must be >= 0 seconds \(or None: no limit\)"):
        client.wait("anything", timeout=timeout)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        client.run(model("never"), timeout=timeout)
    assert client.list() == []  # refused before the job was submitted


def test_a_timeout_of_another_type_is_refused(client: JobClient) -> None:
    with pytest.raises(TypeError, match="timeout must be a number of seconds or None"):
        client.wait("anything", timeout="10")  # type: ignore[arg-type]


def test_a_validated_model_keeps_the_paths_the_user_wrote(client: JobClient) -> None:
    # The seed's v1alpha1 TFJob loads converted to v1; its errors name the v1alpha1 fields.
    seed = Path(__file__).resolve().parents[2] / "examples" / "seed" / "tfjob-v1alpha1.yaml"
    (job,) = load_path(seed)
    with pytest.raises(NotRunnableLocally) as exc:
        client.submit(job)
    paths = [e.path for e in exc.value.errors]
    assert "spec.replicaSpecs[0].template.spec.containers[0].command" in paths
    assert not any("tfReplicaSpecs" in p for p in paths)
