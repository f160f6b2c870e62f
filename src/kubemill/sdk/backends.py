"""Which :class:`~kubemill.substrates.base.Backend` serves which substrate name.

A small registry of factories so a substrate plugs in without touching the client:
``register_backend("kubernetes", factory)``. Factories import their substrate lazily,
so ``import kubemill.sdk`` stays cheap and the CLI starts fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubemill.substrates.base import Backend, SubstrateError
from kubemill.substrates.plugins import load_plugins

BackendFactory = Callable[..., Backend]
"""Builds a backend from the client's keyword options (``state_dir=...``, ...)."""

_LOCAL_OPTIONS = ("state_dir", "config_path", "supervisor_options", "exclusive")


def _local(**options: Any) -> Backend:
    unknown = sorted(k for k in options if k not in _LOCAL_OPTIONS)
    if unknown:
        raise SubstrateError(
            f"option(s) {', '.join(unknown)} do not apply to the local substrate"
            f" (it takes {', '.join(_LOCAL_OPTIONS)})"
        )
    from kubemill.substrates.local import LocalBackend

    return LocalBackend(**options)


_KUBERNETES_OPTIONS = (
    "kubeconfig",
    "context",
    "namespace",
    "operator_timeout",
    "operator_namespace",
    "poll_interval",
    "api_client",
)


def _kubernetes(**options: Any) -> Backend:
    unknown = sorted(k for k in options if k not in _KUBERNETES_OPTIONS)
    if unknown:
        raise SubstrateError(
            f"option(s) {', '.join(unknown)} do not apply to the kubernetes substrate"
            f" (it takes {', '.join(_KUBERNETES_OPTIONS)})"
        )
    from kubemill.substrates.kubernetes.client import KubernetesBackend

    return KubernetesBackend(**options)


BACKENDS: dict[str, BackendFactory] = {"local": _local, "kubernetes": _kubernetes}
"""Substrate name -> factory."""


def register_backend(name: str, factory: BackendFactory) -> None:
    """Serve substrate ``name`` with ``factory`` (replaces an earlier registration)."""
    BACKENDS[name] = factory


def backend_for(substrate: str, **options: Any) -> Backend:
    """The backend of ``substrate``, built with ``options`` (``None`` values are dropped).

    Engines named in ``KUBEMILL_ENGINES`` are registered first (see
    :mod:`kubemill.substrates.plugins`).
    """
    load_plugins()
    factory = BACKENDS.get(substrate)
    if factory is None:
        raise SubstrateError(
            f"unknown substrate {substrate!r}; choose one of {', '.join(sorted(BACKENDS))}"
        )
    return factory(**{k: v for k, v in options.items() if v is not None})
