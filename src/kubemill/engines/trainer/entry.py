"""Kubeflow Trainer v2's registry record: a replica-set engine, run locally as it is planned,
whose operator may read training runtimes (get, list, watch: they are an administrator's,
never written by kubemill), and whose runtimes an install adds when asked (``--runtimes``)."""

from kubemill.engines.base import Engine, InstallExtra, OperatorGrant
from kubemill.engines.trainer.api.kind import TRAINJOB
from kubemill.engines.trainer.api.runtime import GROUP
from kubemill.engines.trainer.api.runtime_crds import (
    RUNTIME_PLURALS,
    default_runtime_objects,
    runtime_crds,
)
from kubemill.engines.trainer.framework import Trainer

_READ = ("get", "list", "watch")
_WHY = "a TrainJob's runtime, read where it is installed (never written)"

RUNTIMES = InstallExtra(
    "runtimes",
    "Also install Kubeflow Trainer's runtime CRDs and its default ClusterTrainingRuntimes.",
    runtime_crds,
    default_runtime_objects,
    {kind: (plural, kind != "ClusterTrainingRuntime") for kind, plural in RUNTIME_PLURALS.items()},
)
"""``kubemill install --runtimes``: the runtimes' CRDs, then the default runtimes."""

ENGINE = Engine(
    TRAINJOB,
    Trainer(),
    "Kubeflow Trainer v2: a training runtime's steps; torch (PET_*) or xgboost (DMLC_*) nodes",
    grants=(
        OperatorGrant((GROUP,), (RUNTIME_PLURALS["TrainingRuntime"],), _READ, _WHY),
        OperatorGrant(
            (GROUP,),
            (RUNTIME_PLURALS["ClusterTrainingRuntime"],),
            _READ,
            _WHY,
            cluster_scoped=True,
        ),
    ),
    extras=(RUNTIMES,),
)

__all__ = ["ENGINE", "RUNTIMES"]
