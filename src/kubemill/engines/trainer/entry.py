"""Kubeflow Trainer v2's registry record: a replica-set engine, run locally as it is planned,
whose operator may read training runtimes (get, list, watch: they are an administrator's,
never written by kubemill)."""

from kubemill.engines.base import Engine, OperatorGrant
from kubemill.engines.trainer.api.kind import TRAINJOB
from kubemill.engines.trainer.api.runtime import GROUP
from kubemill.engines.trainer.api.runtime_crds import RUNTIME_PLURALS
from kubemill.engines.trainer.framework import Trainer

_READ = ("get", "list", "watch")
_WHY = "a TrainJob's runtime, read where it is installed (never written)"

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
)

__all__ = ["ENGINE"]
