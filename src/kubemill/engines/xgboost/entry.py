"""XGBoost's registry record: a replica-set engine with no grants beyond pods and services,
run locally as it is planned (the tracker's port is a loopback port the local network
reserves)."""

from kubemill.engines.base import Engine
from kubemill.engines.xgboost.api import XGBOOSTJOB
from kubemill.engines.xgboost.framework import XGBoost

ENGINE = Engine(
    XGBOOSTJOB, XGBoost(), "XGBoost: Master (the collective tracker) and Workers (MASTER_ADDR)"
)

__all__ = ["ENGINE"]
