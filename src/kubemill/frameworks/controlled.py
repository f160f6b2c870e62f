"""A replica run through a child controller: the substrate hands the replica's pod to a
controller of its own that runs it to completion and retries it, as an upstream operator
creates such a controller's object for a step of its job (a submitter, say), instead of
the core creating the pod itself.

A framework declares it on the replica (``ReplicaPlan.controller``). On Kubernetes the
replica is a batch/v1 Job named :attr:`ChildController.name`, its pod template the
replica's pod, its ``backoffLimit`` :attr:`ChildController.backoff_limit`; the substrate
reports the Job's status as it is (``Observed.controllers``) and the core reads the
replica's state from it (:mod:`kubemill.core.controlled`). Locally the replica stays a
process of the job's supervisor. One meaning on both: the replica fails for good once it
has failed more than ``backoff_limit`` times (or the controller says it gave up), and the
job then fails with :attr:`ChildController.failure_reason`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChildController:
    """How a replica is run through a child controller (see the module's docstring)."""

    name: str
    """The controller object's name (on Kubernetes, the Job's)."""
    backoff_limit: int
    """Failed runs of the replica that are retried; one more fails it for good."""
    failure_reason: str
    """The job's Failed reason when the replica fails for good."""


__all__ = ["ChildController"]
