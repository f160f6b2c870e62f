"""pydantic's validation errors as field errors: one :class:`FieldError` per problem, at the
manifest's field path (aliases, not Python names), in words a manifest's author reads (what
was expected, what was found, a hint, the field names that would have been right).

Used by :mod:`kubemill.api.loader`; pure.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from kubemill.api.errors import FieldError, did_you_mean, join_path


def parse_errors(model: type[BaseModel], exc: PydanticValidationError) -> list[FieldError]:
    """One FieldError per problem; a value no member of a union accepts is one problem."""
    grouped: dict[tuple[Any, ...], list[Any]] = {}
    for err in exc.errors():
        grouped.setdefault(clean_loc(model, tuple(err["loc"])), []).append(err)
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
        known = known_fields(model, loc[:-1])
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


def clean_loc(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, ...]:
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


def strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def annotation_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    current: Any = model
    for part in loc:
        current = _unwrap(current, part)
        if current is None:
            return None
    return current


def known_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The wire names of the fields of the model found at ``loc`` (for "did you mean")."""
    current = strip_optional(annotation_at(model, loc))
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


__all__ = ["annotation_at", "clean_loc", "known_fields", "parse_errors", "strip_optional"]
