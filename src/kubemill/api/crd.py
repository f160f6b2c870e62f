"""CustomResourceDefinitions for the job kinds, generated from the pydantic models.

The CRDs are never written by hand: :func:`openapi_schema` turns a model's JSON schema
into a *structural* OpenAPI v3 schema as ``apiextensions.k8s.io/v1`` requires it (every
``$ref`` inlined, ``anyOf``-with-null collapsed, ``str | int`` as
``x-kubernetes-int-or-string``, open JSON parts as ``x-kubernetes-preserve-unknown-fields``,
no defaults: the loader defaults, so the server need not), and :func:`build_crd` wraps it
with names, subresources and printer columns from one kind's :class:`~.kinds.KindApi`.
Which kinds get CRDs is the registry's business (:func:`kubemill.kinds.crds`).

:func:`structural_errors` checks the rules a schema must follow to be accepted by the
API server, so the generator can be tested without a cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from kubemill.api.common import GROUP, VERSION
from kubemill.api.kinds import KindApi

CRD_API_VERSION = "apiextensions.k8s.io/v1"
PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"

# Value keywords copied from the pydantic schema unchanged; everything else is either
# translated below or dropped (``title`` and ``default`` carry nothing the server needs).
_COPIED = (
    "description",
    "format",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
)
_DROPPED = ("title", "default", "examples", "additionalProperties", "discriminator")


class SchemaError(ValueError):
    """A model uses a type that has no structural OpenAPI form (e.g. a union of objects)."""


# --- JSON schema -> structural OpenAPI v3 ----------------------------------------------------


def openapi_schema(entry: KindApi) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of one kind."""
    return model_openapi_schema(
        entry.model,
        kind=entry.kind,
        api_version=f"{GROUP}/{VERSION}",
        required=entry.required,
        overrides=entry.schema_overrides,
    )


def model_openapi_schema(
    model: type[BaseModel],
    *,
    kind: str,
    api_version: str,
    required: Iterable[str] = ("spec",),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of an object modelled by ``model`` (its ``spec``
    and ``status``): a job kind's, or another object an engine defines (a runtime)."""
    source = model.model_json_schema(by_alias=True, mode="validation")
    defs: Mapping[str, Any] = source.get("$defs", {})
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string", "description": f"The API version ({api_version})."},
        "kind": {"type": "string", "description": f"Always {kind}."},
        # The API server owns metadata's schema; a CRD may not describe it further.
        "metadata": {"type": "object"},
    }
    for name in ("spec", "status"):
        if name in source.get("properties", {}):
            properties[name] = _convert(source["properties"][name], defs, name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if source.get("description"):
        schema["description"] = source["description"]
    if required:
        schema["required"] = list(required)
    for path, keywords in (overrides or {}).items():
        _override(schema, path, keywords)
    return schema


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Inline ``$ref`` (siblings of the ref win over the definition's own keywords)."""
    merged = dict(node)
    while "$ref" in merged:
        ref = merged.pop("$ref")
        name = str(ref).rsplit("/", 1)[-1]
        if name not in defs:
            raise SchemaError(f"{path}: unresolvable reference {ref!r}")
        merged = {**defs[name], **merged}
    return merged


def _convert(raw: Mapping[str, Any], defs: Mapping[str, Any], path: str) -> dict[str, Any]:
    node = _resolve(raw, defs, path)
    if "anyOf" in node:
        return _convert_union(node, defs, path)
    for keyword in ("oneOf", "allOf", "not"):
        if keyword in node:
            raise SchemaError(f"{path}: {keyword} has no structural form; use a plain type")
    # Copies: a definition used twice must not share its lists (an enum) between the two
    # places, or YAML dumpers write anchors that some tools reject.
    out: dict[str, Any] = {k: copy.deepcopy(node[k]) for k in _COPIED if k in node}
    if "const" in node:
        out["enum"] = [node["const"]]
    kind = node.get("type")
    if kind is None:
        # `Any` (pydantic's `{}`): an arbitrary JSON value, kept as the user wrote it.
        if "enum" in out:
            raise SchemaError(f"{path}: an enum needs a type")
        out[PRESERVE] = True
        return out
    if isinstance(kind, list):
        raise SchemaError(f"{path}: a list of types has no structural form")
    out["type"] = kind
    if kind == "object":
        _convert_object(node, out, defs, path)
    elif kind == "array":
        if isinstance(node.get("items"), list):
            raise SchemaError(f"{path}: tuple types have no structural form; use a list")
        out["items"] = _convert(node.get("items", {}), defs, f"{path}[*]")
    return out


def _convert_object(
    node: Mapping[str, Any], out: dict[str, Any], defs: Mapping[str, Any], path: str
) -> None:
    properties = node.get("properties")
    extra = node.get("additionalProperties")
    if properties:
        out["properties"] = {
            name: _convert(sub, defs, f"{path}.{name}") for name, sub in properties.items()
        }
        if node.get("required"):
            out["required"] = list(node["required"])
        if extra is True:
            # An open model (extra="allow"): known fields typed, the rest kept.
            out[PRESERVE] = True
    elif isinstance(extra, Mapping):
        out["additionalProperties"] = _convert(extra, defs, f"{path}.*")
    else:
        # dict[str, Any] or a model without fields: any keys, any values.
        out[PRESERVE] = True


def _convert_union(node: Mapping[str, Any], defs: Mapping[str, Any], path: str) -> dict[str, Any]:
    options = [_resolve(o, defs, path) for o in node["anyOf"]]
    options = [o for o in options if o.get("type") != "null"]
    outer = {k: v for k, v in node.items() if k not in ("anyOf", *_DROPPED)}
    if len(options) == 1:
        # `X | None`: optional on the wire is just "may be absent".
        return _convert({**options[0], **outer}, defs, path)
    types = {o.get("type") for o in options}
    plain = all(set(o) <= {"type", "description", "title"} for o in options)
    if types == {"string", "integer"} and plain:
        out: dict[str, Any] = {k: outer[k] for k in _COPIED if k in outer}
        out[INT_OR_STRING] = True
        return out
    raise SchemaError(
        f"{path}: a union of {sorted(str(t) for t in types)} has no structural form; "
        "use one type, `str | int`, or `Any`"
    )


def _override(schema: dict[str, Any], path: str, keywords: Mapping[str, Any]) -> None:
    node = schema
    for part in path.split("."):
        if part == "*":
            node = node.get("additionalProperties") or node.get("items") or {}
        else:
            node = node.get("properties", {}).get(part, {})
        if not node:
            raise SchemaError(f"schema override {path!r}: no such field in the schema")
    for key, value in keywords.items():
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value


# --- CRD objects ------------------------------------------------------------------------------


def build_crd(entry: KindApi, *, group: str = GROUP, version: str = VERSION) -> dict[str, Any]:
    """The ``CustomResourceDefinition`` of one kind."""
    subresources: dict[str, Any] = {"status": {}}
    if entry.scale is not None:
        subresources["scale"] = entry.scale.to_wire()
    names: dict[str, Any] = {
        "kind": entry.kind,
        "listKind": f"{entry.kind}List",
        "plural": entry.plural,
        "singular": entry.singular,
    }
    if entry.short_names:
        names["shortNames"] = list(entry.short_names)
    if entry.categories:
        names["categories"] = list(entry.categories)
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{entry.plural}.{group}",
            "labels": {"app.kubernetes.io/part-of": "kubemill"},
        },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": names,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema(entry)},
                    "subresources": subresources,
                    "additionalPrinterColumns": [c.to_wire() for c in entry.printer_columns],
                }
            ],
        },
    }


def crds(kinds: Iterable[KindApi]) -> list[dict[str, Any]]:
    """The CRDs of ``kinds``, in their order."""
    return [build_crd(kind) for kind in kinds]


# --- structural schema rules --------------------------------------------------------------------

# The keywords of apiextensions.k8s.io/v1 JSONSchemaProps that a structural schema may use.
_ALLOWED = frozenset(
    {
        *_COPIED,
        "type",
        "properties",
        "additionalProperties",
        "items",
        "required",
        "nullable",
        "default",
        "example",
        "externalDocs",
        "x-kubernetes-embedded-resource",
        INT_OR_STRING,
        PRESERVE,
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})


def structural_errors(schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Why ``schema`` is not a structural schema the API server accepts ([] if it is).

    Checks the rules of apiextensions.k8s.io/v1 that this generator can break: a type on
    every node (unless int-or-string or preserve-unknown-fields), no ``$ref``/``anyOf``/...
    in the structure, ``properties`` and ``additionalProperties`` never together and never
    a boolean ``additionalProperties``, an ``items`` schema on every array, no type beside
    int-or-string, and at the root only ``metadata: {type: object}``.
    """
    errors: list[str] = []
    where = path or "<root>"
    unknown = sorted(set(schema) - _ALLOWED)
    if unknown:
        errors.append(f"{where}: keywords not allowed in a structural schema: {', '.join(unknown)}")
    kind = schema.get("type")
    if schema.get(INT_OR_STRING):
        if kind is not None:
            errors.append(f"{where}: {INT_OR_STRING} must not have a type")
    elif kind is None:
        if not schema.get(PRESERVE):
            errors.append(f"{where}: type is required")
    elif kind not in _TYPES:
        errors.append(f"{where}: unknown type {kind!r}")
    if "enum" in schema and not schema["enum"]:
        errors.append(f"{where}: enum must not be empty")
    extra = schema.get("additionalProperties")
    if extra is not None:
        if not isinstance(extra, Mapping):
            errors.append(f"{where}: additionalProperties must be a schema, not {extra!r}")
        elif "properties" in schema:
            errors.append(f"{where}: properties and additionalProperties are mutually exclusive")
        else:
            errors.extend(structural_errors(extra, f"{path}.*"))
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            errors.append(f"{where}: an array needs an items schema")
        else:
            errors.extend(structural_errors(items, f"{path}[*]"))
    elif "items" in schema:
        errors.append(f"{where}: items on a non-array")
    if "properties" in schema and kind not in (None, "object"):
        errors.append(f"{where}: properties on a {kind}")
    for name, sub in schema.get("properties", {}).items():
        errors.extend(structural_errors(sub, f"{path}.{name}" if path else name))
    required = schema.get("required", [])
    missing = [r for r in required if r not in schema.get("properties", {})]
    if missing:
        errors.append(f"{where}: required names fields that are not declared: {missing}")
    if not path:
        if kind != "object":
            errors.append("<root>: the root must be an object")
        meta = schema.get("properties", {}).get("metadata")
        if meta is not None and meta != {"type": "object"}:
            errors.append("metadata: a CRD may only declare `metadata: {type: object}`")
    return errors


__all__ = [
    "CRD_API_VERSION",
    "INT_OR_STRING",
    "PRESERVE",
    "SchemaError",
    "build_crd",
    "crds",
    "model_openapi_schema",
    "openapi_schema",
    "structural_errors",
]
