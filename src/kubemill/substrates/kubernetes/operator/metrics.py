"""Prometheus metrics of the operator, served on ``--metrics-port`` at ``/metrics``.

Job counters move on condition *transitions* the reconcile writes (Created, Succeeded,
Failed, Restarting becoming True), so a job is counted once however often it is
reconciled, and replicas of the operator that are not leading count nothing.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from kubemill.api import ConditionType, JobStatus


class Metrics:
    """The operator's metrics, in a registry of their own (no process-global state)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["kind"]
        self.jobs_created = Counter(
            "kubemill_jobs_created",
            "Jobs the operator started handling.",
            labels,
            registry=self.registry,
        )
        self.jobs_succeeded = Counter(
            "kubemill_jobs_succeeded", "Jobs that succeeded.", labels, registry=self.registry
        )
        self.jobs_failed = Counter(
            "kubemill_jobs_failed", "Jobs that failed.", labels, registry=self.registry
        )
        self.jobs_restarted = Counter(
            "kubemill_jobs_restarted",
            "Times a job started restarting replicas.",
            labels,
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "kubemill_reconcile_duration_seconds",
            "Time of one reconcile of one job, API calls included.",
            labels,
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.api_errors = Counter(
            "kubemill_api_errors",
            "Error answers of the API server to the operator's own requests.",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "kubemill_workqueue_depth", "Jobs waiting for a reconcile.", registry=self.registry
        )
        self.leader = Gauge(
            "kubemill_leader",
            "1 while this replica is the one that reconciles.",
            registry=self.registry,
        )

    def serve(self, *, port: int, address: str) -> None:
        """Start the ``/metrics`` HTTP endpoint (a daemon thread)."""
        start_http_server(port, addr=address, registry=self.registry)

    def count_transitions(self, kind: str, before: JobStatus, after: JobStatus) -> None:
        """Count the conditions that became True between two statuses of one job."""
        counters = {
            ConditionType.CREATED: self.jobs_created,
            ConditionType.SUCCEEDED: self.jobs_succeeded,
            ConditionType.FAILED: self.jobs_failed,
            ConditionType.RESTARTING: self.jobs_restarted,
        }
        for condition, counter in counters.items():
            if after.is_true(condition) and not before.is_true(condition):
                counter.labels(kind=kind).inc()
