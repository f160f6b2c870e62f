"""TensorFlow's registry record: a replica-set engine with no grants beyond pods and services,
run locally as it is planned."""

from kubemill.engines.base import Engine
from kubemill.engines.tensorflow.api import TFJOB
from kubemill.engines.tensorflow.framework import TensorFlow

ENGINE = Engine(TFJOB, TensorFlow(), "TensorFlow: Chief/Master, PS, Worker, Evaluator (TF_CONFIG)")

__all__ = ["ENGINE"]
