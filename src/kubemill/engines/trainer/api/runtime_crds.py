"""The CustomResourceDefinitions of Kubeflow Trainer's runtimes, ``TrainingRuntime``
(namespaced) and ``ClusterTrainingRuntime`` (cluster-wide), in upstream's group and version
(``trainer.kubeflow.org/v1alpha1``), and the default runtimes as the objects a cluster
holds, for an install that asks for them.

The schemas are generated from the runtime models (:mod:`.runtime`), as every kubemill CRD
is, so a runtime the API server accepts is one kubemill loads (each default runtime is
checked against them in the tests). Runtimes have no status: an administrator writes them
and nothing reconciles them; the operator only reads them.
"""

from __future__ import annotations

from typing import Any

from kubemill.api.crd import CRD_API_VERSION, INT_OR_STRING, model_openapi_schema
from kubemill.engines.trainer.api.defaults import DEFAULT_RUNTIMES
from kubemill.engines.trainer.api.runtime import (
    API_VERSION,
    CLUSTER_TRAINING_RUNTIME,
    GROUP,
    ClusterTrainingRuntime,
    TrainingRuntime,
)

VERSION = API_VERSION.partition("/")[2]
RUNTIME_PLURALS = {
    TrainingRuntime.KIND: "trainingruntimes",
    CLUSTER_TRAINING_RUNTIME: "clustertrainingruntimes",
}
"""Each runtime kind's resource name."""
_OVERRIDES = {
    # `numProcPerNode: 2` or `auto`: upstream's IntOrString, held as text by the model.
    "spec.mlPolicy.torch.numProcPerNode": {"type": None, INT_OR_STRING: True},
}


def runtime_crd(model: type[TrainingRuntime]) -> dict[str, Any]:
    """The ``CustomResourceDefinition`` of one runtime kind."""
    kind = model.KIND
    plural = RUNTIME_PLURALS[kind]
    cluster = kind == CLUSTER_TRAINING_RUNTIME
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "kubemill"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Cluster" if cluster else "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": model_openapi_schema(
                            model, kind=kind, api_version=API_VERSION, overrides=_OVERRIDES
                        )
                    },
                    "additionalPrinterColumns": [
                        {
                            "name": "Age",
                            "type": "date",
                            "jsonPath": ".metadata.creationTimestamp",
                        }
                    ],
                }
            ],
        },
    }


def runtime_crds() -> list[dict[str, Any]]:
    """Both runtime kinds' CRDs: the namespaced one, then the cluster-wide one."""
    return [runtime_crd(TrainingRuntime), runtime_crd(ClusterTrainingRuntime)]


def default_runtime_objects() -> list[dict[str, Any]]:
    """The default ClusterTrainingRuntimes (:mod:`.defaults`) as objects to apply, labelled
    as kubemill's."""
    out = []
    for doc in DEFAULT_RUNTIMES:
        metadata = dict(doc["metadata"])
        metadata["labels"] = {**metadata.get("labels", {}), "app.kubernetes.io/part-of": "kubemill"}
        out.append({**doc, "metadata": metadata})
    return out


__all__ = ["RUNTIME_PLURALS", "default_runtime_objects", "runtime_crd", "runtime_crds"]
