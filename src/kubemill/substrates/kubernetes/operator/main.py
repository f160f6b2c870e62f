"""Running the operator: :func:`run_operator` blocks until the process is told to stop."""

from __future__ import annotations

import asyncio
import logging

import kopf

from kubemill.substrates.kubernetes.operator.handlers import build_registry, configure
from kubemill.substrates.kubernetes.operator.process import settle
from kubemill.substrates.kubernetes.operator.runtime import Runtime
from kubemill.substrates.kubernetes.operator.settings import OperatorSettings
from kubemill.substrates.plugins import load_plugins

logger = logging.getLogger("kubemill.operator")


def run_operator(settings: OperatorSettings) -> None:
    """Run the kubemill operator with ``settings`` until SIGTERM/SIGINT (or a lost lease).

    Engines named in ``KUBEMILL_ENGINES`` are registered first, so their kinds are served.
    """
    load_plugins()
    settle()  # after the imports
    asyncio.run(operate(settings))


async def operate(settings: OperatorSettings) -> None:
    """The operator as a coroutine, for embedding in an event loop of one's own."""
    runtime = Runtime(settings)
    runtime.stop_flag = asyncio.Event()
    kopf_settings = kopf.OperatorSettings()
    configure(kopf_settings, runtime)
    liveness = None
    if settings.health_port:
        liveness = f"http://{settings.bind_address}:{settings.health_port}/healthz"
    served = ", ".join(str(r) for r in settings.job_resources())
    where = "all namespaces" if settings.clusterwide else ", ".join(settings.namespaces or [])
    logger.info("kubemill operator %s: serving %s in %s", settings.identity, served, where)
    await kopf.operator(
        registry=build_registry(runtime),
        settings=kopf_settings,
        standalone=True,
        clusterwide=settings.clusterwide,
        namespaces=[] if settings.clusterwide else list(settings.namespaces or []),
        liveness_endpoint=liveness,
        stop_flag=runtime.stop_flag,
    )
