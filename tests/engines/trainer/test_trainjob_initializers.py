"""A TrainJob's initializers on the local substrate, through the real CLI: the trainer's
nodes depending on an initializer's ``Complete`` start only once it has succeeded (the core's
succeeded start gate), the initializer given the TrainJob's ``storageUri``; an initializer
that would download from the network is refused at its field path before anything starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from support.e2e_support import Cli, processes_with_token

UPSTREAM = "trainer.kubeflow.org/v1alpha1"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def step(name: str, script: str, *, ancestor: str, **extra: Any) -> dict[str, Any]:
    container = {"name": name, "image": "local", "command": ["sh", "-c", script]}
    return {
        "name": name,
        **extra,
        "template": {
            "metadata": {"labels": {ANCESTOR: ancestor}},
            "spec": {"template": {"spec": {"containers": [container]}}},
        },
    }


def write(path: Path, *docs: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return path


def runtime_file(cli: Cli) -> Path:
    # The initializer takes a while and writes the file last: a node started before it
    # finished would find no file.
    initializer = 'sleep 1; echo "from $STORAGE_URI" > dataset.txt'
    nodes = 'cat dataset.txt && echo "node read it"'
    runtime = {
        "apiVersion": UPSTREAM,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "with-dataset"},
        "spec": {
            "mlPolicy": {"numNodes": 2},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        step("dataset-initializer", initializer, ancestor="dataset-initializer"),
                        {
                            **step("node", nodes, ancestor="trainer"),
                            "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
                        },
                    ]
                }
            },
        },
    }
    return write(cli.cwd / "runtime.yaml", runtime)


def trainjob(cli: Cli, name: str, uri: str) -> Path:
    job = {
        "apiVersion": UPSTREAM,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "with-dataset"},
            "initializer": {"dataset": {"storageUri": uri}},
        },
    }
    return write(cli.cwd / f"{name}.yaml", job)


def test_the_nodes_start_once_the_dataset_initializer_completed(cli: Cli) -> None:
    runtime = runtime_file(cli)
    done = cli("run", str(trainjob(cli, "ini", "file:///srv/data")), "--runtime", str(runtime))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count("from file:///srv/data") == 2, done.stdout
    assert done.stdout.count("node read it") == 2, done.stdout
    status = json.loads(cli("get", "ini", "-o", "json").stdout)["status"]
    # No node ran before the file was there: none failed and restarted (OnFailure).
    assert status["replicaStatuses"]["node"]["restarts"] == 0, status
    assert [(j["name"], j["succeeded"]) for j in status["jobsStatus"]] == [
        ("dataset-initializer", 1),
        ("node", 1),
    ]
    assert not processes_with_token(cli.token), "a process outlived its job"


def test_an_initializer_downloading_from_the_network_is_refused_locally(cli: Cli) -> None:
    runtime = runtime_file(cli)
    done = cli("run", str(trainjob(cli, "far", "hf://datasets/x")), "--runtime", str(runtime))
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "spec.initializer.dataset.storageUri" in said, said
    assert "reaches nothing but this machine" in said, said
    assert not (cli.cwd / "dataset.txt").exists()


def copying_runtime(cli: Cli) -> Path:
    """A runtime whose dataset initializer brings no command (upstream's initializer images
    download storageUri themselves): locally kubemill copies local storage in its place."""
    initializer = {
        "name": "dataset-initializer",
        "template": {
            "metadata": {"labels": {ANCESTOR: "dataset-initializer"}},
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "dataset-initializer", "image": "local"}]}
                }
            },
        },
    }
    reads = 'cat "$KUBEMILL_DATASET_DIR/rows.csv" "$KUBEMILL_DATASET_DIR/more/rows2.csv"'
    runtime = {
        "apiVersion": UPSTREAM,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "copied-dataset"},
        "spec": {
            "mlPolicy": {"numNodes": 2},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        initializer,
                        {
                            **step("node", reads, ancestor="trainer"),
                            "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
                        },
                    ]
                }
            },
        },
    }
    return write(cli.cwd / "copying.yaml", runtime)


def copying_trainjob(cli: Cli, name: str, uri: str) -> Path:
    job = {
        "apiVersion": UPSTREAM,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "copied-dataset"},
            "initializer": {"dataset": {"storageUri": uri}},
        },
    }
    return write(cli.cwd / f"{name}.yaml", job)


def test_a_local_dataset_is_copied_before_the_trainer_reads_it(cli: Cli) -> None:
    data = cli.cwd.parent / "data"
    (data / "more").mkdir(parents=True)
    (data / "rows.csv").write_text("a,1\n", encoding="utf-8")
    (data / "more" / "rows2.csv").write_text("b,2\n", encoding="utf-8")
    runtime = copying_runtime(cli)
    manifest = copying_trainjob(cli, "copied", f"file://{data}")
    done = cli("run", str(manifest), "--runtime", str(runtime), timeout=120)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert f"copied {data} into" in done.stdout, done.stdout
    # Both nodes read both files from the job's own directory, not from the source.
    assert done.stdout.count("a,1") == 2 and done.stdout.count("b,2") == 2, done.stdout
    status = json.loads(cli("get", "copied", "-o", "json").stdout)["status"]
    assert status["replicaStatuses"]["node"]["restarts"] == 0, status
    assert not processes_with_token(cli.token), "a process outlived its job"


def test_a_single_file_by_absolute_path_is_copied(cli: Cli) -> None:
    source = cli.cwd.parent / "one.csv"
    source.write_text("only,1\n", encoding="utf-8")
    runtime = copying_runtime(cli)
    # The nodes read rows.csv: a single file keeps its own name in the dataset directory.
    runtime_doc = yaml.safe_load(runtime.read_text(encoding="utf-8"))
    node = runtime_doc["spec"]["template"]["spec"]["replicatedJobs"][1]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["sh", "-c", 'cat "$KUBEMILL_DATASET_DIR/one.csv"']
    write(runtime, runtime_doc)
    done = cli("run", str(copying_trainjob(cli, "single", str(source))), "--runtime", str(runtime))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count("only,1") == 2, done.stdout


def test_local_storage_kubemill_cannot_copy_is_refused_at_its_path(cli: Cli) -> None:
    runtime = copying_runtime(cli)
    for name, uri, said in (
        ("missing", "file:///no/such/dataset", "/no/such/dataset does not exist"),
        ("scheme", "pvc://claim/data", "copies file:// URIs and absolute paths only"),
    ):
        done = cli("run", str(copying_trainjob(cli, name, uri)), "--runtime", str(runtime))
        assert done.returncode != 0
        out = done.stdout + done.stderr
        assert "spec.initializer.dataset.storageUri" in out and said in out, out
    assert not processes_with_token(cli.token), "a process outlived its job"
