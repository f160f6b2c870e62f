"""The TrainJob kind's API: the versions it loads from and its CRD."""

from __future__ import annotations

from kubemill.api.crd import INT_OR_STRING
from kubemill.api.kinds import KindApi
from kubemill.engines.trainer.api.runtime import API_VERSION
from kubemill.engines.trainer.api.spec import VOCABULARY
from kubemill.engines.trainer.api.trainjob import TrainJob

TRAINJOB = KindApi(
    model=TrainJob,
    plural="trainjobs",
    # kubemill's own (upstream's CRD has none): `kubemill get tj`, `kubectl get tj`.
    short_names=("tj",),
    upstream=(API_VERSION,),
    schema_overrides={
        # `numProcPerNode: 2` or `auto`: upstream's IntOrString, held as text by the model.
        "spec.trainer.numProcPerNode": {"type": None, INT_OR_STRING: True},
        # Upstream's condition names (Complete, ...), as the status is written.
        "status.conditions.*.type": {"enum": VOCABULARY.wire_types()},
    },
)
"""The TrainJob kind: ``kubemill.dev/v1``, and Kubeflow Trainer's group unchanged."""

__all__ = ["TRAINJOB"]
