"""``JobClient`` on the local substrate: every way to hand it a job, and every method."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ManifestError
from kubemill.kinds import load_one
from kubemill.sdk import (
    BACKENDS,
    JobClient,
    JobExists,
    JobNotFound,
    SubstrateError,
    register_backend,
)
from kubemill.substrates.local import NotRunnableLocally


def manifest(name: str, *, master: str, worker: str | None = None, **extra: Any) -> dict[str, Any]:
    """A PyTorchJob manifest whose replicas run ``python -c`` snippets."""

    def replica(code: str) -> dict[str, Any]:
        container = {"name": "pytorch", "image": "local", "command": ["python", "-c", code]}
        container.update(extra)
        return {"restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}

    specs = {"Master": replica(master)}
    if worker is not None:
        specs["Worker"] = replica(worker)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobClient]:
    """A client on a private state dir; deletes (and so stops) every job at the end."""
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.chdir(tmp_path)
    local = JobClient(state_dir=tmp_path / "state")
    yield local
    for view in local.list():
        local.delete(view.name, view.namespace)


def test_submit_a_path_runs_in_the_manifests_directory(client: JobClient, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "data.txt").write_text("found it\n")
    path = folder / "job.yaml"
    path.write_text(
        yaml.safe_dump(manifest("frompath", master="print(open('data.txt').read().strip())"))
    )
    view = client.submit(str(path))
    assert view.name == "frompath" and not view.finished
    done = client.wait("frompath", timeout=120)
    assert done.phase == "Succeeded"
    assert [line.text for line in client.logs("frompath")] == ["found it"]


@pytest.mark.parametrize(
    "form",
    ["yaml-text", "dict", "model", "pathlib"],
)
def test_submit_accepts_every_form_of_job(client: JobClient, tmp_path: Path, form: str) -> None:
    doc = manifest("forms", master="print('ok')")
    source: Any
    if form == "yaml-text":
        source = yaml.safe_dump(doc)
    elif form == "dict":
        source = doc
    elif form == "model":
        source = load_one(doc)
    else:
        source = tmp_path / "forms.yaml"
        source.write_text(yaml.safe_dump(doc))
    client.submit(source, detach=False)
    assert client.wait("forms", timeout=120).phase == "Succeeded"


def test_run_blocks_until_the_end(client: JobClient) -> None:
    view = client.run(manifest("blocking", master="import sys; sys.exit(4)"), timeout=120)
    assert view.finished and view.phase == "Failed"
    assert view.replicas[0].exit_code == 4


def test_duplicate_name_is_refused_with_a_hint(client: JobClient) -> None:
    client.submit(manifest("twice", master="pass"), detach=False)
    with pytest.raises(JobExists, match=r"already exists.*delete it first"):
        client.submit(manifest("twice", master="pass"), detach=False)


def test_missing_command_fails_before_anything_is_recorded(client: JobClient) -> None:
    doc = manifest("nocmd", master="pass")
    del doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    with pytest.raises(NotRunnableLocally) as caught:
        client.submit(doc)
    assert "no container image to take an entrypoint from" in str(caught.value)
    assert caught.value.errors[0].path.endswith("containers[0].command")
    assert client.list() == []


def test_namespace_must_be_a_name(client: JobClient) -> None:
    with pytest.raises(SubstrateError, match=r"namespace '\.\./up' is not a valid name"):
        client.submit(manifest("ns", master="pass"), namespace="../up")
    doc = manifest("ns", master="pass")
    doc["metadata"]["namespace"] = "team"
    with pytest.raises(SubstrateError, match="the manifest says namespace 'team'"):
        client.submit(doc, namespace="other")


def test_bad_manifests_raise_manifest_errors(client: JobClient) -> None:
    with pytest.raises(ManifestError):
        client.submit("kind: Nope\napiVersion: v1\n")
    with pytest.raises(ManifestError, match="cannot read"):
        client.submit("does-not-exist.yaml")


def test_follow_interleaves_replicas_line_by_line_as_they_come(
    client: JobClient, tmp_path: Path
) -> None:
    # The replicas only go on once this test has *read* the other's last line (it
    # acknowledges each line with a file), so follow must deliver lines while the job
    # runs, and the only possible order is a strict alternation.
    master = textwrap.dedent(
        """
        import os, time
        for i in range(3):
            print('master', i, flush=True)
            while not os.path.exists('ack-worker-%d' % i): time.sleep(0.01)
        """
    )
    worker = textwrap.dedent(
        """
        import os, time
        for i in range(3):
            while not os.path.exists('ack-master-%d' % i): time.sleep(0.01)
            print('worker', i, end='', flush=True)
            print(flush=True)
        """
    )
    client.submit(manifest("pingpong", master=master, worker=worker), detach=False)
    lines = []
    for line in client.logs("pingpong", follow=True):
        lines.append((line.replica, line.text))
        who, index = line.text.split()
        (tmp_path / f"ack-{who}-{index}").touch()
    assert lines == [
        (f"pingpong-{who}-0", f"{who} {i}") for i in range(3) for who in ("master", "worker")
    ]
    assert client.get("pingpong").finished
    only_worker = [line.text for line in client.logs("pingpong", replica="worker-0")]
    assert only_worker == ["worker 0", "worker 1", "worker 2"]
    with pytest.raises(SubstrateError, match=r"no replica 'ps-0'.*master-0, worker-0"):
        list(client.logs("pingpong", replica="ps-0"))


def test_get_list_events_and_delete(client: JobClient) -> None:
    client.run(manifest("first", master="pass"), timeout=120)
    client.run(manifest("second", master="pass"), namespace="team", timeout=120)
    assert [v.name for v in client.list()] == ["first", "second"]
    assert [v.name for v in client.list("team")] == ["second"]
    assert client.get("second", "team").namespace == "team"
    with pytest.raises(JobNotFound):
        client.get("second")
    reasons = [e.reason for e in client.events("first")]
    assert reasons[0] == "PyTorchJobCreated" and reasons[-1] == "PyTorchJobSucceeded"
    client.delete("first")
    with pytest.raises(JobNotFound):
        client.get("first")
    assert JobClient(state_dir=client.backend.state_dir).get("second", "team").phase == "Succeeded"  # type: ignore[attr-defined]


def test_interrupt_records_interrupted(client: JobClient) -> None:
    client.submit(manifest("ctrlc", master="import time; print('up', flush=True); time.sleep(60)"))
    for line in client.logs("ctrlc", follow=True):
        if line.text == "up":
            break
    view = client.interrupt("ctrlc")
    failed = view.status.condition("Failed")  # type: ignore[arg-type]
    assert failed is not None and failed.reason == "Interrupted"
    assert view.replicas[0].phase == "Stopped"


def test_kubernetes_needs_a_cluster_and_substrates_plug_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(SubstrateError, match="no kubeconfig found"):
        JobClient("kubernetes")
    with pytest.raises(SubstrateError, match="unknown substrate 'mars'"):
        JobClient("mars")
    with pytest.raises(SubstrateError, match="kubeconfig do not apply to the local"):
        JobClient("local", kubeconfig="/nowhere")
    sentinel = object()
    register_backend("fake", lambda **options: sentinel)  # type: ignore[arg-type]
    try:
        assert JobClient("fake").backend is sentinel
    finally:
        del BACKENDS["fake"]
