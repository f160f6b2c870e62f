"""The states of a job that runs again as a whole: the spark-operator's names.

Any kind whose engine chooses the re-run lifecycle (:mod:`kubemill.core.rerun`) reports
these states; Spark's application is the one today. They live apart from the Spark models so
that the core's lifecycle and state machine name no kind's API.
"""

from __future__ import annotations

from enum import StrEnum


class ApplicationStateType(StrEnum):
    """The spark-operator's application states (NEW is the empty string, as upstream)."""

    NEW = ""
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    SUCCEEDING = "SUCCEEDING"
    COMPLETED = "COMPLETED"
    FAILING = "FAILING"
    FAILED = "FAILED"
    SUBMISSION_FAILED = "SUBMISSION_FAILED"
    PENDING_RERUN = "PENDING_RERUN"
    INVALIDATING = "INVALIDATING"
    SUSPENDING = "SUSPENDING"
    SUSPENDED = "SUSPENDED"
    RESUMING = "RESUMING"
    UNKNOWN = "UNKNOWN"


TERMINAL_STATES = frozenset({ApplicationStateType.COMPLETED, ApplicationStateType.FAILED})
"""Upstream's terminated states: nothing follows but the TTL."""


__all__ = ["TERMINAL_STATES", "ApplicationStateType"]
