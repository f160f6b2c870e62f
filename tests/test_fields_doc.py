"""docs/fields.md is checked against the code: one row per model field, refusals real.

The page has one section per model (job metadata, TFJob spec, PyTorchJob spec, run
policy, replica spec, pod template, container). Walking each model's fields (and the
models nested in them that have no section of their own) gives the rows the section
must have: a field added to a model without a row, or a row left behind by a removed
field, fails here. Rows that say *refused* are checked by loading (or, for local-only
refusals, preparing a local launch of) a manifest that sets the field.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union

import pytest
from pydantic import BaseModel

from kubemill.api import (
    Container,
    FieldError,
    Job,
    ManifestError,
    ObjectMeta,
    PodTemplateSpec,
    ReplicaSpec,
    RunPolicy,
)
from kubemill.engines.jax.api import JAXJobSpec
from kubemill.engines.mars.api import MarsClusterSpec
from kubemill.engines.mpi.api import MPIJobSpec
from kubemill.engines.paddle.api import PaddleJobSpec
from kubemill.engines.pytorch.api import PyTorchJobSpec
from kubemill.engines.ray.api.raycluster import RayClusterSpec
from kubemill.engines.ray.api.rayjob import RayJobSpec
from kubemill.engines.spark.api.scheduled import ScheduledSparkApplicationSpec
from kubemill.engines.spark.api.spec import SparkApplicationSpec
from kubemill.engines.tensorflow.api import TFJobSpec
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.defaults import DEFAULT_RUNTIMES
from kubemill.engines.trainer.api.spec import TrainJobSpec
from kubemill.engines.xgboost.api import XGBoostJobSpec
from kubemill.frameworks import Endpoint
from kubemill.kinds import entry_for, load_one, plan_for
from kubemill.substrates.local.images import default_environment
from kubemill.substrates.local.launch import NotRunnableLocally, PodContext, prepare

DOC = Path(__file__).parents[1] / "docs" / "fields.md"

SECTIONS: dict[str, type[BaseModel]] = {
    "Job metadata": ObjectMeta,
    "TFJob": TFJobSpec,
    "PyTorchJob": PyTorchJobSpec,
    "MPIJob": MPIJobSpec,
    "SparkApplication": SparkApplicationSpec,
    "MarsCluster": MarsClusterSpec,
    "ScheduledSparkApplication": ScheduledSparkApplicationSpec,
    "TrainJob": TrainJobSpec,
    "JAXJob": JAXJobSpec,
    "XGBoostJob": XGBoostJobSpec,
    "PaddleJob": PaddleJobSpec,
    "RayCluster": RayClusterSpec,
    "RayJob": RayJobSpec,
    "Run policy": RunPolicy,
    "Replica spec": ReplicaSpec,
    "Pod template": PodTemplateSpec,
    "Container": Container,
}
KUBERNETES_WORDS = ("honoured", "passed through", "refused", "not yet")
"""``not yet``: accepted and not acted on yet (SparkApplication, whose engine is being built)."""
LOCAL_WORDS = ("honoured", "ignored", "refused", "not run")
"""``not run``: the local substrate does not run the section's kind at all."""


@typing.no_type_check
def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model inside ``annotation`` (optional, list of) and ``"[]"`` for a list."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _nested_model(arg)
            if found[0] is not None:
                return found
        return None, ""
    if typing.get_origin(annotation) is list:
        model, suffix = _nested_model(typing.get_args(annotation)[0])
        return model, "[]" + suffix if model is not None else ""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    return None, ""


def model_fields(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every field's wire path below ``model``; models with their own section stop here."""
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        yield path
        nested, suffix = _nested_model(info.annotation)
        if nested is not None and nested not in SECTIONS.values():
            yield from model_fields(nested, f"{path}{suffix}.")


_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \|")


def doc_rows() -> dict[str, dict[str, tuple[str, str]]]:
    """Section title -> field path -> (Kubernetes cell, local cell)."""
    sections: dict[str, dict[str, tuple[str, str]]] = {}
    current: dict[str, tuple[str, str]] | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), {})
            continue
        match = _ROW.match(line)
        if match and current is not None:
            path = match[1]
            assert path not in current, f"{path} has two rows"
            current[path] = (match[2].strip(), match[3].strip())
    return sections


def test_the_page_has_a_section_per_model() -> None:
    assert set(doc_rows()) == set(SECTIONS)


@pytest.mark.parametrize("section", SECTIONS)
def test_every_field_has_exactly_one_row(section: str) -> None:
    rows = doc_rows()[section]
    fields = list(model_fields(SECTIONS[section]))
    assert len(fields) == len(set(fields))
    assert sorted(set(fields) - set(rows)) == [], "fields without a row in docs/fields.md"
    assert sorted(set(rows) - set(fields)) == [], "rows for fields that do not exist"


@pytest.mark.parametrize("section", SECTIONS)
def test_every_row_uses_the_legend(section: str) -> None:
    for path, (kubernetes, local) in doc_rows()[section].items():
        assert kubernetes.startswith(KUBERNETES_WORDS), f"{path}: {kubernetes!r}"
        assert local.startswith(LOCAL_WORDS), f"{path}: {local!r}"
        if kubernetes == "refused":
            # Refused by the api: no substrate can run it.
            assert local == "refused", path


@pytest.mark.parametrize("section", SECTIONS)
def test_not_run_locally_means_the_kind_does_not_run_there(section: str) -> None:
    kind, _root = SECTION_ROOT.get(section, (section, "spec"))
    runs = entry_for(kind).local.runs
    for path, (kubernetes, local) in doc_rows()[section].items():
        if kubernetes == "refused":
            continue
        assert (local == "not run") is not runs, f"{section}: {path}: {local!r}"


def test_the_walk_reaches_nested_fields() -> None:
    # The checks above are only as good as the walk: it must descend into nested models.
    fields = set(model_fields(PyTorchJobSpec)) | set(model_fields(Container))
    assert {"elasticPolicy.rdzvConf[].key", "env[].valueFrom.fieldRef.fieldPath"} <= fields
    assert "runPolicy.backoffLimit" not in fields  # Run policy has its own section


# --- refused rows are refused --------------------------------------------------------------


def steps_runtime() -> dict[str, Any]:
    """Upstream's torch runtime with both initializer steps added (run beside the trainer,
    as no default runtime has them without ``dependsOn``), so every TrainJob field has a
    container to go to."""
    runtime = copy.deepcopy(DEFAULT_RUNTIMES[0])
    runtime["metadata"]["name"] = "fields-steps"
    for step in ("dataset-initializer", "model-initializer"):
        container = {"name": step, "image": "local", "command": ["true"]}
        runtime["spec"]["template"]["spec"]["replicatedJobs"].append(
            {
                "name": step,
                "template": {"spec": {"template": {"spec": {"containers": [container]}}}},
            }
        )
    return runtime


@pytest.fixture(autouse=True, scope="module")
def _steps_runtime() -> Iterator[None]:
    """The TrainJob rows' runtime, known while this module's tests run."""
    added = runtimes.add(steps_runtime())
    yield
    runtimes.remove(added)


def base_manifest(kind: str) -> dict[str, Any]:
    if kind == "TrainJob":
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": kind,
            "metadata": {"name": "fields"},
            "spec": {
                "runtimeRef": {"name": "fields-steps"},
                "trainer": {"image": "local", "command": ["true"]},
                "initializer": {"dataset": {}, "model": {}},
            },
        }
    if kind == "SparkApplication":
        return {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": kind,
            "metadata": {"name": "fields"},
            "spec": {
                "type": "Python",
                "sparkVersion": "4.0.0",
                "image": "spark:4.0.0",
                "mainApplicationFile": "local:///opt/spark/app.py",
            },
        }
    if kind == "RayCluster":
        template = {"spec": {"containers": [{"name": "ray", "image": "local"}]}}
        return {
            "apiVersion": "ray.io/v1",
            "kind": kind,
            "metadata": {"name": "fields"},
            "spec": {
                "headGroupSpec": {"template": copy.deepcopy(template)},
                "workerGroupSpecs": [{"groupName": "workers", "template": template}],
            },
        }
    if kind == "RayJob":
        template = {"spec": {"containers": [{"name": "ray", "image": "local"}]}}
        return {
            "apiVersion": "ray.io/v1",
            "kind": kind,
            "metadata": {"name": "fields"},
            "spec": {
                "entrypoint": "python -c 'print(1)'",
                "rayClusterSpec": {"headGroupSpec": {"template": template}},
            },
        }
    model = entry_for(kind).api.model
    container, field = model.DEFAULT_CONTAINER, model.REPLICA_SPECS_FIELD
    pod = {"containers": [{"name": container, "image": "local", "command": ["true"]}]}
    types_ = ("Worker",) if kind in ("TFJob", "JAXJob") else ("Master", "Worker")
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "fields"},
        "spec": {field: {t: {"template": {"spec": copy.deepcopy(pod)}} for t in types_}},
    }


SECTION_ROOT: dict[str, tuple[str, str]] = {
    "Job metadata": ("TFJob", "metadata"),
    "TFJob": ("TFJob", "spec"),
    "PyTorchJob": ("PyTorchJob", "spec"),
    "PaddleJob": ("PaddleJob", "spec"),
    "SparkApplication": ("SparkApplication", "spec"),
    "RayCluster": ("RayCluster", "spec"),
    "RayJob": ("RayJob", "spec"),
    "TrainJob": ("TrainJob", "spec"),
    "Run policy": ("TFJob", "spec.runPolicy"),
    "Replica spec": ("TFJob", "spec.tfReplicaSpecs.Worker"),
    "Pod template": ("TFJob", "spec.tfReplicaSpecs.Worker.template"),
    "Container": ("TFJob", "spec.tfReplicaSpecs.Worker.template.spec.containers[0]"),
}
"""Where a section's fields sit in a manifest of which kind."""

SAMPLES: dict[tuple[str, str], Any] = {
    ("TFJob", "enableDynamicWorker"): True,
    ("PyTorchJob", "elasticPolicy.metrics"): [],
    ("PaddleJob", "elasticPolicy"): {"minReplicas": 1, "maxReplicas": 2},
    ("Run policy", "managedBy"): "kueue.x-k8s.io/multikueue",
    ("Pod template", "metadata.name"): "mine",
    ("Container", "envFrom"): [{"configMapRef": {"name": "settings"}}],
    ("Container", "env[].valueFrom.configMapKeyRef"): {"name": "settings", "key": "k"},
    ("Container", "env[].valueFrom.secretKeyRef"): {"name": "secret", "key": "k"},
    ("Container", "env[].valueFrom.resourceFieldRef"): {"resource": "limits.cpu"},
    **{
        ("TrainJob", f"runtimePatches[].trainingRuntimeSpec.template.{at}{field}"): value
        for at in ("", "spec.replicatedJobs[].template.")
        for field, value in (
            ("metadata", {"labels": {"a": "b"}}),
            ("metadata.labels", {"a": "b"}),
            ("metadata.annotations", {"a": "b"}),
        )
    },
    **{
        ("TrainJob", f"{owner}.{field}"): value
        for owner in ("trainer", "initializer.dataset", "initializer.model")
        for field, value in (
            ("env[].valueFrom.configMapKeyRef", {"name": "settings", "key": "k"}),
            ("env[].valueFrom.secretKeyRef", {"name": "secret", "key": "k"}),
            ("env[].valueFrom.resourceFieldRef", {"resource": "limits.cpu"}),
        )
    },
    **{
        ("TrainJob", f"initializer.{which}.{field}"): value
        for which in ("dataset", "model")
        for field, value in (("secretRef", {"name": "creds"}), ("secretRef.name", "creds"))
    },
    ("RayCluster", "headGroupSpec.headService"): {"metadata": {"name": "mine"}},
    ("RayCluster", "headGroupSpec.enableIngress"): True,
    ("RayCluster", "workerGroupSpecs[].idleTimeoutSeconds"): 60,
    ("RayCluster", "workerGroupSpecs[].scaleStrategy.workersToDelete"): ["fields-workers-0"],
    ("RayCluster", "workerGroupSpecs[].suspend"): True,
    ("RayCluster", "enableInTreeAutoscaling"): True,
    ("RayCluster", "autoscalerOptions"): {"upscalingMode": "Default"},
    ("RayCluster", "headServiceAnnotations"): {"a": "b"},
    ("RayCluster", "gcsFaultToleranceOptions"): {"redisAddress": "redis:6379"},
    ("RayCluster", "authOptions.secretName"): "my-ray-token",
    ("RayCluster", "authOptions.enableK8sTokenAuth"): True,
    ("RayJob", "schedule"): "*/5 * * * *",
    ("RayJob", "deletionStrategy"): {"onSuccess": {"policy": "DeleteCluster"}},
    ("SparkApplication", "driver.podName"): "my-driver",
    ("SparkApplication", "failureRetries"): 3,
    ("SparkApplication", "retryInterval"): 10,
    ("SparkApplication", "monitoring"): {"exposeDriverMetrics": True},
    ("SparkApplication", "sparkUIOptions.ingressAnnotations"): {"a": "b"},
    ("SparkApplication", "sparkUIOptions.ingressTLS"): [{"hosts": ["ui.example"]}],
    ("SparkApplication", "driverIngressOptions"): [{"servicePort": 80}],
    **{
        ("SparkApplication", f"{role}.{field}"): value
        for role in ("driver", "executor")
        for field, value in (
            ("envFrom", [{"configMapRef": {"name": "settings"}}]),
            ("envSecretKeyRefs", {"TOKEN": {"name": "secret", "key": "k"}}),
            ("env[].valueFrom.configMapKeyRef", {"name": "settings", "key": "k"}),
            ("env[].valueFrom.secretKeyRef", {"name": "secret", "key": "k"}),
            ("env[].valueFrom.resourceFieldRef", {"resource": "limits.cpu"}),
        )
    },
}
"""A value that sets each refused field (a row marked refused without one fails)."""


def set_at(manifest: dict[str, Any], path: str, value: Any) -> str:
    """Set ``value`` at a dotted path (``a[0].b``; ``env[]`` makes a one-item list);
    returns the concrete path written."""
    node: Any = manifest
    parts = path.split(".")
    written: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        name, _, index = part.partition("[")
        if index == "]":
            node = node.setdefault(name, [{"name": "VAR"}])[0]
            written.append(f"{name}[0]")
        elif index:
            node = node[name][int(index[:-1])]
            written.append(part)
        elif last:
            node[name] = value
            written.append(name)
        else:
            node = node.setdefault(name, {})
            written.append(name)
    return ".".join(written)


def refused_rows() -> list[Any]:
    out = []
    for section, rows in doc_rows().items():
        for path, (kubernetes, local) in rows.items():
            if "refused" in (kubernetes, local):
                out.append(pytest.param(section, path, kubernetes, id=f"{section}:{path}"))
    return out


class _Loopback:
    """A Network: every replica on 127.0.0.1, at its container port (nothing is bound)."""

    def endpoint(
        self, replica_type: str, index: int, container_port: int, *, qualified: bool = True
    ) -> Endpoint:
        return Endpoint("127.0.0.1", container_port)

    def replica_host(self, replica_type: str, index: int) -> str:
        return "127.0.0.1"

    def files_path(self, file_set: str, mount_path: str) -> str:
        return mount_path

    def host_name(self, replica_type: str, index: int, *, subdomain: str = "") -> str:
        return f"{replica_type.lower()}-{index}"


def local_errors(job: Job, base_dir: Path) -> list[FieldError]:
    plan = plan_for(job, _Loopback())
    ctx = PodContext(job_uid="uid", namespace="default", base_dir=str(base_dir), log_dir="logs")
    with pytest.raises(NotRunnableLocally) as caught:
        prepare(job, plan, ctx=ctx, environments={"local": default_environment()})
    return list(caught.value.errors)


@pytest.mark.parametrize(("section", "path", "kubernetes"), refused_rows())
def test_a_refused_row_is_refused_at_its_path(
    section: str, path: str, kubernetes: str, tmp_path: Path
) -> None:
    assert (section, path) in SAMPLES, f"give SAMPLES a value for {section}: {path}"
    kind, root = SECTION_ROOT[section]
    manifest = base_manifest(kind)
    written = set_at(manifest, f"{root}.{path}", SAMPLES[section, path])
    if kubernetes == "refused":
        with pytest.raises(ManifestError) as caught:
            load_one(manifest)
        errors = list(caught.value.errors)
    else:
        # Only the local substrate refuses it: the manifest loads, the launch does not.
        errors = local_errors(load_one(manifest), tmp_path)
    assert any(e.path.startswith(written) for e in errors), (written, [str(e) for e in errors])


def test_the_samples_match_refused_rows() -> None:
    marked = {(v.values[0], v.values[1]) for v in refused_rows()}
    assert set(SAMPLES) == marked
