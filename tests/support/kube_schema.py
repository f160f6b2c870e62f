"""What a kube-apiserver checks in an object before storing it, for the test cluster.

:class:`~kmock_cluster.KubeCluster` calls these on every write, so that a test against it
fails where a real cluster would:

- custom resources: the structural ``openAPIV3Schema`` of the served CRD version. Unknown
  fields are pruned (:func:`prune`) as apiextensions-apiserver does -- silently, except
  under ``x-kubernetes-preserve-unknown-fields`` -- and nulls of non-nullable fields are
  dropped; then the value is validated (:func:`validate`) with the API server's messages
  (``spec.x: Invalid value: ...``) and field paths;
- built-in kinds: the official OpenAPI schemas bundled by ``kubernetes-validate``
  (:func:`builtin_errors`), unknown fields dropped as a typed decoder drops them;
- ``metadata`` (:func:`metadata_errors`): pruned to ObjectMeta's fields at the root, names
  checked as DNS subdomains (or DNS-1035 labels for services);
- pods (:func:`pod_update_errors`): the spec is immutable but for the fields
  ``ValidatePodUpdate`` lets change.

Errors are :class:`FieldError` values; :func:`invalid_status` turns them into the
``422 Invalid`` ``Status`` body a real server sends.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime
import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import kubernetes_validate
from referencing import Registry, Resource

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
EMBEDDED = "x-kubernetes-embedded-resource"

OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
"""The fields of ``metav1.ObjectMeta``: the API server keeps only these in ``metadata``."""

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


# --- errors ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldError:
    """One field error, as ``k8s.io/apimachinery/pkg/util/validation/field.Error``."""

    path: str
    type: str
    """``Invalid``, ``Required``, ``Unsupported``, ``Forbidden`` or ``TooMany``."""
    value: Any = None
    detail: str = ""

    @property
    def reason(self) -> str:
        return {
            "Invalid": "FieldValueInvalid",
            "Required": "FieldValueRequired",
            "Unsupported": "FieldValueNotSupported",
            "Forbidden": "FieldValueForbidden",
        }.get(self.type, "FieldValueInvalid")

    @property
    def message(self) -> str:
        """The message without the path, as in a Status cause."""
        if self.type == "Required":
            return "Required value" + (f": {self.detail}" if self.detail else "")
        if self.type == "Forbidden":
            return f"Forbidden: {self.detail}"
        if self.type == "Unsupported":
            return f"Unsupported value: {_show(self.value)}: {self.detail}"
        return f"Invalid value: {_show(self.value)}: {self.detail}"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str | int | float | bool) else _type_name(value)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def invalid_status(kind: str, group: str, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """The ``422 Invalid`` Status body of a refused write."""
    qualified = f"{kind}.{group}" if group else kind
    listed = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(map(str, errors)) + "]"
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{qualified} "{name}" is invalid: {listed}',
        "reason": "Invalid",
        "details": {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": e.reason, "message": e.message, "field": e.path} for e in errors],
        },
        "code": 422,
    }


# --- pruning ---------------------------------------------------------------------------------


def prune(obj: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the object ``obj`` with what a structural schema does not specify removed.

    At the root ``apiVersion``, ``kind`` and ``metadata`` are always kept (metadata pruned to
    ObjectMeta's fields); so are they in ``x-kubernetes-embedded-resource`` objects.
    """
    pruned = _prune(copy.deepcopy(obj), schema, embedded=True)
    assert isinstance(pruned, dict)
    return pruned


def _prune(value: Any, schema: Mapping[str, Any], *, embedded: bool = False) -> Any:
    if isinstance(value, dict):
        embedded = embedded or bool(schema.get(EMBEDDED))
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep_unknown = bool(schema.get(PRESERVE))
        for key in list(value):
            if embedded and key in ("apiVersion", "kind"):
                continue
            if embedded and key == "metadata" and isinstance(value[key], dict):
                value[key] = {k: v for k, v in value[key].items() if k in OBJECT_META_FIELDS}
                continue
            sub = properties.get(key)
            if sub is None and isinstance(extra, Mapping):
                sub = extra
            if sub is None:
                if not keep_unknown:
                    del value[key]
                continue
            if value[key] is None and not sub.get("nullable"):
                del value[key]  # a null of a non-nullable field is dropped, not refused
                continue
            value[key] = _prune(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_prune(item, schema["items"]) for item in value]
    return value


# --- validation ------------------------------------------------------------------------------


def validate(obj: Any, schema: Mapping[str, Any], path: str = "") -> list[FieldError]:
    """Every violation of a structural schema's value rules in ``obj``.

    Root-level ``metadata`` is left to :func:`metadata_errors` (a CRD may not describe it).
    """
    errors: list[FieldError] = []
    _validate(obj, schema, path, errors, root=True)
    return errors


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _validate(
    value: Any, schema: Mapping[str, Any], path: str, errors: list[FieldError], *, root: bool
) -> None:
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable") and (schema.get("type") or schema.get(INT_OR_STRING)):
            expected = "integer,string" if schema.get(INT_OR_STRING) else schema["type"]
            errors.append(
                FieldError(
                    path, "Invalid", None, f'{where} in body must be of type {expected}: "null"'
                )
            )
        return
    if schema.get(INT_OR_STRING) and (isinstance(value, bool) or not isinstance(value, int | str)):
        errors.append(
            FieldError(
                path,
                "Invalid",
                _type_name(value),
                f'{where} in body must be of type integer,string: "{_type_name(value)}"',
            )
        )
        return
    kind = schema.get("type")
    if kind is not None and not _has_type(value, kind):
        errors.append(
            FieldError(
                path,
                "Invalid",
                _type_name(value),
                f'{where} in body must be of type {kind}: "{_type_name(value)}"',
            )
        )
        return
    _check_value(value, schema, path, errors)
    for sub in schema.get("allOf") or ():
        _validate(value, sub, path, errors, root=root)
    if schema.get("anyOf"):
        branches = []
        for sub in schema["anyOf"]:
            branch: list[FieldError] = []
            _validate(value, sub, path, branch, root=root)
            branches.append(branch)
        if all(branches):
            errors.append(
                FieldError(
                    path,
                    "Invalid",
                    value,
                    f"{where} in body must validate at least one schema (anyOf)",
                )
            )
            errors.extend(branches[0])
    if isinstance(value, Mapping):
        if schema.get(EMBEDDED) and value:
            for key in ("apiVersion", "kind"):
                if not value.get(key):
                    errors.append(
                        FieldError(_child(path, key), "Required", detail="must not be empty")
                    )
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for key in schema.get("required") or ():
            if key not in value:
                errors.append(FieldError(_child(path, key), "Required"))
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if root and key == "metadata":
                continue
            sub = properties.get(key)
            if sub is None and isinstance(extra, Mapping):
                sub = extra
            if sub is not None:
                _validate(item, sub, _child(path, key), errors, root=False)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _validate(item, schema["items"], f"{path}[{index}]", errors, root=False)


def _has_type(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        # JSON has numbers; the server's decoder makes 2.0 an integer.
        return not isinstance(value, bool) and (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        )
    if kind == "number":
        return not isinstance(value, bool) and isinstance(value, int | float)
    return True


def _check_value(
    value: Any, schema: Mapping[str, Any], path: str, errors: list[FieldError]
) -> None:
    where = path or "<root>"

    def bad(detail: str, shown: Any = value) -> None:
        errors.append(FieldError(path, "Invalid", shown, f"{where} in body {detail}"))

    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(json.dumps(v) for v in schema["enum"])
        errors.append(FieldError(path, "Unsupported", value, f"supported values: {supported}"))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema:
            if schema.get("exclusiveMinimum") is True and value <= schema["minimum"]:
                bad(f"should be greater than {schema['minimum']}")
            elif value < schema["minimum"]:
                bad(f"should be greater than or equal to {schema['minimum']}")
        if "maximum" in schema:
            if schema.get("exclusiveMaximum") is True and value >= schema["maximum"]:
                bad(f"should be less than {schema['maximum']}")
            elif value > schema["maximum"]:
                bad(f"should be less than or equal to {schema['maximum']}")
        if schema.get("multipleOf") and value % schema["multipleOf"]:
            bad(f"should be a multiple of {schema['multipleOf']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            bad(f"should be at least {schema['minLength']} chars long")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            bad(f"may not be longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            bad(f"should match '{schema['pattern']}'")
        fmt = schema.get("format")
        if fmt and not _format_ok(fmt, value):
            bad(f'must be of type {fmt}: "{value}"')
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            bad(f"should have at least {schema['minItems']} items", len(value))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            bad(f"may not have more than {schema['maxItems']} items", len(value))
    if isinstance(value, Mapping):
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            bad(f"should have at least {schema['minProperties']} properties", len(value))
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            bad(f"should have at most {schema['maxProperties']} properties", len(value))


def _format_ok(fmt: str, value: str) -> bool:
    """The string formats kube-openapi checks (numeric formats like int32 are not checked)."""
    if fmt == "date-time":
        if not _DATE_TIME.match(value):
            return False
        try:
            datetime.datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError:
            return False
        return True
    if fmt == "date":
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            return False
        return True
    if fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
        return True
    if fmt == "uuid":
        return bool(re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", value))
    return True


# --- metadata ----------------------------------------------------------------------------------


def metadata_errors(obj: Mapping[str, Any], *, plural: str) -> list[FieldError]:
    """What ``ValidateObjectMeta`` refuses in a root ``metadata``."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return [FieldError("metadata", "Required")]
    errors: list[FieldError] = []
    name = meta.get("name")
    if not name:
        errors.append(
            FieldError("metadata.name", "Required", detail="name or generateName is required")
        )
    elif not isinstance(name, str):
        errors.append(FieldError("metadata.name", "Invalid", name, "must be a string"))
    elif plural == "services":
        if len(name) > 63 or not _DNS_LABEL_1035.match(name):
            errors.append(
                FieldError(
                    "metadata.name",
                    "Invalid",
                    name,
                    "a DNS-1035 label must consist of lower case alphanumeric characters or "
                    "'-', start with an alphabetic character, and end with an alphanumeric "
                    "character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
                    "'[a-z]([-a-z0-9]*[a-z0-9])?')",
                )
            )
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        errors.append(
            FieldError(
                "metadata.name",
                "Invalid",
                name,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )
        )
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if values is None:
            continue
        if not isinstance(values, Mapping):
            errors.append(
                FieldError(f"metadata.{field}", "Invalid", values, "must be a map of strings")
            )
            continue
        for key, item in values.items():
            if not isinstance(item, str):
                errors.append(
                    FieldError(f"metadata.{field}", "Invalid", item, f"{key}: must be a string")
                )
            elif field == "labels" and (
                len(item) > 63
                or not re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", item)
            ):
                errors.append(
                    FieldError(
                        "metadata.labels",
                        "Invalid",
                        item,
                        "a valid label must be an empty string or consist of alphanumeric "
                        "characters, '-', '_' or '.', and must start and end with an "
                        "alphanumeric character",
                    )
                )
    return errors


# --- built-in kinds --------------------------------------------------------------------------

BUILTIN_VALIDATED = frozenset(
    {
        ("", "pods"),
        ("", "services"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("", "events"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("coordination.k8s.io", "leases"),
        ("apps", "deployments"),
    }
)
"""(group, plural) of the built-in kinds validated against the official schemas."""


@functools.cache
def _builtin_validator(kind: str, api_version: str) -> jsonschema.Draft202012Validator:
    """The strict official schema of one kind, built once per process (kubernetes-validate
    re-reads its definitions on every call)."""
    version = kubernetes_validate.utils.major_minor(kubernetes_validate.utils.latest_version())
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    folder = f"kubernetes-json-schema/v{version}.0-local-strict"
    schema = kubernetes_validate.utils.schema_contents(
        f"{folder}/{kind.lower()}-{group}.json", version
    )
    definitions = kubernetes_validate.utils.schema_contents(f"{folder}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _json_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out = f"{out}[{part}]" if isinstance(part, int) else _child(out, str(part))
    return out


def builtin_errors(obj: dict[str, Any], *, kind: str, api_version: str) -> list[FieldError]:
    """Drop fields the kind does not have (in place, as decoding into Go types does) and
    return what the official schema refuses in the rest (fields the schema requires in
    ``status`` excepted)."""
    validator = _builtin_validator(kind, api_version)
    errors: list[FieldError] = []
    for _ in range(10):  # unknown fields can hide others: prune and look again
        found = sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.path)))
        unknown = [e for e in found if e.validator == "additionalProperties"]
        if not unknown:
            break
        for exc in unknown:
            target = obj
            for part in exc.path:
                target = target[part]
            if isinstance(target, dict):
                allowed = exc.schema.get("properties") or {}
                for key in [k for k in target if k not in allowed]:
                    del target[key]
    for exc in validator.iter_errors(obj):
        path = _json_path(exc.path)
        if exc.validator == "required" and exc.path and exc.path[0] == "status":
            # The server decodes into Go types (a missing field is its zero value) and its
            # status validation does not ask for them: a kubelet's sparse status is fine.
            continue
        if exc.validator == "required":
            missing = re.match(r"'([^']*)' is a required property", exc.message)
            errors.append(
                FieldError(_child(path, missing.group(1)) if missing else path, "Required")
            )
        else:
            errors.append(FieldError(path or "<root>", "Invalid", exc.instance, exc.message))
    return errors


# --- pods ------------------------------------------------------------------------------------

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def pod_update_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """What ``ValidatePodUpdate`` refuses: a pod's spec changes only in a few fields."""
    old_spec: dict[str, Any] = copy.deepcopy(dict(old.get("spec") or {}))
    new_spec: dict[str, Any] = copy.deepcopy(dict(new.get("spec") or {}))
    errors: list[FieldError] = []
    # Images may change: compare the rest with the old images put back.
    for field in ("containers", "initContainers"):
        olds, news = old_spec.get(field) or [], new_spec.get(field) or []
        if len(olds) == len(news):
            for before, after in zip(olds, news, strict=True):
                if isinstance(before, dict) and isinstance(after, dict) and "image" in before:
                    after["image"] = before["image"]
    # activeDeadlineSeconds may be set, or lowered, never removed or raised.
    before_deadline = old_spec.pop("activeDeadlineSeconds", None)
    after_deadline = new_spec.pop("activeDeadlineSeconds", None)
    if before_deadline is not None and (after_deadline is None or after_deadline > before_deadline):
        errors.append(
            FieldError(
                "spec.activeDeadlineSeconds",
                "Invalid",
                after_deadline,
                "must be less than or equal to previous value",
            )
        )
    # Tolerations may only be added.
    before_tolerations = old_spec.pop("tolerations", None) or []
    after_tolerations = new_spec.pop("tolerations", None) or []
    if any(t not in after_tolerations for t in before_tolerations):
        errors.append(
            FieldError(
                "spec.tolerations",
                "Forbidden",
                detail="existing toleration can not be modified except its tolerationSeconds",
            )
        )
    # terminationGracePeriodSeconds: only from negative to 1.
    before_grace = old_spec.pop("terminationGracePeriodSeconds", None)
    after_grace = new_spec.pop("terminationGracePeriodSeconds", None)
    if before_grace != after_grace and not (
        isinstance(before_grace, int) and before_grace < 0 and after_grace == 1
    ):
        old_spec["terminationGracePeriodSeconds"] = before_grace
        new_spec["terminationGracePeriodSeconds"] = after_grace
    # nodeName is set by a binding, never by an update; scheduling gates may only go.
    gates_before = old_spec.pop("schedulingGates", None) or []
    gates_after = new_spec.pop("schedulingGates", None) or []
    if any(g not in gates_before for g in gates_after):
        errors.append(
            FieldError(
                "spec.schedulingGates",
                "Forbidden",
                detail="only deletion is allowed, but found new scheduling gate",
            )
        )
    if old_spec != new_spec:
        errors.append(FieldError("spec", "Forbidden", detail=POD_UPDATE_FORBIDDEN))
    return errors
