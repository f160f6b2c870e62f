"""Manifests that would cost unbounded time or memory are refused while loading.

A few hundred bytes of nested YAML aliases (a "billion laughs"), a recursive alias, text
past the size limit, or a replica count no machine could plan: each is one FieldError,
found before anything is expanded or planned.
"""

from __future__ import annotations

import textwrap

import pytest

from kubemill.api import ManifestError
from kubemill.api.common import MAX_REPLICAS
from kubemill.api.loader import MAX_EXPANDED_NODES, MAX_SOURCE_CHARS
from kubemill.kinds import load, load_one

HEAD = textwrap.dedent(
    """\
    apiVersion: kubemill.dev/v1
    kind: PyTorchJob
    metadata: {name: limits}
    """
)

SPEC = textwrap.dedent(
    """\
    spec:
      pytorchReplicaSpecs:
        Master:
          restartPolicy: Never
          template: &pod
            spec:
              containers: [{name: pytorch, image: python, command: [python, -c, "1"]}]
        Worker:
          replicas: REPLICAS
          restartPolicy: Never
          template: *pod
    """
)


def alias_bomb(levels: int) -> str:
    """``levels`` lists, each nine aliases of the one before: 9**levels strings in all."""
    rows = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        refs = ",".join([f"*a{level - 1}"] * 9)
        rows.append(f"a{level}: &a{level} [{refs}]")
    return HEAD + "\n".join(rows) + "\n"


def only_error(exc: pytest.ExceptionInfo[ManifestError]) -> str:
    assert len(exc.value.errors) == 1, exc.value.errors
    return str(exc.value.errors[0])


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    text = alias_bomb(9)
    assert len(text) < 1000
    with pytest.raises(ManifestError) as exc:
        load(text, name="bomb.yaml")
    message = only_error(exc)
    assert message.startswith("bomb.yaml: <document>: the document expands to")
    assert f"over the {MAX_EXPANDED_NODES} allowed" in message


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ManifestError) as exc:
        load(HEAD + "x: &a [1, *a]\n", name="loop.yaml")
    assert "recursive" in only_error(exc)


def test_a_few_aliases_load_as_usual() -> None:
    text = textwrap.dedent(
        """\
        apiVersion: kubemill.dev/v1
        kind: PyTorchJob
        metadata: {name: shared}
        spec:
          pytorchReplicaSpecs:
            Master:
              restartPolicy: Never
              template: &pod
                spec:
                  containers: [{name: pytorch, image: python, command: [python, -c, "1"]}]
            Worker:
              replicas: 3
              restartPolicy: Never
              template: *pod
        """
    )
    job = load_one(text)
    assert job.replica_count("Worker") == 3
    worker = job.replica_specs["Worker"].template.spec.containers[0]
    assert worker.command == ["python", "-c", "1"]


def test_a_document_just_under_the_expansion_bound_loads() -> None:
    # 8**5 = 32768 leaves + the lists: far over what is written, under the bound.
    rows = ["a0: &a0 [1,1,1,1,1,1,1,1]"]
    for level in range(1, 5):
        rows.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 8)}]")
    text = HEAD + "\n".join(rows) + "\n" + SPEC.replace("REPLICAS", "1")
    with pytest.raises(ManifestError) as exc:
        load(text, name="extra.yaml")
    # Refused for its unknown top-level fields, not for its size: the bound was not hit.
    assert all("expands to" not in str(e) for e in exc.value.errors)
    assert any(e.path == "a4" for e in exc.value.errors)


def test_text_over_the_size_limit_is_refused_unparsed() -> None:
    text = HEAD + "#" * MAX_SOURCE_CHARS + "\n"
    with pytest.raises(ManifestError) as exc:
        load(text, name="huge.yaml")
    message = only_error(exc)
    assert f"over the {MAX_SOURCE_CHARS} allowed" in message
    assert message.startswith("huge.yaml: <document>:")


@pytest.mark.parametrize("replicas", [MAX_REPLICAS + 1, 99999999999])
def test_replicas_over_the_maximum_is_a_field_error(replicas: int) -> None:
    with pytest.raises(ManifestError) as exc:
        load(HEAD + SPEC.replace("REPLICAS", str(replicas)), name="big.yaml")
    assert only_error(exc) == (
        f"big.yaml: spec.pytorchReplicaSpecs.Worker.replicas: must be <= {MAX_REPLICAS},"
        f" got {replicas}"
    )


def test_replicas_at_the_maximum_validate() -> None:
    job = load_one(HEAD + SPEC.replace("REPLICAS", str(MAX_REPLICAS)))
    assert job.replica_count("Worker") == MAX_REPLICAS
