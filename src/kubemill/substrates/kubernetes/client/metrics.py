"""A job's pods' CPU and memory from the cluster's metrics API (``metrics.k8s.io``), where
the cluster has one (metrics-server, or an adapter serving it); otherwise a report that
says there is none (or, if it has one, that it has no sample of the job's pods yet). The API
holds the latest sample of each pod only, so each replica's series is that one sample."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubemill.core.quantity import parse_quantity
from kubemill.substrates.base import ResourceReport, ResourceSample
from kubemill.substrates.kubernetes.client.connection import Http
from kubemill.substrates.kubernetes.client.errors import KubeApiError, Request
from kubemill.substrates.kubernetes.observe import parse_time
from kubemill.substrates.kubernetes.transport import api_path

METRICS_GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
NO_METRICS_API = (
    "This cluster has no metrics API (metrics.k8s.io, served by metrics-server):"
    " there is no CPU or memory to show."
)
NO_SAMPLES = (
    "The metrics API (metrics.k8s.io) has no sample of this job's pods yet: it samples"
    " running pods, every 15 s or so with metrics-server's defaults."
)


def pod_metrics(
    http: Http, namespace: str, selector: str, pods: Mapping[str, str]
) -> ResourceReport:
    """The latest sample of each of ``pods`` (pod name -> its replica's name; selected by
    ``selector``), by replica name."""
    if not _served(http):
        return ResourceReport({}, note=NO_METRICS_API)
    request = Request("list", "pods", METRICS_GROUP, namespace)
    path = api_path(group=METRICS_GROUP, version=VERSION, plural="pods", namespace=namespace)
    try:
        answer = http.json(request, "GET", path, query=[("labelSelector", selector)])
    except KubeApiError as exc:
        if exc.status in (404, 503):  # gone since, or its APIService is unavailable
            return ResourceReport({}, note=NO_METRICS_API)
        raise
    found = {}
    for item in answer.get("items") or ():
        name = (item.get("metadata") or {}).get("name", "")
        if name in pods:
            found[pods[name]] = [_sample(item)]
    return ResourceReport(found, note="" if found else NO_SAMPLES)


def _served(http: Http) -> bool:
    """Whether discovery lists the metrics API's pods (an API server without one answers
    404, or, as some test servers do, lists nothing)."""
    path = f"/apis/{METRICS_GROUP}/{VERSION}"
    try:
        answer = http.json(Request("get", path), "GET", path)
    except KubeApiError as exc:
        if exc.status in (404, 503):
            return False
        raise
    return any(r.get("name") == "pods" for r in answer.get("resources") or ())


def _sample(item: Mapping[str, Any]) -> ResourceSample:
    """A PodMetrics as one sample: its containers' usage summed."""
    cores = 0.0
    memory = 0
    for container in item.get("containers") or ():
        usage = container.get("usage") or {}
        cpu = parse_quantity(usage.get("cpu", "0"))
        mem = parse_quantity(usage.get("memory", "0"))
        cores += float(cpu or 0)
        memory += int(mem or 0)
    moment = parse_time(item.get("timestamp"))
    return ResourceSample(moment.timestamp() if moment else 0.0, cores, memory)
