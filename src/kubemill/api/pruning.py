"""The semantic checks of a job document that pydantic rejected, so that every problem of
a manifest is reported at once: the rejected fields are cut out of a copy of the document
until it parses, then the loader's checks run on what is left.

Apart from :mod:`.loader` because only a rejected manifest needs it: a valid job (every
``kubemill run``) loads none of it.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from kubemill.api.common import Job
from kubemill.api.errors import FieldError, join_path
from kubemill.api.field_errors import annotation_at, clean_loc, known_fields, strip_optional
from kubemill.api.kinds import ApiVersion

MAX_PRUNE_ROUNDS = 4


def checks_despite_parse_errors(
    entry: ApiVersion,
    doc: Mapping[str, Any],
    first: PydanticValidationError,
    *,
    checked: Callable[[ApiVersion, BaseModel], tuple[Job | None, list[FieldError]]],
) -> list[FieldError]:
    """The semantic errors of a document that did not parse, so all are reported at once.

    The fields pydantic rejected are cut out of a copy of the document (falling back to
    their defaults) until it parses; then the semantic checks run on what is left. Errors
    the cutting itself could cause (about a cut field, inside it, or "missing" errors on
    the collection an item was cut from) are dropped: they were reported already.
    ``checked`` is the loader's own conversion and checks of a parsed model.
    """
    data: Any = copy.deepcopy(dict(doc))
    cut: list[str] = []
    exc = first
    for _ in range(MAX_PRUNE_ROUNDS):
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
        _job, errors = checked(entry, model)
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
