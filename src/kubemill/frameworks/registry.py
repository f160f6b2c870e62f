"""Which framework plans which job kind, and ``plan_for`` to dispatch on ``job.KIND``.

Adding an engine means adding its module and one entry in :data:`FRAMEWORKS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kubemill.api import Job
from kubemill.frameworks._common import PlanError
from kubemill.frameworks.plan import Framework, Network, Plan
from kubemill.frameworks.pytorch import PyTorch
from kubemill.frameworks.tensorflow import TensorFlow


class NoFrameworkError(PlanError, LookupError):
    """No framework is registered for a job's kind."""


def _registry(*frameworks: Framework) -> Mapping[str, Framework]:
    return MappingProxyType({f.kind: f for f in frameworks})


FRAMEWORKS: Mapping[str, Framework] = _registry(TensorFlow(), PyTorch())
"""Every framework, keyed by the job kind it plans (read-only)."""


def framework_for(kind: str) -> Framework:
    """The framework that plans ``kind``; :class:`NoFrameworkError` if there is none."""
    try:
        return FRAMEWORKS[kind]
    except KeyError:
        known = ", ".join(sorted(FRAMEWORKS))
        raise NoFrameworkError(
            f"no framework plans {kind or 'a job without a kind'!r}; kubemill runs {known}"
        ) from None


def plan_for(job: Job, network: Network) -> Plan:
    """Build the Plan of ``job`` with addresses from ``network``."""
    return framework_for(job.KIND).plan(job, network)
