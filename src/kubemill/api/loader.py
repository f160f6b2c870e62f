"""Load job manifests: YAML (multi-document) or dicts, dispatched on apiVersion and kind.

``load`` returns defaulted, validated job models or raises :class:`ManifestError` with
*every* problem found, each with its field path. Our own group (``kubemill.dev``) and
the upstream groups (``kubeflow.org``) load into the same models; legacy versions are
converted (see :mod:`kubemill.api.legacy`).
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from kubemill.api.common import API_VERSION, Job
from kubemill.api.errors import FieldError, ManifestError, did_you_mean, join_path
from kubemill.api.legacy import V1Alpha1TFJob, convert_v1alpha1_tfjob
from kubemill.api.pytorch import PyTorchJob
from kubemill.api.tensorflow import TFJob

MAX_NAME = 63
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

Converter = Callable[[Mapping[str, Any]], tuple[Job | None, list[FieldError]]]


@dataclass(frozen=True)
class KindEntry:
    """How one (apiVersion, kind) pair is loaded."""

    model: type[BaseModel]
    convert: Callable[[Any], tuple[Job | None, list[FieldError]]] | None = None


def _current(model: type[Job]) -> KindEntry:
    return KindEntry(model=model)


KINDS: dict[tuple[str, str], KindEntry] = {
    (API_VERSION, "TFJob"): _current(TFJob),
    ("kubeflow.org/v1", "TFJob"): _current(TFJob),
    ("kubeflow.org/v1alpha1", "TFJob"): KindEntry(V1Alpha1TFJob, convert_v1alpha1_tfjob),
    (API_VERSION, "PyTorchJob"): _current(PyTorchJob),
    ("kubeflow.org/v1", "PyTorchJob"): _current(PyTorchJob),
}
"""Every accepted (apiVersion, kind). Later kinds register here."""


def load(source: str | Mapping[str, Any] | Sequence[Mapping[str, Any]], *, name: str = "") -> list[Job]:
    """Load every job in ``source`` (YAML text, one dict or a list of dicts).

    Raises :class:`ManifestError` listing all problems in all documents.
    """
    documents: list[Any]
    if isinstance(source, str):
        try:
            documents = [d for d in yaml.safe_load_all(source) if d is not None]
        except yaml.YAMLError as exc:
            raise ManifestError([FieldError("", f"not valid YAML: {exc}", source=name)]) from exc
    elif isinstance(source, Mapping):
        documents = [source]
    else:
        documents = list(source)
    jobs: list[Job] = []
    errors: list[FieldError] = []
    for index, doc in enumerate(documents):
        where = f"{name}#{index + 1}" if len(documents) > 1 else name
        job, found = load_document(doc)
        errors.extend(FieldError(e.path, e.message, e.hint, where) for e in found)
        if job is not None:
            jobs.append(job)
    if errors:
        raise ManifestError(errors)
    if not jobs:
        raise ManifestError([FieldError("", "no job in this manifest", source=name)])
    return jobs


def load_one(source: str | Mapping[str, Any], *, name: str = "") -> Job:
    """Load a manifest that holds exactly one job."""
    jobs = load(source, name=name)
    if len(jobs) != 1:
        raise ManifestError(
            [FieldError("", f"expected one job, found {len(jobs)}", source=name)]
        )
    return jobs[0]


def load_path(path: str | Path) -> list[Job]:
    """Load every job in a YAML file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError([FieldError("", f"cannot read: {exc.strerror}", source=str(file))]) from exc
    return load(text, name=str(file))


def manifest_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories into their ``*.yaml``/``*.yml`` files, sorted."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")))
        else:
            found.append(path)
    return found


def load_document(doc: Any) -> tuple[Job | None, list[FieldError]]:
    """Load one document; returns the job or the errors found (never raises)."""
    if not isinstance(doc, Mapping):
        return None, [FieldError("", "a manifest must be a mapping with apiVersion and kind")]
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not api_version or not kind:
        missing = "apiVersion" if not api_version else "kind"
        return None, [FieldError(missing, "required field is missing")]
    entry = KINDS.get((str(api_version), str(kind)))
    if entry is None:
        return None, [_unknown_kind(str(api_version), str(kind))]
    try:
        model = entry.model.model_validate(dict(doc))
    except PydanticValidationError as exc:
        return None, [_field_error(entry.model, err) for err in exc.errors()]
    job: Job | None
    if entry.convert is not None:
        job, errors = entry.convert(model)
        if job is None:
            return None, errors
    else:
        assert isinstance(model, Job)
        job = model
    job.api_version = API_VERSION
    errors = validate_job(job)
    return (None, errors) if errors else (job, [])


def _unknown_kind(api_version: str, kind: str) -> FieldError:
    kinds = sorted({k for _, k in KINDS})
    if kind not in kinds:
        return FieldError("kind", f"unknown kind {kind!r}", did_you_mean(kind, kinds))
    versions = sorted(v for v, k in KINDS if k == kind)
    return FieldError(
        "apiVersion",
        f"{kind} is not served in {api_version!r}",
        f"use one of {', '.join(versions)}",
    )


def validate_job(job: Job) -> list[FieldError]:
    """Checks across fields that the models alone cannot express."""
    errors: list[FieldError] = []
    if not job.metadata.name:
        errors.append(FieldError("metadata.name", "required field is missing"))
    elif not _DNS_LABEL.match(job.metadata.name):
        errors.append(
            FieldError(
                "metadata.name",
                f"{job.metadata.name!r} is not a valid name",
                "use lowercase letters, digits and '-', starting and ending with a letter or digit",
            )
        )
    field = f"spec.{job.REPLICA_SPECS_FIELD}"
    if not job.replica_specs:
        errors.append(FieldError(field, "at least one replica type is required"))
    for rtype, spec in job.replica_specs.items():
        path = f"{field}.{rtype}"
        if rtype not in job.REPLICA_TYPES:
            hint = did_you_mean(rtype, job.REPLICA_TYPES) or (
                f"{job.KIND} replica types are {', '.join(job.REPLICA_TYPES)}"
            )
            errors.append(FieldError(path, f"unknown replica type {rtype!r}", hint))
            continue
        errors.extend(_validate_template(job, path, spec.template))
        if job.metadata.name and spec.replicas:
            longest = f"{job.metadata.name}-{rtype.lower()}-{spec.replicas - 1}"
            if len(longest) > MAX_NAME:
                errors.append(
                    FieldError(
                        "metadata.name",
                        f"pod name {longest!r} would be {len(longest)} characters, over the "
                        f"{MAX_NAME} allowed",
                        f"shorten the job name to at most "
                        f"{MAX_NAME - len(longest) + len(job.metadata.name)} characters",
                    )
                )
    errors.extend(_validate_kind(job, field))
    return errors


def _validate_template(job: Job, path: str, template: Any) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = template.spec.containers
    cpath = f"{path}.template.spec.containers"
    if not containers:
        return [
            FieldError(
                cpath,
                "at least one container is required",
                f"add a container named {job.DEFAULT_CONTAINER!r}",
            )
        ]
    for i, container in enumerate(containers):
        if not container.image:
            errors.append(FieldError(f"{cpath}[{i}].image", "required field is missing"))
    names = [c.name for c in containers]
    if job.DEFAULT_CONTAINER not in names:
        errors.append(
            FieldError(
                cpath,
                f"no container is named {job.DEFAULT_CONTAINER!r}",
                f"{job.KIND} gives its environment to the container named "
                f"{job.DEFAULT_CONTAINER!r}; rename yours"
                + (f" (found {', '.join(map(repr, names))})" if names else ""),
            )
        )
    return errors


def _validate_kind(job: Job, field: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if isinstance(job, TFJob):
        chiefs = [t for t in ("Chief", "Master") if t in job.replica_specs]
        if len(chiefs) > 1:
            errors.append(
                FieldError(field, "Chief and Master both given", "a TFJob has one chief; keep Chief")
            )
        for t in chiefs:
            if job.replica_count(t) > 1:
                errors.append(
                    FieldError(f"{field}.{t}.replicas", "must be 0 or 1", "a TFJob has one chief")
                )
    if isinstance(job, PyTorchJob):
        if "Master" in job.replica_specs and job.replica_count("Master") != 1:
            errors.append(
                FieldError(f"{field}.Master.replicas", "must be 1", "a PyTorchJob has one Master")
            )
        elastic = job.spec.elastic_policy
        if "Master" not in job.replica_specs and elastic is None:
            errors.append(
                FieldError(
                    field,
                    "a Master replica is required",
                    "add Master (replicas: 1), or set spec.elasticPolicy for workers only",
                )
            )
        if elastic is not None:
            lo, hi = elastic.min_replicas, elastic.max_replicas
            if lo is not None and hi is not None and lo > hi:
                errors.append(
                    FieldError("spec.elasticPolicy.minReplicas", f"{lo} is above maxReplicas {hi}")
                )
            workers = job.replica_count("Worker")
            if "Worker" in job.replica_specs and (
                (lo is not None and workers < lo) or (hi is not None and workers > hi)
            ):
                errors.append(
                    FieldError(
                        f"{field}.Worker.replicas",
                        f"{workers} is outside elasticPolicy [{lo}, {hi}]",
                    )
                )
            if elastic.n_proc_per_node is not None and job.spec.nproc_per_node is not None:
                errors.append(
                    FieldError(
                        "spec.elasticPolicy.nProcPerNode",
                        "deprecated and conflicts with spec.nprocPerNode",
                        "keep spec.nprocPerNode only",
                    )
                )
    return errors


# --- pydantic errors -> field errors -------------------------------------------------------


def _field_error(model: type[BaseModel], err: Any) -> FieldError:
    loc = tuple(err["loc"])
    path = join_path(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        known = _known_fields(model, loc[:-1])
        return FieldError(path, "unknown field", did_you_mean(str(loc[-1]), known))
    if kind == "missing":
        return FieldError(path, "required field is missing")
    ctx = err.get("ctx") or {}
    if kind == "greater_than_equal":
        return FieldError(path, f"must be >= {ctx.get('ge')}, got {err.get('input')!r}")
    if kind == "less_than_equal":
        return FieldError(path, f"must be <= {ctx.get('le')}, got {err.get('input')!r}")
    if kind in ("enum", "literal_error"):
        return FieldError(path, f"got {err.get('input')!r}; expected {ctx.get('expected')}")
    return FieldError(path, f"{err['msg']}, got {type(err.get('input')).__name__} {err.get('input')!r}")


def _known_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The wire names of the fields of the model found at ``loc`` (for "did you mean")."""
    current: Any = model
    for part in loc:
        current = _unwrap(current, part)
        if current is None:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or n for n, f in current.model_fields.items()]
    return []


def _unwrap(annotation: Any, part: Any) -> Any:
    """Step from a type into the element named by one location part."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                found = _unwrap(arg, part)
                if found is not None:
                    return found
        return None
    if origin in (list, tuple) and isinstance(part, int):
        return typing.get_args(annotation)[0]
    if origin is dict:
        return typing.get_args(annotation)[1]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(part, str):
        for name, info in annotation.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
    return None
