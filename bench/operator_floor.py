"""The floor under the operator's cost: kopf alone, with handlers that do nothing, watching
what the operator watches with the operator's kopf settings.

Not run by hand: ``bench/operator_throughput.py`` runs it beside the operator in the same
run (``--no-floor`` to skip), so that both see the same events, and prints its CPU and
resident memory next to the operator's: what is left above it is kubemill's. Its argument
is a JSON object (the bench builds it from the operator's own modules)::

    python bench/operator_floor.py '{"health": PORT, "idle_timeout": S, "gc_young": N,
        "resources": [[GROUP, VERSION, PLURAL, LABEL_SELECTOR_OR_NULL], ...]}'

Each resource gets an index that keeps nothing and an ``on.event`` handler that does
nothing, both coroutines (as the operator's: no hop to kopf's thread pool); kopf logs in
with the kubeconfig in ``$KUBECONFIG``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
from typing import Any

# As the operator's entry does: kopf imports the kubernetes package's models when it can.
sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]

import kopf  # noqa: E402


class _NoDiffBase(kopf.DiffBaseStorage):
    """No diff base, as the operator keeps none (it has no ``on.update`` handlers)."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


class _NoProgress(kopf.ProgressStorage):
    """No handler progress, as the operator keeps none."""

    def fetch(self, *, key: Any, body: Any) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        return None

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        return None

    def touch(self, *, body: Any, patch: Any, value: Any) -> None:
        return None

    def clear(self, *, essence: Any) -> Any:
        return essence


async def _nothing_indexed(**_: Any) -> dict[str, None]:
    return {}


async def _nothing_done(**_: Any) -> None:
    return None


def main() -> None:
    spec = json.loads(sys.argv[1])
    registry = kopf.OperatorRegistry()
    settings = kopf.OperatorSettings()
    for number, (group, version, plural, selector) in enumerate(spec["resources"]):
        where = (group, version, plural) if group else (version, plural)
        labels = {selector: kopf.PRESENT} if selector else None
        kopf.index(*where, registry=registry, id=f"index-{number}", labels=labels)(_nothing_indexed)
        kopf.on.event(*where, registry=registry, id=f"event-{number}", labels=labels)(_nothing_done)
        if selector:
            settings.watching.label_selectors[group or version, plural] = selector
    kopf.on.login(registry=registry)(kopf.login_with_kubeconfig)
    settings.scanning.disabled = True
    settings.posting.enabled = False
    settings.peering.standalone = True
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.persistence.progress_storage = _NoProgress()
    settings.queueing.idle_timeout = spec["idle_timeout"]
    kopf.configure(verbose=False)
    # The operator's collector settings (kubemill.substrates.kubernetes.operator.process).
    gc.freeze()
    gc.set_threshold(spec["gc_young"], *gc.get_threshold()[1:])
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    asyncio.run(
        kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=True,
            liveness_endpoint=f"http://127.0.0.1:{spec['health']}/healthz",
        )
    )


if __name__ == "__main__":
    main()
