"""The kubemill operator for Kubernetes, built on kopf.

One idempotent, level-triggered reconcile per job (:mod:`.reconciler`), woken by kopf
events on the job and on the pods, services and PodGroups it owns (:mod:`.handlers`), with
kopf indexes as the cache; children are built by :mod:`kubemill.substrates.kubernetes.build`
and decisions taken by :func:`kubemill.core.reconcile`. Run it with :func:`run_operator` or
``python -m kubemill.substrates.kubernetes.operator``.
"""

from kubemill.substrates.kubernetes.operator.main import operate, run_operator
from kubemill.substrates.kubernetes.operator.settings import (
    JobResource,
    OperatorSettings,
    SettingsError,
)

__all__ = ["JobResource", "OperatorSettings", "SettingsError", "operate", "run_operator"]
