"""PaddlePaddle's registry record: a replica-set engine with no grants beyond pods and
services, run locally as it is planned."""

from kubemill.engines.base import Engine
from kubemill.engines.paddle.api import PADDLEJOB
from kubemill.engines.paddle.framework import Paddle

ENGINE = Engine(
    PADDLEJOB, Paddle(), "PaddlePaddle: collective Workers, or Master and Workers (PADDLE_*)"
)

__all__ = ["ENGINE"]
