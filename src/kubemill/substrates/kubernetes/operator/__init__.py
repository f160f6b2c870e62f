"""The kubemill operator for Kubernetes, built on kopf.

One idempotent, level-triggered reconcile per job (:mod:`.reconciler`), woken by kopf
events on the job and on the pods, services and PodGroups it owns (:mod:`.handlers`), with
kopf indexes as the cache; children are built by :mod:`kubemill.substrates.kubernetes.build`
and decisions taken by :func:`kubemill.core.reconcile`. Run it with :func:`run_operator` or
``python -m kubemill.substrates.kubernetes.operator``.

The names below load on first use: ``python -m`` imports this package before its
``__main__``, which must see kopf unimported (:func:`.process.without_kubernetes_client`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.substrates.kubernetes.operator.main import operate, run_operator
    from kubemill.substrates.kubernetes.operator.settings import (
        JobResource,
        OperatorSettings,
        SettingsError,
    )

__all__ = ["JobResource", "OperatorSettings", "SettingsError", "operate", "run_operator"]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.substrates.kubernetes.operator import main, settings

        for module in (main, settings):
            if hasattr(module, name):
                value = getattr(module, name)
                globals()[name] = value
                return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
