"""Kubeflow Trainer v2's registry record: a replica-set engine with no grants beyond pods
and services, run locally as it is planned."""

from kubemill.engines.base import Engine
from kubemill.engines.trainer.api.kind import TRAINJOB
from kubemill.engines.trainer.framework import Trainer

ENGINE = Engine(
    TRAINJOB,
    Trainer(),
    "Kubeflow Trainer v2: a training runtime's steps, torchrun's PET_* on the trainer's nodes",
)

__all__ = ["ENGINE"]
