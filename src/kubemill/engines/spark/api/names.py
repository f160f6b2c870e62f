"""Spark's fixed names and sizes, as plain values: no models.

The SparkApplication models (:mod:`kubemill.engines.spark.api.application` and its spec, pods and
validation modules) import them from here. They live apart so that ``kubemill spark-submit``'s fast
path (:mod:`kubemill.cli.spark_fast`), which builds Spark's own cluster-mode objects from
plain data, imports them without pydantic.
"""

from __future__ import annotations

import re

APPLICATION_KIND = "SparkApplication"
"""The kind a submission makes (``--dry-run``, ``--operator``, a local master), by name."""
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
"""The container names Spark's own cluster mode gives the driver and executor pods."""

MIN_MEMORY_OVERHEAD_MIB = 384
"""Spark's floor for a pod's memory overhead."""
JVM_OVERHEAD_FACTOR = 0.1
NON_JVM_OVERHEAD_FACTOR = 0.4
"""Spark's overhead factors: 0.1 of the heap for JVM applications, 0.4 for Python and R."""

UI_SERVICE_SUFFIX = "-ui-svc"
"""The Spark UI service is ``<app>-ui-svc`` (upstream's name)."""
MAX_NAME = 63

SPARK_MEMORY = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)
"""A Spark memory size: a number, an optional unit, an optional ``b``."""
_MIB_PER_UNIT = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0**2, "p": 1024.0**3}


def spark_memory_mib(value: str) -> float:
    """A Spark memory size (``512m``, ``2g``, ``1024``: MiB without a unit) in MiB.

    Raises ValueError for text Spark would not read as a size.
    """
    match = SPARK_MEMORY.match(value)
    if match is None:
        raise ValueError(value)
    return int(match.group(1)) * _MIB_PER_UNIT[match.group(2).lower()]


__all__ = [
    "DRIVER_CONTAINER",
    "EXECUTOR_CONTAINER",
    "JVM_OVERHEAD_FACTOR",
    "MAX_NAME",
    "MIN_MEMORY_OVERHEAD_MIB",
    "NON_JVM_OVERHEAD_FACTOR",
    "SPARK_MEMORY",
    "UI_SERVICE_SUFFIX",
    "spark_memory_mib",
]
