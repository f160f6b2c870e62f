"""PaddlePaddle's registry record: a replica-set engine with no grants beyond pods and
services; locally each replica gets its own address and log directory
(:mod:`kubemill.engines.paddle.local`)."""

from kubemill.engines.base import Engine, LocalSupport
from kubemill.engines.paddle.api import PADDLEJOB
from kubemill.engines.paddle.framework import Paddle
from kubemill.engines.paddle.local import local_plan

ENGINE = Engine(
    PADDLEJOB,
    Paddle(),
    "PaddlePaddle: collective Workers, or Master and Workers (PADDLE_*)",
    local=LocalSupport(replan=local_plan),
)

__all__ = ["ENGINE"]
