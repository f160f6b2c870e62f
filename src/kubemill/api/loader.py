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

import copy
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from kubemill.api.common import API_VERSION, Job
from kubemill.api.errors import FieldError, ManifestError, child_path, did_you_mean, join_path
from kubemill.api.field_errors import (
    annotation_at,
    clean_loc,
    known_fields,
    parse_errors,
    strip_optional,
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
        return None, errors + _checks_despite_parse_errors(entry, doc, exc)
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


_MAX_PRUNE_ROUNDS = 4


def _checks_despite_parse_errors(
    entry: ApiVersion, doc: Mapping[str, Any], first: PydanticValidationError
) -> list[FieldError]:
    """The semantic errors of a document that did not parse, so all are reported at once.

    The fields pydantic rejected are cut out of a copy of the document (falling back to
    their defaults) until it parses; then the semantic checks run on what is left. Errors
    the cutting itself could cause (about a cut field, inside it, or "missing" errors on
    the collection an item was cut from) are dropped: they were reported already.
    """
    data: Any = copy.deepcopy(dict(doc))
    cut: list[str] = []
    exc = first
    for _ in range(_MAX_PRUNE_ROUNDS):
        targets = [_prune_target(data, entry.model, err) for err in exc.errors()]
        if any(t is None for t in targets):
            return []
        unique = {(id(t.container), t.key): t for t in targets if t is not None}
        for target in unique.values():
            cut.extend(target.shadows)
        _apply_cuts(list(unique.values()))
        try:
            model = entry.model.model_validate(data)
        except PydanticValidationError as again:
            exc = again
            continue
        _job, errors = _checked(entry, model)
        return [e for e in errors if not any(_shadowed(e.path, c) for c in cut)]
    return []


@dataclass(frozen=True)
class _Cut:
    """One part of a document to remove: ``container[key]``."""

    container: Any
    key: Any
    shadows: tuple[str, ...]
    """Paths whose semantic errors this cut may cause."""


def _prune_target(data: Any, model: type[BaseModel], err: Any) -> _Cut | None:
    """Where to cut for one pydantic error: the deepest part of its loc present in ``data``."""
    clean = clean_loc(model, tuple(err["loc"]))
    parent: Any = None
    key: Any = None
    current = data
    depth = 0
    for part in clean:
        found = _child_key(current, part)
        if found is _ABSENT:
            break
        parent, key, current = current, found, current[found]
        depth += 1
    if parent is None:
        return None  # the error is about the document itself; nothing sensible to cut
    path = join_path(clean[:depth])
    shadows: tuple[str, ...] = (path,)
    # A cut list item or map entry (a replica type) can make its collection look empty
    # or incomplete; errors about that collection are artefacts of the cut.
    if isinstance(parent, list) or _is_collection_entry(model, clean[:depth]):
        shadows = (path, join_path(clean[: depth - 1]))
    if err["type"] == "extra_forbidden" and depth == len(clean):
        # A misspelt field (`contianers`) leaves the field it meant unset: errors about
        # that one are the same problem (unless the document also sets it). (difflib is
        # imported here: only a manifest with a mistake needs it, ~1 ms of every submission.)
        import difflib

        meant = difflib.get_close_matches(
            str(clean[-1]), known_fields(model, clean[:-1]), n=1, cutoff=0.6
        )
        shadows += tuple(join_path((*clean[:-1], m)) for m in meant if m not in parent)
    return _Cut(parent, key, shadows)


_ABSENT = object()


def _child_key(current: Any, part: Any) -> Any:
    if isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
        return part
    if isinstance(current, dict):
        if part in current:
            return part
        # Replica-type keys are case-normalised before validation; find the raw key.
        matches = [k for k in current if isinstance(k, str) and str(part).lower() == k.lower()]
        if len(matches) == 1:
            return matches[0]
    return _ABSENT


def _is_collection_entry(model: type[BaseModel], loc: tuple[Any, ...]) -> bool:
    """Whether ``loc`` names an entry of a dict field (a replica type, a label ...)."""
    if not loc:
        return False
    parent = annotation_at(model, loc[:-1])
    return parent is not None and typing.get_origin(strip_optional(parent)) is dict


def _apply_cuts(cuts: list[_Cut]) -> None:
    # List items go in descending index order so earlier cuts do not shift later ones.
    ordered = sorted(cuts, key=lambda c: c.key if isinstance(c.key, int) else -1, reverse=True)
    for cut in ordered:
        if isinstance(cut.container, dict):
            cut.container.pop(cut.key, None)
        elif isinstance(cut.container, list) and cut.key < len(cut.container):
            del cut.container[cut.key]


def _shadowed(path: str, cut: str) -> bool:
    """Whether an error at ``path`` is at or inside the cut path."""
    return path == cut or path.startswith((cut + ".", cut + "["))


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
