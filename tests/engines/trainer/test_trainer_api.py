"""Kubeflow Trainer v2's API: the runtimes upstream ships load as data, a runtime's JobSet
features kubemill does not realise are refused at their paths, and a TrainJob stands for
its runtime's replicated jobs with the trainer's values applied."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubemill.api import ManifestError, RestartPolicy
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.defaults import DEFAULT_RUNTIMES
from kubemill.engines.trainer.api.runtime import ClusterTrainingRuntime, load_runtime
from kubemill.engines.trainer.api.trainjob import TrainJob
from kubemill.kinds import load_one

UPSTREAM = "trainer.kubeflow.org/v1alpha1"


def trainjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": UPSTREAM,
        "kind": "TrainJob",
        "metadata": {"name": "train"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    """Path -> the messages (one per line) of every error loading ``doc`` (it must not)."""
    with pytest.raises(ManifestError) as caught:
        load_one(doc)
    found: dict[str, str] = {}
    for error in caught.value.errors:
        found[error.path] = "\n".join(filter(None, (found.get(error.path), error.message)))
    return found


def torch_runtime(name: str = "mine", **changes: Any) -> dict[str, Any]:
    """A copy of upstream's torch-distributed runtime, renamed, with ``changes`` to its spec."""
    doc = copy.deepcopy(DEFAULT_RUNTIMES[0])
    doc["metadata"]["name"] = name
    doc["spec"].update(changes)
    return doc


@pytest.fixture
def added() -> Iterator[list[ClusterTrainingRuntime]]:
    """Runtimes a test adds, forgotten again afterwards."""
    found: list[Any] = []
    yield found
    for runtime in found:
        runtimes.remove(runtime)


# --- the default runtimes --------------------------------------------------------------------


def test_the_default_runtimes_are_known_without_a_cluster() -> None:
    names = runtimes.known("ClusterTrainingRuntime", "any-namespace")
    expected = ["jax-distributed", "mpi-distributed", "torch-distributed", "xgboost-distributed"]
    assert names == expected
    torch = runtimes.find("ClusterTrainingRuntime", "torch-distributed", "team-a")
    assert torch is not None and torch.spec.ml_policy is not None
    assert torch.spec.ml_policy.framework == "torch"
    assert torch.spec.ml_policy.torch is not None
    assert torch.spec.ml_policy.torch.num_proc_per_node == "auto"
    assert torch.spec.ml_policy.num_nodes == 1
    (node,) = torch.spec.template.spec.replicated_jobs
    assert node.name == "node"
    assert node.template.metadata.labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    for name, framework in (("jax-distributed", "jax"), ("xgboost-distributed", "xgboost")):
        runtime = runtimes.find("ClusterTrainingRuntime", name, "default")
        assert runtime is not None and runtime.spec.ml_policy is not None
        assert runtime.spec.ml_policy.framework == framework


def test_a_default_runtime_keeps_every_value_upstream_writes() -> None:
    for doc in DEFAULT_RUNTIMES:
        runtime, errors = load_runtime(doc)
        assert errors == [] and runtime is not None
        written = runtime.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        assert written == {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}


# --- a runtime's validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "path"),
    [
        pytest.param(
            {"template": {"spec": {"failurePolicy": {"maxRestarts": 3}, "replicatedJobs": []}}},
            "spec.template.spec.failurePolicy",
            id="failure-policy",
        ),
        pytest.param(
            {"template": {"spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}}}},
            "spec.template.spec.startupPolicy",
            id="startup-policy",
        ),
        pytest.param(
            {"template": {"spec": {"network": {"enableDNSHostnames": False}}}},
            "spec.template.spec.network.enableDNSHostnames",
            id="no-hostnames",
        ),
        pytest.param(
            {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": "node", "groupName": "g", "template": {"spec": {}}}
                        ]
                    }
                }
            },
            "spec.template.spec.replicatedJobs[0].groupName",
            id="group-name",
        ),
        pytest.param(
            {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": "node", "template": {"spec": {"podFailurePolicy": {}}}}
                        ]
                    }
                }
            },
            "spec.template.spec.replicatedJobs[0].template.spec.podFailurePolicy",
            id="pod-failure-policy",
        ),
        pytest.param(
            {"mlPolicy": {"torch": {"elasticPolicy": {"minNodes": 1}}}},
            "spec.mlPolicy.torch.elasticPolicy",
            id="elastic",
        ),
        pytest.param({"mlPolicy": {"torch": {}, "mpi": {}}}, "spec.mlPolicy", id="two-frameworks"),
        pytest.param(
            {"mlPolicy": {"torch": {"numProcPerNode": "many"}}},
            "spec.mlPolicy.torch.numProcPerNode",
            id="num-proc",
        ),
        pytest.param(
            {"podGroupPolicy": {"coscheduling": {}, "volcano": {}}},
            "spec.podGroupPolicy",
            id="two-schedulers",
        ),
    ],
)
def test_a_runtime_is_refused_at_the_path_of_what_kubemill_does_not_realise(
    change: dict[str, Any], path: str
) -> None:
    runtime, errors = load_runtime(torch_runtime(**change))
    assert runtime is None
    assert path in {e.path for e in errors}, [str(e) for e in errors]


def test_a_runtime_misspelt_is_refused_with_the_field_it_meant() -> None:
    doc = torch_runtime()
    doc["spec"]["mlPolicy"]["numNode"] = 2
    _, errors = load_runtime(doc)
    (error,) = errors
    assert error.path == "spec.mlPolicy.numNode" and "numNodes" in error.hint


# --- a TrainJob stands for its runtime ---------------------------------------------------------


def test_the_trainer_overrides_the_runtime_node_container() -> None:
    job = load_one(
        trainjob(
            trainer={
                "image": "mine:1",
                "command": ["torchrun", "train.py"],
                "args": ["--epochs", "2"],
                "env": [{"name": "A", "value": "1"}],
                "numNodes": 3,
                "numProcPerNode": 2,
                "resourcesPerNode": {"limits": {"cpu": "2"}},
            }
        )
    )
    assert isinstance(job, TrainJob)
    assert list(job.replica_specs) == ["node"]
    spec = job.replica_specs["node"]
    assert spec.replicas == 3 and spec.restart_policy is RestartPolicy.ON_FAILURE
    (container,) = spec.template.spec.containers
    assert (container.image, container.command, container.args) == (
        "mine:1",
        ["torchrun", "train.py"],
        ["--epochs", "2"],
    )
    assert [(e.name, e.value) for e in container.env or []] == [("A", "1")]
    assert container.resources == {"limits": {"cpu": "2"}}
    assert [(p.name, p.container_port) for p in container.ports or []] == [("trainjob-port", 29500)]
    assert job.spec.trainer is not None and job.spec.trainer.num_proc_per_node == "2"


def test_trainer_env_merges_with_the_runtime_env_by_name(added: list[Any]) -> None:
    doc = torch_runtime()
    node = doc["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "KEEP", "value": "runtime"},
        {"name": "SWAP", "value": "runtime"},
    ]
    added.append(runtimes.add(doc))
    job = load_one(
        trainjob(runtimeRef={"name": "mine"}, trainer={"env": [{"name": "SWAP", "value": "job"}]})
    )
    (container,) = job.replica_specs["node"].template.spec.containers
    assert [(e.name, e.value) for e in container.env or []] == [
        ("KEEP", "runtime"),
        ("SWAP", "job"),
    ]
    # The runtime itself is untouched: the next TrainJob sees its own values.
    runtime = runtimes.find("ClusterTrainingRuntime", "mine", "default")
    assert runtime is not None
    pod = runtime.spec.template.spec.replicated_jobs[0].template.spec.template.spec
    assert [(e.name, e.value) for e in pod.containers[0].env or []] == [
        ("KEEP", "runtime"),
        ("SWAP", "runtime"),
    ]


def test_num_nodes_comes_from_the_policy_when_the_trainer_names_none() -> None:
    job = load_one(trainjob())
    assert job.replica_count("node") == 1
    assert isinstance(job, TrainJob) and job.num_nodes == 1


def test_the_run_policy_is_the_trainjobs() -> None:
    job = load_one(trainjob(suspend=True, activeDeadlineSeconds=30))
    policy = job.run_policy
    assert (policy.suspend, policy.active_deadline_seconds, policy.backoff_limit) == (True, 30, 6)
    assert policy.scheduling_policy is None


def test_a_pod_group_policy_gangs_every_node(added: list[Any]) -> None:
    added.append(
        runtimes.add(torch_runtime(podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 90}}))
    )
    job = load_one(trainjob(runtimeRef={"name": "mine"}, trainer={"numNodes": 4}))
    gang = job.run_policy.scheduling_policy
    assert gang is not None
    assert (gang.min_available, gang.schedule_timeout_seconds) == (4, 90)


def test_a_namespaced_runtime_serves_its_namespace_only(added: list[Any]) -> None:
    doc = torch_runtime("team-runtime")
    doc["kind"] = "TrainingRuntime"
    doc["metadata"]["namespace"] = "team-a"
    added.append(runtimes.add(doc))
    ref = {"name": "team-runtime", "kind": "TrainingRuntime"}
    mine = trainjob(runtimeRef=ref)
    mine["metadata"]["namespace"] = "team-a"
    assert load_one(mine).replica_count("node") == 1
    other = trainjob(runtimeRef=ref)
    other["metadata"]["namespace"] = "team-b"
    assert "no TrainingRuntime named 'team-runtime'" in errors_of(other)["spec.runtimeRef.name"]


# --- a TrainJob's validation -------------------------------------------------------------------


def test_an_unknown_runtime_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ManifestError) as caught:
        load_one(trainjob(runtimeRef={"name": "torch-distributd"}))
    (error,) = caught.value.errors
    assert error.path == "spec.runtimeRef.name"
    assert "torch-distributed" in error.hint


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        pytest.param(
            {
                "runtimeRef": {"name": "mpi-distributed"},
                "trainer": {"env": [{"name": "OMPI_MCA_orte_default_hostfile", "value": "x"}]},
            },
            "spec.trainer.env[0].name",
            "set by the mpi policy",
            id="mpi-reserved-env",
        ),
        pytest.param(
            {"trainer": {"env": [{"name": "PET_NNODES", "value": "9"}]}},
            "spec.trainer.env[0].name",
            "set by the torch policy",
            id="reserved-env",
        ),
        pytest.param(
            {
                "runtimeRef": {"name": "xgboost-distributed"},
                "trainer": {"env": [{"name": "A", "value": "1"}, {"name": "DMLC_TASK_ID"}]},
            },
            "spec.trainer.env[1].name",
            "set by the xgboost policy",
            id="xgboost-reserved-env",
        ),
        pytest.param(
            {
                "runtimeRef": {"name": "jax-distributed"},
                "trainer": {"env": [{"name": "JAX_PROCESS_ID", "value": "3"}]},
            },
            "spec.trainer.env[0].name",
            "set by the jax policy",
            id="jax-reserved-env",
        ),
        pytest.param(
            {"runtimeRef": {"name": "jax-distributed"}, "trainer": {"numProcPerNode": "auto"}},
            "spec.trainer.numProcPerNode",
            "for the torch policy only",
            id="jax-no-auto",
        ),
        pytest.param(
            {"runtimePatches": [{"manager": "me", "trainingRuntimeSpec": {"mlPolicy": {}}}]},
            "spec.runtimePatches[0].trainingRuntimeSpec.mlPolicy",
            "unknown field",
            id="runtime-patches-template-only",
        ),
        pytest.param(
            {"managedBy": "kueue.x-k8s.io/multikueue"},
            "spec.managedBy",
            "another controller",
            id="multikueue",
        ),
        pytest.param(
            {"initializer": {"dataset": {"storageUri": "hf://datasets/x"}}},
            "spec.initializer.dataset",
            "dataset-initializer",
            id="no-initializer-step",
        ),
        pytest.param(
            {"initializer": {"dataset": {"storageUri": "not a uri"}}},
            "spec.initializer.dataset.storageUri",
            "not a URI",
            id="storage-uri",
        ),
        pytest.param(
            {"runtimeRef": {"name": "torch-distributed", "apiGroup": "example.com"}},
            "spec.runtimeRef.apiGroup",
            "serves no training runtimes",
            id="api-group",
        ),
        pytest.param(
            {"trainer": {"numProcPerNode": 0}},
            "spec.trainer.numProcPerNode",
            "not a number of processes",
            id="num-proc-zero",
        ),
    ],
)
def test_a_trainjob_is_refused_at_its_path(spec: dict[str, Any], path: str, words: str) -> None:
    found = errors_of(trainjob(**spec))
    assert path in found, found
    assert words in found[path]


def test_a_runtime_feature_not_realised_is_named_by_its_runtime_path(added: list[Any]) -> None:
    doc = torch_runtime()
    doc["spec"]["template"]["spec"]["replicatedJobs"].append(
        {
            "name": "evaluator",
            "dependsOn": [{"name": "node", "status": "Complete"}],
            "template": {"spec": {"template": {"spec": {"containers": [{"name": "e"}]}}}},
        }
    )
    added.append(runtimes.add(doc))
    with pytest.raises(ManifestError) as caught:
        load_one(trainjob(runtimeRef={"name": "mine"}))
    messages = [e.message for e in caught.value.errors]
    assert {e.path for e in caught.value.errors} == {"spec.runtimeRef.name"}
    for words in (
        "spec.template.spec.replicatedJobs[1].name",
        "spec.template.spec.replicatedJobs[1].template.spec.template.spec.containers[0].image",
    ):
        assert any(words in m for m in messages), messages


def test_dependencies_that_go_round_are_refused(added: list[Any]) -> None:
    doc = torch_runtime()
    jobs = doc["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["dependsOn"] = [{"name": "launcher", "status": "Ready"}]
    jobs.append(
        {
            "name": "launcher",
            "dependsOn": [{"name": "node", "status": "Ready"}],
            "template": {
                "spec": {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}}
            },
        }
    )
    added.append(runtimes.add(doc))
    found = errors_of(trainjob(runtimeRef={"name": "mine"}))
    assert "depend on each other in a circle" in found["spec.runtimeRef.name"]


def test_a_trainjob_in_kubemills_group_loads_the_same() -> None:
    upstream = load_one(trainjob(trainer={"numNodes": 2}))
    ours = load_one(
        yaml.safe_dump({**trainjob(trainer={"numNodes": 2}), "apiVersion": "kubemill.dev/v1"})
    )
    assert upstream.to_wire() == ours.to_wire()
    assert ours.replica_count("node") == 2


def test_an_mpi_runtime_needs_openmpi_a_launcher_and_hosts(added: list[Any]) -> None:
    doc = copy.deepcopy(
        next(d for d in DEFAULT_RUNTIMES if d["metadata"]["name"] == "mpi-distributed")
    )
    doc["metadata"]["name"] = "mpi-intel"
    doc["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "Intel"
    doc["spec"]["template"]["spec"]["replicatedJobs"].pop()  # no hosts left
    added.append(runtimes.add(doc))
    found = errors_of(trainjob(runtimeRef={"name": "mpi-intel"}))
    message = found["spec.runtimeRef.name"]
    assert "spec.mlPolicy.mpi.mpiImplementation: not supported: Intel" in message
    assert "needs a 'launcher' replicated job and one of 'node', 'trainer-node'" in message


def test_an_mpi_trainjobs_trainer_is_its_launcher_and_its_nodes_the_hosts() -> None:
    job = load_one(
        trainjob(
            runtimeRef={"name": "mpi-distributed"},
            trainer={
                "image": "mine",
                "command": ["mpirun", "x"],
                "numNodes": 3,
            },
        )
    )
    assert isinstance(job, TrainJob)
    specs = job.replica_specs
    assert (specs["launcher"].replicas, specs["trainer-node"].replicas) == (1, 3)
    (launcher,) = specs["launcher"].template.spec.containers
    assert (launcher.image, launcher.command) == ("mine", ["mpirun", "x"])
    (node,) = specs["trainer-node"].template.spec.containers
    assert (node.image, node.command) == ("mpioperator/mpi-pi:openmpi", ["/usr/sbin/sshd"])


def test_a_runtime_depends_on_one_status_only(added: list[Any]) -> None:
    doc = torch_runtime()
    jobs = doc["spec"]["template"]["spec"]["replicatedJobs"]
    step = {"spec": {"template": {"spec": {"containers": [{"name": "s", "image": "i"}]}}}}
    jobs[0]["dependsOn"] = [{"name": "model-initializer", "status": "Ready"}]
    jobs.insert(0, {"name": "model-initializer", "template": step})
    jobs.insert(
        0,
        {
            "name": "dataset-initializer",
            "dependsOn": [{"name": "model-initializer", "status": "Complete"}],
            "template": step,
        },
    )
    added.append(runtimes.add(doc))
    message = errors_of(trainjob(runtimeRef={"name": "mine"}))["spec.runtimeRef.name"]
    assert (
        "replicatedJobs[2].dependsOn[0].status: not supported: Ready here but Complete" in message
    )
