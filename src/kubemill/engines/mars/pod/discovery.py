"""Finding a Mars pod's supervisors (explicitly, by the Kubernetes API, or through the
supervisors' web Service) and waiting, bounded, until they answer. See
:mod:`kubemill.engines.mars.pod.entrypoint`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubemill import http_client

# The contract with the Deployments, from their builders (kubemill is in the image).
from kubemill.engines.mars.pod.settings import (
    ASK_TIMEOUT,
    ENV_SUPERVISOR_WAIT,
    LABEL_CLUSTER,
    LABEL_ROLE,
    NODE_READY,
    NODE_ROLE,
    POLL,
    PodSettings,
    StartFailure,
)

log = logging.getLogger(__name__)

USER_AGENT = "kubemill-mars-pod"


@dataclass(frozen=True)
class SeenPod:
    """What discovery needs of a supervisor pod."""

    name: str
    ip: str
    ready: bool
    deleting: bool = False


def supervisors_from_pods(pods: Sequence[SeenPod], role: str, port: int) -> list[str] | None:
    """Supervisor addresses from the supervisor pods, or ``None`` to wait: a supervisor
    waits until every live one has an IP, a worker until at least one is ready."""
    live = [p for p in pods if not p.deleting]
    if role == "supervisor":
        if not live or any(not p.ip for p in live):
            return None
        return sorted(f"{p.ip}:{port}" for p in live)
    ready = sorted(f"{p.ip}:{port}" for p in live if p.ready and p.ip)
    return ready or None


def _seen(pod: Mapping[str, Any]) -> SeenPod:
    """A pod as the API client's ``to_dict`` gives it."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    return SeenPod(
        name=str(meta.get("name") or ""),
        ip=str(status.get("pod_ip") or ""),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        ),
        deleting=meta.get("deletion_timestamp") is not None,
    )


def _from_kubernetes(settings: PodSettings) -> list[str] | None:
    """Ask the API server (in-cluster service account); ``None`` if it cannot be asked."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    try:
        from kubernetes import client, config

        config.load_incluster_config()  # type: ignore[no-untyped-call]
        api = client.CoreV1Api()
        me = api.read_namespaced_pod(settings.pod_name, settings.namespace)
        cluster = ((me.to_dict().get("metadata") or {}).get("labels") or {}).get(LABEL_CLUSTER)
        selector = f"{LABEL_ROLE}=supervisor"
        if cluster:
            selector += f",{LABEL_CLUSTER}={cluster}"
        items = api.list_namespaced_pod(settings.namespace, label_selector=selector).items
    except Exception as exc:
        log.warning("cannot list the supervisor pods through the Kubernetes API: %s", exc)
        return None
    seen = [_seen(pod.to_dict()) for pod in items]
    found = supervisors_from_pods(seen, settings.role, settings.service_port)
    return [] if found is None else found


def ready_nodes(host: str, web_port: int, role: str, *, timeout: float) -> list[str] | None:
    """The addresses of the ready nodes of ``role`` (``supervisor`` or ``worker``) that the
    supervisor whose web API is at ``host:web_port`` lists; None while it does not answer."""
    url = f"http://{host}:{web_port}/api/cluster/nodes?role={NODE_ROLE[role]}&statuses={NODE_READY}"
    try:
        answer = http_client.request("GET", url, user_agent=USER_AGENT, timeout=(timeout, timeout))
        nodes = json.loads(answer.data).get("nodes", {})
    except (http_client.HttpAnswer, http_client.NoAnswer, ValueError, AttributeError):
        return None
    return sorted(nodes) if isinstance(nodes, dict) else None


def _from_service(settings: PodSettings) -> list[str]:
    """The supervisors a ready one lists, through the supervisors' web Service."""
    if not settings.service:
        return []
    return ready_nodes(settings.service, settings.web_port, "supervisor", timeout=5) or []


def find_supervisors(
    settings: PodSettings,
    *,
    sleep: Callable[[float], None] = time.sleep,
    kubernetes: Callable[[PodSettings], list[str] | None] = _from_kubernetes,
    service: Callable[[PodSettings], list[str]] = _from_service,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
) -> list[str]:
    """The supervisors' addresses, waiting until there are some (see the module's docs),
    until ``deadline`` (of ``clock``; default ``supervisor_wait`` from now): then
    :class:`StartFailure`."""
    if settings.explicit_supervisors:
        return list(settings.explicit_supervisors)
    if deadline is None:
        deadline = clock() + settings.supervisor_wait
    waited = False
    while True:
        found = kubernetes(settings)  # None: cannot ask; []: none to take yet
        if found:
            return found
        listed = service(settings)
        if listed:
            return listed
        if settings.role == "supervisor" and found is None:
            # No API to ask and no supervisor serves yet: start alone; later supervisors
            # find this one through the Service.
            return [settings.address]
        where = settings.service or "Kubernetes API"
        if clock() >= deadline:
            raise StartFailure(
                f"no supervisor found through the {where} within {settings.supervisor_wait} s"
                f" ({ENV_SUPERVISOR_WAIT})"
            )
        if not waited:
            log.warning("waiting for a supervisor (%s)", where)
            waited = True
        sleep(POLL)


def supervisors_not_up(
    addresses: Sequence[str], answers: Mapping[str, set[str] | None]
) -> list[str]:
    """The supervisors of ``addresses`` a worker cannot start with yet: those that do not
    answer (``None``), and those no answering supervisor lists as ready (each supervisor's
    collector lists the supervisors whose node info it holds, not necessarily itself)."""
    ready = set().union(*(found for found in answers.values() if found is not None))
    return [a for a in addresses if answers.get(a) is None or a not in ready]


Ask = Callable[[str], Awaitable[set[str] | None]]


async def wait_for_supervisors(
    addresses: Sequence[str],
    *,
    ask: Ask,
    deadline: float,
    wait: int,
    clock: Callable[[], float] = time.monotonic,
    nap: float = POLL,
) -> None:
    """Until every supervisor of ``addresses`` answers and is listed ready (``ask``: the
    ready supervisors one lists, ``None`` when it does not answer); past ``deadline`` (of
    ``clock``), :class:`StartFailure`. Logs once that it waits, and when it is over."""
    started = clock()
    said = False
    while True:
        answers = await asyncio.gather(*(ask(address) for address in addresses))
        missing = supervisors_not_up(addresses, dict(zip(addresses, answers, strict=True)))
        if not missing:
            if said:
                log.warning("the supervisors answered after %.0f s", clock() - started)
            return
        if clock() >= deadline:
            raise StartFailure(
                f"the supervisor(s) {', '.join(missing)} did not answer within {wait} s"
                f" ({ENV_SUPERVISOR_WAIT}), so the Mars worker was not started (it would not"
                " register)"
            )
        if not said:
            log.warning(
                "waiting up to %.0f s for the supervisor(s) %s to answer before starting the"
                " Mars worker",
                max(deadline - clock(), 0),
                ", ".join(missing),
            )
            said = True
        await asyncio.sleep(nap)


async def ready_supervisors(address: str) -> set[str] | None:
    """The ready supervisors the supervisor at ``address`` lists (Mars's cluster service
    there, asked through this worker's actor pool); ``None`` if it does not answer yet."""
    from mars import oscar as mo  # type: ignore[import-not-found]
    from mars.services.cluster import NodeRole  # type: ignore[import-not-found]
    from mars.services.cluster.core import NodeStatus  # type: ignore[import-not-found]
    from mars.services.cluster.supervisor.node_info import (  # type: ignore[import-not-found]
        NodeInfoCollectorActor,
    )

    try:
        ref = await asyncio.wait_for(
            mo.actor_ref(NodeInfoCollectorActor.default_uid(), address=address), ASK_TIMEOUT
        )
        nodes = await asyncio.wait_for(
            ref.get_nodes_info(role=NodeRole.SUPERVISOR, statuses={NodeStatus.READY}),
            ASK_TIMEOUT,
        )
    except Exception:  # refused, no such actor yet, timed out: not up
        return None
    return set(nodes)


def web_answers(host: str, port: int) -> bool:
    url = f"http://{host}:{port}/api/cluster/nodes?role={NODE_ROLE['supervisor']}"
    try:
        answer = http_client.request("GET", url, user_agent=USER_AGENT, timeout=(5.0, 5.0))
    except (http_client.HttpAnswer, http_client.NoAnswer):
        return False
    return answer.status == 200
