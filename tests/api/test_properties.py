"""Properties of loading: valid specs round-trip; garbage only ever raises ManifestError."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubemill.api import API_VERSION, Job, ManifestError
from kubemill.kinds import load

NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,18}[a-z0-9]", fullmatch=True)
RESTART = st.sampled_from([None, "Never", "OnFailure", "Always", "ExitCode"])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 100_000), st.text(max_size=12), st.floats()
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def containers(draw: st.DrawFn, default: str) -> list[dict[str, Any]]:
    main: dict[str, Any] = {"name": default, "image": draw(NAMES)}
    if draw(st.booleans()):
        main["command"] = draw(st.lists(st.text(max_size=8), min_size=1, max_size=3))
    if draw(st.booleans()):
        main["args"] = draw(st.lists(st.text(max_size=8), max_size=3))
    if draw(st.booleans()):
        main["env"] = [
            {"name": n, "value": v}
            for n, v in draw(st.dictionaries(NAMES, st.text(max_size=8), max_size=3)).items()
        ]
    if draw(st.booleans()):
        main["ports"] = [{"name": "metrics", "containerPort": draw(st.integers(1, 65535))}]
    out = [main]
    if draw(st.booleans()):
        out.append({"name": "sidecar", "image": "side"})
    return out


@st.composite
def replica(
    draw: st.DrawFn, default: str, count: st.SearchStrategy[int], *, optional: bool = True
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": draw(containers(default))}}}
    replicas = draw(st.one_of(st.none(), count) if optional else count)
    if replicas is not None:
        spec["replicas"] = replicas
    restart = draw(RESTART)
    if restart is not None:
        spec["restartPolicy"] = restart
    return spec


def case_variant(draw: st.DrawFn, key: str) -> str:
    return draw(st.sampled_from([key, key.lower(), key.upper()]))


@st.composite
def run_policy(draw: st.DrawFn) -> dict[str, Any]:
    fields = {
        "cleanPodPolicy": st.sampled_from(["None", "Running", "All"]),
        "backoffLimit": st.integers(0, 10),
        "activeDeadlineSeconds": st.integers(0, 10_000),
        "ttlSecondsAfterFinished": st.integers(0, 10_000),
        "suspend": st.booleans(),
        "schedulingPolicy": st.fixed_dictionaries(
            {"minAvailable": st.integers(0, 5), "queue": NAMES}
        ),
    }
    chosen = draw(st.sets(st.sampled_from(sorted(fields))))
    return {k: draw(fields[k]) for k in chosen}


@st.composite
def tfjob(draw: st.DrawFn) -> dict[str, Any]:
    types = draw(st.sets(st.sampled_from(["PS", "Worker", "Evaluator"]), min_size=1))
    chief = draw(st.sampled_from([None, "Chief", "Master"]))
    specs = {case_variant(draw, t): draw(replica("tensorflow", st.integers(0, 4))) for t in types}
    if chief is not None:
        specs[case_variant(draw, chief)] = draw(replica("tensorflow", st.integers(0, 1)))
    spec: dict[str, Any] = {"tfReplicaSpecs": specs, "runPolicy": draw(run_policy())}
    if draw(st.booleans()):
        spec["successPolicy"] = draw(st.sampled_from(["", "AllWorkers"]))
    return {
        "apiVersion": draw(st.sampled_from([API_VERSION, "kubeflow.org/v1"])),
        "kind": "TFJob",
        "metadata": {"name": draw(NAMES), "labels": {"app": "x"}},
        "spec": spec,
    }


@st.composite
def pytorchjob(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"runPolicy": draw(run_policy())}
    workers = draw(st.integers(1, 4))
    specs = {
        case_variant(draw, "Worker"): draw(
            replica("pytorch", st.just(workers), optional=workers == 1)
        )
    }
    if draw(st.booleans()):
        low = draw(st.integers(1, workers))
        high = draw(st.integers(workers, 6))
        spec["elasticPolicy"] = {"minReplicas": low, "maxReplicas": high, "rdzvId": "r"}
    else:
        specs[case_variant(draw, "Master")] = draw(replica("pytorch", st.just(1)))
    if draw(st.booleans()):
        spec["nprocPerNode"] = draw(st.sampled_from(["auto", "cpu", "2", 3]))
    spec["pytorchReplicaSpecs"] = specs
    return {
        "apiVersion": draw(st.sampled_from([API_VERSION, "kubeflow.org/v1"])),
        "kind": "PyTorchJob",
        "metadata": {"name": draw(NAMES), "namespace": draw(NAMES)},
        "spec": spec,
    }


VALID = st.one_of(tfjob(), pytorchjob())


@given(VALID)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_valid_specs_load_and_round_trip(manifest: dict[str, Any]) -> None:
    (job,) = load(manifest)
    assert isinstance(job, Job)
    (again,) = load(job.to_wire())
    assert again == job
    assert again.to_wire() == job.to_wire()


def mutate(draw: st.DrawFn, manifest: dict[str, Any]) -> Any:
    """Replace or insert a random JSON value somewhere in a copy of a valid manifest."""
    out = copy.deepcopy(manifest)
    node: Any = out
    while True:
        children = (
            list(node.items())
            if isinstance(node, dict)
            else list(enumerate(node))
            if isinstance(node, list)
            else []
        )
        if not children or draw(st.integers(0, 3)) == 0:
            break
        key, child = draw(st.sampled_from(children))
        if not isinstance(child, (dict, list)) or draw(st.integers(0, 4)) == 0:
            node[key] = draw(JSON)
            return out
        node = child
    if isinstance(node, dict):
        node[draw(st.sampled_from([*map(str, node), "extra", "replica", "Wroker"]))] = draw(JSON)
    elif isinstance(node, list) and node:
        node[draw(st.integers(0, len(node) - 1))] = draw(JSON)
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    manifest = draw(VALID)
    for _ in range(draw(st.integers(1, 3))):
        manifest = mutate(draw, manifest)
    return manifest


GARBAGE = st.one_of(
    JSON,
    mutated(),
    st.text(max_size=200),
    st.lists(mutated(), min_size=1, max_size=3),
)


@given(GARBAGE)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_garbage_raises_only_manifest_errors_each_on_one_line(source: Any) -> None:
    try:
        jobs = load(source)
    except ManifestError as exc:
        assert exc.errors
        for error in exc.errors:
            assert "\n" not in str(error)
    else:
        assert jobs and all(isinstance(j, Job) for j in jobs)
