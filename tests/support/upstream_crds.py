"""The upstream CRDs of kubemill's kinds as their own installs leave them (Kubeflow's
``kubeflow.org/v1`` and the others each kind lists in ``upstream_groups``), for the tests
that serve the upstream groups, on the test API server and on the real one."""

from __future__ import annotations

import copy
from typing import Any

from kubemill.api.crd import build_crd
from kubemill.kinds import entry_for

KUBEFLOW_REPLICA_STATUS: dict[str, Any] = {
    "description": "ReplicaStatus represents the current observed state of the replica.",
    "type": "object",
    "properties": {
        "active": {"type": "integer", "format": "int32"},
        "succeeded": {"type": "integer", "format": "int32"},
        "failed": {"type": "integer", "format": "int32"},
        "labelSelector": {
            "type": "object",
            "x-kubernetes-map-type": "atomic",
            "properties": {
                "matchExpressions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["key", "operator"],
                        "properties": {
                            "key": {"type": "string"},
                            "operator": {"type": "string"},
                            "values": {"type": "array", "items": {"type": "string"}},
                        },
                    },
                },
                "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "selector": {"type": "string"},
    },
}
"""Kubeflow's published ``ReplicaStatus`` (kubeflow.org/v1, training-operator's CRDs in
manifests/base/crds): no ``restarts``, no ``retiredRestarts``; a real server prunes them."""


API_APPROVALS = {"sparkoperator.k8s.io": "https://github.com/kubeflow/spark-operator/pull/1298"}
"""The ``api-approved.kubernetes.io`` annotation each upstream project in a protected group
puts on its CRDs (the spark-operator's names its API review)."""


def upstream_crd(kind: str, group: str, version: str) -> dict[str, Any]:
    """The upstream CRD of ``kind`` as its own install leaves it: the spec as kubemill's;
    for ``kubeflow.org``, the status with Kubeflow's own ReplicaStatus fields."""
    crd = build_crd(entry_for(kind).api, group=group, version=version)
    if group == "kubeflow.org":
        for served in crd["spec"]["versions"]:
            status = served["schema"]["openAPIV3Schema"]["properties"]["status"]
            status["properties"]["replicaStatuses"]["additionalProperties"] = copy.deepcopy(
                KUBEFLOW_REPLICA_STATUS
            )
    if group in API_APPROVALS:
        # A *.k8s.io group is protected: kube-apiserver refuses its CRDs without this.
        crd["metadata"].setdefault("annotations", {})["api-approved.kubernetes.io"] = API_APPROVALS[
            group
        ]
    return crd


def kubeflow_crd(kind: str) -> dict[str, Any]:
    """The upstream ``kubeflow.org/v1`` CRD of ``kind`` as a Kubeflow install leaves it."""
    return upstream_crd(kind, "kubeflow.org", "v1")
