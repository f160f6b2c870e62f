"""PyTorch's registry record: a replica-set engine with no grants beyond pods and services,
run locally as it is planned."""

from kubemill.engines.base import Engine
from kubemill.engines.pytorch.api import PYTORCHJOB
from kubemill.engines.pytorch.framework import PyTorch

ENGINE = Engine(PYTORCHJOB, PyTorch(), "PyTorch: Master and Workers, elastic torchrun (PET_*)")

__all__ = ["ENGINE"]
