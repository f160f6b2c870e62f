"""Kubeflow Trainer v2's registry record: a replica-set engine with no grants beyond pods
and services, run locally as it is planned."""

from kubemill.engines.base import Engine
from kubemill.engines.trainer.api.kind import TRAINJOB
from kubemill.engines.trainer.framework import Trainer

ENGINE = Engine(
    TRAINJOB,
    Trainer(),
    "Kubeflow Trainer v2: a training runtime's steps; torch (PET_*) or xgboost (DMLC_*) nodes",
)

__all__ = ["ENGINE"]
