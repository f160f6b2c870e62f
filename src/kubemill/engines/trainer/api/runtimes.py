"""The cluster-less registry of training runtimes a TrainJob's ``runtimeRef`` resolves to.

Without a cluster to ask, kubemill knows upstream's default ClusterTrainingRuntimes
(:mod:`.defaults`) from the start, loaded through the same models as any runtime; more can
be added (:func:`add`) by whoever read their manifests (a local run's ``--runtime`` files and
the config file's ``runtimes:``, :mod:`kubemill.substrates.local.known_objects`; in the
operator, the cluster's TrainingRuntimes and ClusterTrainingRuntimes as it watches them), each
replacing a default of its name, and forgotten (:func:`forget`) when deleted. Pure: nothing
here reads a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubemill.api.errors import FieldError, ManifestError
from kubemill.engines.trainer.api.defaults import DEFAULT_RUNTIMES
from kubemill.engines.trainer.api.runtime import (
    CLUSTER_TRAINING_RUNTIME,
    TrainingRuntime,
    load_runtime,
)

_known: dict[tuple[str, str, str], TrainingRuntime] = {}
"""(kind, namespace or "" for a cluster runtime, name) -> the runtime."""


def _key(runtime: TrainingRuntime) -> tuple[str, str, str]:
    cluster = runtime.kind == CLUSTER_TRAINING_RUNTIME
    namespace = "" if cluster else (runtime.metadata.namespace or "default")
    return runtime.kind, namespace, runtime.name


def _defaults() -> None:
    if _known:
        return
    for doc in DEFAULT_RUNTIMES:
        runtime, errors = load_runtime(doc)
        if runtime is None:  # the shipped data is tested to load; say which one broke
            raise ManifestError(
                [FieldError(e.path, e.message, e.hint, doc["metadata"]["name"]) for e in errors]
            )
        _known[_key(runtime)] = runtime


def add(doc: Mapping[str, Any], *, source: str = "") -> TrainingRuntime:
    """Make one more runtime known (a manifest's dict); :class:`ManifestError` with every
    problem at its field path if it is no valid runtime. A runtime of the same kind,
    namespace and name is replaced."""
    _defaults()
    runtime, errors = load_runtime(doc)
    if runtime is None:
        raise ManifestError([FieldError(e.path, e.message, e.hint, source) for e in errors])
    _known[_key(runtime)] = runtime
    return runtime


def remove(runtime: TrainingRuntime) -> None:
    """Forget a runtime added with :func:`add`; a default it replaced comes back."""
    _forget_key(_key(runtime))


def _forget_key(key: tuple[str, str, str]) -> None:
    _known.pop(key, None)
    for doc in DEFAULT_RUNTIMES:
        default, _ = load_runtime(doc)
        if default is not None and _key(default) == key:
            _known[key] = default
    if not _known:
        _defaults()


def forget(doc: Mapping[str, Any]) -> None:
    """Forget the runtime a manifest's dict names (kind, namespace, name), valid or not (a
    runtime deleted from a cluster); a default it replaced comes back."""
    kind = str(doc.get("kind") or "")
    metadata = doc.get("metadata") or {}
    cluster = kind == CLUSTER_TRAINING_RUNTIME
    namespace = "" if cluster else str(metadata.get("namespace") or "default")
    _defaults()
    _forget_key((kind, namespace, str(metadata.get("name") or "")))


def find(kind: str, name: str, namespace: str) -> TrainingRuntime | None:
    """The runtime a TrainJob of ``namespace`` names, if known: a ClusterTrainingRuntime by
    name, a TrainingRuntime by name in the TrainJob's namespace (as upstream resolves)."""
    _defaults()
    scope = "" if kind == CLUSTER_TRAINING_RUNTIME else namespace
    return _known.get((kind, scope, name))


def known(kind: str, namespace: str) -> list[str]:
    """The names a TrainJob of ``namespace`` could use for ``kind``, sorted (for hints)."""
    _defaults()
    scope = "" if kind == CLUSTER_TRAINING_RUNTIME else namespace
    return sorted(name for k, ns, name in _known if k == kind and ns == scope)


__all__ = ["add", "find", "forget", "known", "remove"]
