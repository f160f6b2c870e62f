"""Shared test helpers: Kubernetes schema validation and the job manifests to check.

``k8s_errors`` runs kubernetes-validate (the official OpenAPI schemas, strict) for the
oldest and newest Kubernetes versions we support; ``crd_validator`` turns a generated
CRD's structural schema into a JSON-schema validator that behaves like the API server
with strict field validation (unknown fields are errors, not silently pruned).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
K8S_VERSIONS = (
    "1.29",
    kubernetes_validate.utils.major_minor(kubernetes_validate.utils.latest_version()),
)
"""Oldest supported Kubernetes and the newest schema kubernetes-validate bundles."""

JOB_GROUPS = ("kubemill.dev/v1", "kubeflow.org/v1", "ray.io/v1")


@functools.cache
def _k8s_validator(version: str, kind: str, api_version: str) -> jsonschema.Draft202012Validator:
    """kubernetes-validate's strict schema for one kind, built once (it re-reads its
    definitions file on every call, which made these tests slow)."""
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    folder = f"kubernetes-json-schema/v{version}.0-local-strict"
    schema = kubernetes_validate.utils.schema_contents(
        f"{folder}/{kind.lower()}-{group}.json", version
    )
    definitions = kubernetes_validate.utils.schema_contents(f"{folder}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def k8s_errors(obj: Mapping[str, Any]) -> list[str]:
    """Problems kubernetes-validate --strict finds in ``obj`` for each supported version."""
    errors = []
    for version in K8S_VERSIONS:
        validator = _k8s_validator(version, obj["kind"], obj["apiVersion"])
        for exc in validator.iter_errors(dict(obj)):
            path = ".".join(str(p) for p in exc.path)
            errors.append(
                f"{version} {obj['kind']}/{obj['metadata'].get('name')}: {path}: {exc.message}"
            )
    return errors


def to_jsonschema(node: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD structural schema as plain JSON schema, unknown fields forbidden."""
    out: dict[str, Any] = {
        k: v
        for k, v in node.items()
        if k not in ("properties", "additionalProperties", "items") and not k.startswith("x-")
    }
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in node:
        out["properties"] = {k: to_jsonschema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if "additionalProperties" in node:
        out["additionalProperties"] = to_jsonschema(node["additionalProperties"])
    if "items" in node:
        out["items"] = to_jsonschema(node["items"])
    return out


def crd_validator(crd: Mapping[str, Any]) -> jsonschema.Draft202012Validator:
    """Validate objects of ``crd``'s kind as the API server would."""
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft202012Validator(to_jsonschema(schema))


def job_manifest_files() -> list[Path]:
    """Every YAML job manifest of the repository that should load (good tests, examples)."""
    found: list[Path] = []
    for folder in (ROOT / "tests" / "manifests" / "good", ROOT / "examples"):
        if folder.is_dir():
            found += sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml"))
    return found


def job_documents(path: Path) -> Iterator[dict[str, Any]]:
    """The job documents (current or upstream group) of a manifest file."""
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if isinstance(doc, dict) and doc.get("apiVersion") in JOB_GROUPS:
            yield doc


def rel(path: Path) -> str:
    """A short test id for a file."""
    return str(path.relative_to(ROOT))
