"""Load job manifests: YAML (multi-document) or dicts, dispatched on apiVersion and kind.

``load`` returns defaulted, validated job models or raises :class:`ManifestError` with
*every* problem found, each with its field path. Our own group (``kubemill.dev``) and
the upstream groups (``kubeflow.org``) load into the same models; older versions are
converted. Which kinds and versions load is a :class:`~.kinds.KindTable` the caller passes:
the registry (:mod:`kubemill.kinds`) holds the kinds and binds it.

Nothing here reads a file: the SDK and the CLI do (:mod:`kubemill.sdk.manifests`) and
pass the text, with the file's name, to ``load``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from kubemill.api.common import API_VERSION, Job
from kubemill.api.errors import FieldError, ManifestError, child_path, did_you_mean
from kubemill.api.field_errors import (
    parse_errors,
)
from kubemill.api.kinds import ApiVersion, KindTable

MAX_NAME = 63
MAX_SOURCE_CHARS = 2 * 1024 * 1024
"""The most YAML text ``load`` reads at once (several documents together); a job
manifest is a few kilobytes, and Kubernetes refuses objects over about 1.5 MB."""
MAX_EXPANDED_NODES = 200_000
"""The most YAML nodes one document may stand for once its aliases are expanded: a few
hundred bytes of nested aliases (a "billion laughs") otherwise expand to gigabytes as the
document is validated."""
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def load(
    source: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    kinds: KindTable,
    name: str = "",
) -> list[Job]:
    """Load every job in ``source`` (YAML text, one dict or a list of dicts).

    Raises :class:`ManifestError` listing all problems in all documents.
    """
    documents: list[Any]
    if isinstance(source, str):
        if len(source) > MAX_SOURCE_CHARS:
            raise ManifestError(
                [
                    FieldError(
                        "",
                        f"the manifest is {len(source)} characters, over the"
                        f" {MAX_SOURCE_CHARS} allowed",
                        "a job manifest is a few kilobytes; split the file",
                        name,
                    )
                ]
            )
        try:
            documents = [d for d in yaml.load_all(source, Loader=_BoundedLoader) if d is not None]
        except _TooLarge as exc:
            raise ManifestError([FieldError("", str(exc), exc.hint, name)]) from exc
        except yaml.YAMLError as exc:
            raise ManifestError([_yaml_error(exc, name)]) from exc
    elif isinstance(source, (list, tuple)):
        documents = list(source)
    else:
        # One document; anything but a mapping is reported as such, never raised raw.
        documents = [source]
    jobs: list[Job] = []
    errors: list[FieldError] = []
    for index, doc in enumerate(documents):
        where = f"{name}#{index + 1}" if len(documents) > 1 else name
        job, found = load_document(doc, kinds=kinds)
        errors.extend(FieldError(e.path, e.message, e.hint, where) for e in found)
        if job is not None:
            jobs.append(job)
    if errors:
        raise ManifestError(errors)
    if not jobs:
        raise ManifestError([FieldError("", "no job in this manifest", source=name)])
    return jobs


class _TooLarge(yaml.YAMLError):
    """A document that would expand past :data:`MAX_EXPANDED_NODES`."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that measures a document's expanded size before building it.

    Composing is cheap (an alias is a reference to a node already composed); building
    Python objects shares them too. The cost comes later, when validation walks every
    alias as a copy, so the bound is checked on the composed graph, where each distinct
    node is measured once.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        expanded = _expanded_size(node)
        if expanded > MAX_EXPANDED_NODES:
            raise _TooLarge(
                f"the document expands to {expanded} YAML nodes through its aliases (*name),"
                f" over the {MAX_EXPANDED_NODES} allowed",
                "write the values out, or use fewer nested aliases",
            )
        return super().construct_document(node)


def _expanded_size(root: yaml.Node) -> int:
    """How many nodes ``root`` stands for with every alias expanded (shared nodes counted
    once per use), computed once per distinct node: linear in the composed document."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    # Post-order without recursion: a deeply nested document must not hit Python's limit.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            open_nodes.discard(id(node))
            continue
        if id(node) in open_nodes:
            # An alias inside its own anchor (&a [*a]): no manifest field is recursive.
            raise _TooLarge(
                "an alias refers to a node that contains it (a recursive structure)",
                "write the values out instead of the alias",
            )
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise _TooLarge(
                    "an alias refers to a node that contains it (a recursive structure)",
                    "write the values out instead of the alias",
                )
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _yaml_error(exc: yaml.YAMLError, source: str) -> FieldError:
    """A YAML syntax error on one line: what is wrong and where."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return FieldError(
        "", f"not valid YAML: {problem}{where}", "check indentation and brackets", source
    )


def load_one(source: str | Mapping[str, Any], *, kinds: KindTable, name: str = "") -> Job:
    """Load a manifest that holds exactly one job."""
    jobs = load(source, kinds=kinds, name=name)
    if len(jobs) != 1:
        raise ManifestError([FieldError("", f"expected one job, found {len(jobs)}", source=name)])
    return jobs[0]


def load_document(doc: Any, *, kinds: KindTable) -> tuple[Job | None, list[FieldError]]:
    """Load one document; returns the job or the errors found (never raises)."""
    if not isinstance(doc, Mapping):
        return None, [
            FieldError(
                "",
                f"a manifest must be a mapping, got {type(doc).__name__}",
                "a job manifest starts with apiVersion: and kind:",
            )
        ]
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not api_version or not kind:
        missing = "apiVersion" if not api_version else "kind"
        return None, [
            FieldError(
                missing,
                "required field is missing",
                f"add apiVersion: {API_VERSION} and kind: one of {', '.join(kinds.kind_names())}",
            )
        ]
    entry = kinds.entry(str(api_version), str(kind))
    if entry is None:
        return None, [_unknown_kind(kinds, str(api_version), str(kind))]
    try:
        model = entry.model.model_validate(dict(doc))
    except PydanticValidationError as exc:
        errors = parse_errors(entry.model, exc)
        # The cutting is a rejected manifest's only: its module is loaded for one.
        from kubemill.api.pruning import checks_despite_parse_errors

        return None, errors + checks_despite_parse_errors(entry, doc, exc, checked=_checked)
    job, errors = _checked(entry, model)
    return (None, errors) if errors else (job, [])


def _checked(entry: ApiVersion, model: BaseModel) -> tuple[Job | None, list[FieldError]]:
    """Convert (legacy versions) and run the semantic checks on a parsed model."""
    job: Job | None
    converting: list[FieldError] = []
    if entry.convert is not None:
        job, converting = entry.convert(model)
        if job is None:
            return None, converting
    else:
        assert isinstance(model, Job)
        job = model
    job.api_version = API_VERSION
    errors = validate_job(job)
    if entry.remap is not None:
        remap = entry.remap
        job.set_source_paths(lambda path: remap(model, path))
        errors = [replace(e, path=job.source_path(e.path)) for e in errors]
    if converting:
        # Items the conversion had to leave out are reported already; what the checks
        # then say about the replica list as a whole is not news.
        errors = [e for e in errors if e.path not in ("spec.replicaSpecs", "spec.tfReplicaSpecs")]
    return job, converting + errors


def _unknown_kind(kinds: KindTable, api_version: str, kind: str) -> FieldError:
    names = kinds.kind_names()
    if kind not in names:
        hint = did_you_mean(kind, names) or f"kubemill runs {', '.join(names)}"
        return FieldError("kind", f"unknown kind {kind!r}", hint)
    versions = kinds.versions_of(kind)
    return FieldError(
        "apiVersion",
        f"{kind} is not served in {api_version!r}",
        f"use one of {', '.join(versions)}",
    )


def validate_job(job: Job) -> list[FieldError]:
    """Checks across fields that the models alone cannot express."""
    errors: list[FieldError] = []
    if not job.metadata.name:
        errors.append(FieldError("metadata.name", "required field is missing", "name the job"))
    elif not _DNS_LABEL.match(job.metadata.name):
        errors.append(
            FieldError(
                "metadata.name",
                f"{job.metadata.name!r} is not a valid name",
                "use lowercase letters, digits and '-', starting and ending with a letter or digit",
            )
        )
    if job.DERIVED_REPLICA_SPECS:
        return errors + job.kind_errors() + job.refused_fields()
    field = f"spec.{job.REPLICA_SPECS_FIELD}"
    if not job.replica_specs:
        errors.append(FieldError(field, "at least one replica type is required"))
    for rtype, spec in job.replica_specs.items():
        path = child_path(field, rtype)
        if rtype not in job.REPLICA_TYPES:
            hint = did_you_mean(rtype, job.REPLICA_TYPES) or (
                f"{job.KIND} replica types are {', '.join(job.REPLICA_TYPES)}"
            )
            errors.append(FieldError(path, f"unknown replica type {rtype!r}", hint))
            continue
        errors.extend(_validate_template(job, path, spec.template))
    errors.extend(_validate_pod_names(job))
    errors.extend(job.kind_errors())
    errors.extend(job.refused_fields())
    return errors


def _validate_pod_names(job: Job) -> list[FieldError]:
    """One error if the longest derived pod name exceeds the DNS label limit."""
    if not job.metadata.name:
        return []
    names = [
        f"{job.metadata.name}-{rtype.lower()}-{count - 1}"
        for rtype in job.replica_specs
        if rtype in job.REPLICA_TYPES and (count := job.replica_count(rtype)) > 0
    ]
    if not names:
        return []
    longest = max(names, key=len)
    if len(longest) <= MAX_NAME:
        return []
    room = MAX_NAME - len(longest) + len(job.metadata.name)
    return [
        FieldError(
            "metadata.name",
            f"pod name {longest!r} would be {len(longest)} characters, over the {MAX_NAME} allowed",
            f"shorten the job name to at most {room} characters",
        )
    ]


def _validate_template(job: Job, path: str, template: Any) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = template.spec.containers
    cpath = f"{path}.template.spec.containers"
    if not containers:
        return [
            FieldError(
                cpath,
                "at least one container is required",
                f"add a container named {job.DEFAULT_CONTAINER!r}"
                if job.DEFAULT_CONTAINER
                else "add the container to run",
            )
        ]
    for i, container in enumerate(containers):
        if not container.image:
            errors.append(
                FieldError(
                    f"{cpath}[{i}].image",
                    "required field is missing",
                    "name an image (locally: an environment from the images config, "
                    "or any name to use the current Python)",
                )
            )
    names = [c.name for c in containers]
    # Kinds without a DEFAULT_CONTAINER take the first one (MPI's): any name will do.
    if job.DEFAULT_CONTAINER and job.DEFAULT_CONTAINER not in names:
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
