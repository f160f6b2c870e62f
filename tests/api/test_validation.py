"""Validation: every problem of a manifest, each with its field path, message and hint."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubemill.api import FieldError, ManifestError
from kubemill.kinds import load


def tf(**replicas: Any) -> dict[str, Any]:
    return job("TFJob", "tfReplicaSpecs", "tensorflow", replicas)


def pt(**replicas: Any) -> dict[str, Any]:
    return job("PyTorchJob", "pytorchReplicaSpecs", "pytorch", replicas)


def job(kind: str, field: str, container: str, replicas: dict[str, Any]) -> dict[str, Any]:
    specs = {}
    for rtype, count in replicas.items():
        specs[rtype] = {
            "replicas": count,
            "template": {"spec": {"containers": [{"name": container, "image": "local"}]}},
        }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "v"},
        "spec": {field: specs},
    }


def edit(manifest: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``manifest`` with ``value`` set at a dotted path (``a.b.0.c``)."""
    out = copy.deepcopy(manifest)
    *parents, last = path.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def errors_of(source: Any) -> list[FieldError]:
    with pytest.raises(ManifestError) as caught:
        load(source)
    return list(caught.value.errors)


W = "spec.tfReplicaSpecs.Worker"
WC = f"{W}.template.spec.containers"


@pytest.mark.parametrize(
    ("manifest", "path", "message", "hint"),
    [
        pytest.param(
            edit(tf(Worker=1), "spec.tfReplicaSpecs.Worker.replica", 2),
            f"{W}.replica",
            "unknown field",
            "did you mean 'replicas'?",
            id="unknown-field",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.runPolicy.cleanpodpolicy", "All"),
            "spec.runPolicy.cleanpodpolicy",
            "unknown field",
            "did you mean 'cleanPodPolicy'?",
            id="unknown-field-case",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.runPolicy.zzz", 1),
            "spec.runPolicy.zzz",
            "unknown field",
            "known fields here: activeDeadlineSeconds, backoffLimit",
            id="unknown-field-nothing-close",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.tfReplicaSpecs.Worker.replicas", "two"),
            f"{W}.replicas",
            "must be a whole number, got str 'two'",
            "write a number without quotes",
            id="bad-type-int",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.runPolicy.suspend", "maybe"),
            "spec.runPolicy.suspend",
            "must be true or false",
            "write true or false",
            id="bad-type-bool",
        ),
        pytest.param(
            edit(tf(Worker=1), f"{WC}.0.command", "python train.py"),
            f"{WC}[0].command",
            "must be a list, got str 'python train.py'",
            "YAML list",
            id="bad-type-list",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.tfReplicaSpecs.Worker.template", "pod"),
            f"{W}.template",
            "must be a mapping",
            "key: value",
            id="bad-type-mapping",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.runPolicy.schedulingPolicy.minResources.cpu", [1]),
            "spec.runPolicy.schedulingPolicy.minResources.cpu",
            "must be a string or a whole number, got list [1]",
            "",
            id="bad-type-union-is-one-error",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.tfReplicaSpecs.Worker.restartPolicy", "Sometimes"),
            f"{W}.restartPolicy",
            "got 'Sometimes'",
            "'OnFailure'",
            id="bad-enum",
        ),
        pytest.param(
            tf(Worker=-1),
            f"{W}.replicas",
            "must be >= 0, got -1",
            "",
            id="replicas-below-zero",
        ),
        pytest.param(
            tf(Chief=1, Master=1, Worker=1),
            "spec.tfReplicaSpecs",
            "Chief and Master both given",
            "keep Chief",
            id="chief-and-master",
        ),
        pytest.param(
            tf(Chief=2, Worker=1),
            "spec.tfReplicaSpecs.Chief.replicas",
            "must be 0 or 1",
            "one chief",
            id="two-chief-replicas",
        ),
        pytest.param(
            pt(Master=2),
            "spec.pytorchReplicaSpecs.Master.replicas",
            "must be 1",
            "one Master",
            id="pytorch-two-masters",
        ),
        pytest.param(
            pt(Master=0, Worker=1),
            "spec.pytorchReplicaSpecs.Master.replicas",
            "must be 1",
            "one Master",
            id="pytorch-zero-masters",
        ),
        pytest.param(
            pt(Worker=2),
            "spec.pytorchReplicaSpecs",
            "a Master replica is required",
            "elasticPolicy",
            id="pytorch-no-master",
        ),
        pytest.param(
            tf(Wroker=1),
            "spec.tfReplicaSpecs.Wroker",
            "unknown replica type 'Wroker'",
            "did you mean 'Worker'?",
            id="unknown-replica-type-close",
        ),
        pytest.param(
            pt(Master=1, Launcher=1),
            "spec.pytorchReplicaSpecs.Launcher",
            "unknown replica type 'Launcher'",
            "PyTorchJob replica types are Master, Worker",
            id="unknown-replica-type-far",
        ),
        pytest.param(
            edit(
                tf(Worker=1),
                "spec.tfReplicaSpecs.worker",
                tf(Worker=1)["spec"]["tfReplicaSpecs"]["Worker"],
            ),
            "spec.tfReplicaSpecs",
            "replica type Worker is given twice (as 'Worker' and 'worker')",
            "keep one of them",
            id="replica-type-twice",
        ),
        pytest.param(
            edit(tf(Worker=100), "metadata.name", "n" * 54),
            "metadata.name",
            f"pod name '{'n' * 54}-worker-99' would be 64 characters, over the 63 allowed",
            "at most 53 characters",
            id="derived-pod-name-too-long",
        ),
        pytest.param(
            edit(tf(Worker=1), "metadata.name", "Bad_Name"),
            "metadata.name",
            "'Bad_Name' is not a valid name",
            "lowercase letters",
            id="invalid-name",
        ),
        pytest.param(
            edit(tf(Worker=1), "metadata", {}),
            "metadata.name",
            "required field is missing",
            "name the job",
            id="missing-name",
        ),
        pytest.param(
            edit(tf(Worker=1), f"{WC}", []),
            WC,
            "at least one container is required",
            "add a container named 'tensorflow'",
            id="no-containers",
        ),
        pytest.param(
            edit(tf(Worker=1), f"{WC}.0.name", "main"),
            WC,
            "no container is named 'tensorflow'",
            "found 'main'",
            id="no-default-container",
        ),
        pytest.param(
            edit(tf(Worker=1), f"{WC}.0", {"name": "tensorflow"}),
            f"{WC}[0].image",
            "required field is missing",
            "name an image",
            id="missing-image",
        ),
        pytest.param(
            edit(tf(Worker=1), f"{WC}.0", {"image": "local"}),
            f"{WC}[0].name",
            "required field is missing",
            "set name",
            id="missing-container-name",
        ),
        pytest.param(
            edit(tf(Worker=1), "spec.tfReplicaSpecs", {}),
            "spec.tfReplicaSpecs",
            "at least one replica type is required",
            "",
            id="no-replica-types",
        ),
        pytest.param(
            edit(pt(Worker=2), "spec.elasticPolicy", {"minReplicas": 3, "maxReplicas": 2}),
            "spec.elasticPolicy.minReplicas",
            "3 is above maxReplicas 2",
            "minReplicas <= maxReplicas",
            id="elastic-min-above-max",
        ),
        pytest.param(
            edit(pt(Worker=5), "spec.elasticPolicy", {"minReplicas": 1, "maxReplicas": 4}),
            "spec.pytorchReplicaSpecs.Worker.replicas",
            "5 is outside the elasticPolicy bounds 1..4",
            "between minReplicas and maxReplicas",
            id="elastic-workers-out-of-bounds",
        ),
        pytest.param(
            edit(pt(Worker=1), "kind", "PytorchJob"),
            "kind",
            "unknown kind 'PytorchJob'",
            "did you mean 'PyTorchJob'?",
            id="unknown-kind",
        ),
        pytest.param(
            edit(pt(Worker=1), "apiVersion", "kubeflow.org/v2"),
            "apiVersion",
            "PyTorchJob is not served in 'kubeflow.org/v2'",
            "use one of kubeflow.org/v1, kubemill.dev/v1",
            id="unserved-version",
        ),
    ],
)
def test_error_has_path_message_and_hint(
    manifest: dict[str, Any], path: str, message: str, hint: str
) -> None:
    errors = errors_of(manifest)
    assert [e.path for e in errors] == [path], errors
    (error,) = errors
    assert message in error.message
    assert hint in error.hint
    if not hint:
        assert "(" not in str(error).removeprefix(f"{path}: {error.message}")


def test_all_problems_of_all_documents_are_reported_at_once() -> None:
    bad_field = edit(tf(Worker=1, Wroker=1), "spec.tfReplicaSpecs.Worker.replicas", "two")
    bad_field = edit(bad_field, "spec.runPolicy.backoffLimit", -1)
    two_masters = pt(Master=2)
    fine = pt(Master=1)
    errors = errors_of([bad_field, fine, two_masters, "not a mapping"])
    assert [(e.source, e.path) for e in errors] == [
        # Parse errors first, then the semantic ones the same document still has.
        ("#1", "spec.runPolicy.backoffLimit"),
        ("#1", f"{W}.replicas"),
        ("#1", "spec.tfReplicaSpecs.Wroker"),
        ("#3", "spec.pytorchReplicaSpecs.Master.replicas"),
        ("#4", ""),
    ]


def test_errors_caused_by_an_earlier_error_are_not_reported_twice() -> None:
    # `contianers` misspelt: the job then has no containers, but that is the same problem.
    manifest = tf(Worker=1)
    spec = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    spec["contianers"] = spec.pop("containers")
    assert [e.path for e in errors_of(manifest)] == [f"{WC[: -len('containers')]}contianers"]
    # A container without a name is not "no container named tensorflow" on top.
    manifest = edit(tf(Worker=1), f"{WC}.0", {"image": "local"})
    assert [e.path for e in errors_of(manifest)] == [f"{WC}[0].name"]


def test_source_names_the_file_and_document() -> None:
    text = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: x}\n---\n[1]\n"
    with pytest.raises(ManifestError) as caught:
        load(text, name="jobs.yaml")
    assert [str(e).split(":")[0] for e in caught.value.errors] == ["jobs.yaml#1", "jobs.yaml#2"]
    assert str(caught.value).splitlines() == [str(e) for e in caught.value.errors]


def test_yaml_syntax_error_is_one_line_with_position() -> None:
    (error,) = errors_of("apiVersion: kubeflow.org/v1\nkind: [TFJob\n")
    assert error.path == ""
    assert error.message.startswith("not valid YAML: ")
    assert "line 3" in error.message
    assert "\n" not in str(error)


def test_v1alpha1_errors_point_into_the_replica_list() -> None:
    manifest = {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": "old"},
        "spec": {
            "replicaSpecs": [
                {
                    "replicas": 1,
                    "tfReplicaType": "WORKER",
                    "template": {"spec": {"containers": [{"name": "tf", "image": "x"}]}},
                },
                {"tfReplicaType": "EVALUATOR"},
                {
                    "replicas": 2,
                    "tfReplicaType": "MASTER",
                    "template": {
                        "spec": {
                            "containers": [{"name": "tensorflow", "image": "x"}],
                            "restartPolicy": "Nope",
                        }
                    },
                },
            ]
        },
    }
    errors = errors_of(manifest)
    assert sorted((e.path, e.message) for e in errors) == [
        ("spec.replicaSpecs[0].template.spec.containers", "no container is named 'tensorflow'"),
        ("spec.replicaSpecs[1].tfReplicaType", "unknown replica type 'EVALUATOR'"),
        ("spec.replicaSpecs[2].replicas", "must be 0 or 1"),
        ("spec.replicaSpecs[2].template.spec.restartPolicy", "got 'Nope'"),
    ]
