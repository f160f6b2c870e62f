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
import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Union

import yaml
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from kubemill.api.common import API_VERSION, Job
from kubemill.api.errors import FieldError, ManifestError, child_path, did_you_mean, join_path
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
        errors = _parse_errors(entry.model, exc)
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
    clean = _clean_loc(model, tuple(err["loc"]))
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
        # that one are the same problem (unless the document also sets it).
        meant = difflib.get_close_matches(
            str(clean[-1]), _known_fields(model, clean[:-1]), n=1, cutoff=0.6
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
    parent = _annotation_at(model, loc[:-1])
    return parent is not None and typing.get_origin(_strip_optional(parent)) is dict


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
    # Kinds without a DEFAULT_CONTAINER take the first one (MPIJob): any name will do.
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


# --- pydantic errors -> field errors -------------------------------------------------------


def _parse_errors(model: type[BaseModel], exc: PydanticValidationError) -> list[FieldError]:
    """One FieldError per problem; a value no member of a union accepts is one problem."""
    grouped: dict[tuple[Any, ...], list[Any]] = {}
    for err in exc.errors():
        grouped.setdefault(_clean_loc(model, tuple(err["loc"])), []).append(err)
    out: list[FieldError] = []
    for loc, errs in grouped.items():
        if len(errs) == 1 or any(e["type"] in _STRUCTURAL for e in errs):
            out.extend(_field_error(model, loc, err) for err in errs)
        else:
            out.append(_union_error(loc, errs))
    return out


_STRUCTURAL = frozenset({"extra_forbidden", "missing"})

_TYPE_WORDS: dict[str, tuple[str, str]] = {
    "int_type": ("a whole number", "write a number without quotes, e.g. 2"),
    "int_parsing": ("a whole number", "write a number without quotes, e.g. 2"),
    "int_from_float": ("a whole number", "drop the fraction"),
    "float_type": ("a number", "write a number without quotes"),
    "float_parsing": ("a number", "write a number without quotes"),
    "string_type": ("a string", "quote the value"),
    "bool_type": ("true or false", "write true or false"),
    "bool_parsing": ("true or false", "write true or false"),
    "list_type": ("a list", "write a YAML list, one '- item' per line"),
    "dict_type": ("a mapping", "write 'key: value' pairs"),
    "model_type": ("a mapping", "write 'key: value' pairs"),
    "model_attributes_type": ("a mapping", "write 'key: value' pairs"),
}


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _field_error(model: type[BaseModel], loc: tuple[Any, ...], err: Any) -> FieldError:
    path = join_path(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        known = _known_fields(model, loc[:-1])
        hint = did_you_mean(str(loc[-1]), known) or (
            f"known fields here: {', '.join(sorted(known))}" if known else "remove it"
        )
        return FieldError(path, "unknown field", hint)
    if kind == "missing":
        return FieldError(path, "required field is missing", f"set {loc[-1]}")
    ctx = err.get("ctx") or {}
    got = err.get("input")
    if kind.startswith("kubemill_"):
        # Our own checks inside validators: the message is final, the hint is in ctx.
        return FieldError(path, str(err["msg"]), str(ctx.get("hint", "")))
    if kind == "greater_than_equal":
        return FieldError(path, f"must be >= {ctx.get('ge')}, got {got!r}")
    if kind == "less_than_equal":
        return FieldError(path, f"must be <= {ctx.get('le')}, got {got!r}")
    if kind in ("enum", "literal_error"):
        return FieldError(path, f"got {got!r}", f"use one of {ctx.get('expected')}")
    if kind in _TYPE_WORDS:
        words, hint = _TYPE_WORDS[kind]
        return FieldError(path, f"must be {words}, got {_describe(got)}", hint)
    message = str(err["msg"]).replace("Input should be", "must be", 1)
    return FieldError(path, f"{message}, got {_describe(got)}")


def _union_error(loc: tuple[Any, ...], errs: list[Any]) -> FieldError:
    words = []
    for err in errs:
        word = _TYPE_WORDS.get(err["type"], (str(err["msg"]).replace("Input should be ", ""), ""))[
            0
        ]
        if word not in words:
            words.append(word)
    return FieldError(
        join_path(loc), f"must be {' or '.join(words)}, got {_describe(errs[0].get('input'))}"
    )


def _clean_loc(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """``loc`` without the union-member tags pydantic inserts (``minResources.cpu.str``)."""
    out: list[Any] = []
    current: Any = model
    for part in loc:
        if current is not None and _is_real_union(current) and _unwrap(current, part) is None:
            # A tag naming the union member pydantic tried, not a field: skip it and
            # follow that member if we can tell which one it is.
            current = next(
                (a for a in typing.get_args(current) if getattr(a, "__name__", None) == part), None
            )
            continue
        out.append(part)
        current = _unwrap(current, part) if current is not None else None
    return tuple(out)


def _is_real_union(annotation: Any) -> bool:
    if typing.get_origin(annotation) not in (Union, types.UnionType):
        return False
    return len([a for a in typing.get_args(annotation) if a is not type(None)]) > 1


def _strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _annotation_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    current: Any = model
    for part in loc:
        current = _unwrap(current, part)
        if current is None:
            return None
    return current


def _known_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The wire names of the fields of the model found at ``loc`` (for "did you mean")."""
    current = _strip_optional(_annotation_at(model, loc))
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
