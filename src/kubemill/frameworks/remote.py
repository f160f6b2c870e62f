"""A remote run: a program a job hands to a service it brings up (a Ray job submitted to
the job's Ray head through its job API), whose own API says how it ends.

A framework declares it in its Plan (``Plan.remote``); the substrate reports what the API
answered (:class:`RemoteReport`); the core judges it with the Plan's own
:class:`RemoteVerdictRule`, the one place a kind's words map to an outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class RemoteReport:
    """What a substrate saw of a :class:`RemoteRun` through the service's own API: the JSON
    object its status URL answered, or that the service does not know the run (yet)."""

    found: bool
    """The API answered with the run (False: it answered 404, not submitted yet)."""
    body: Mapping[str, Any] = field(default_factory=dict)
    """The API's answer as it is (a JSON object), when ``found``."""


@dataclass(frozen=True)
class RemoteVerdict:
    """How a :class:`RemoteRun` stands, in the core's words, from its service's report."""

    state: Literal["waiting", "running", "succeeded", "failed"]
    reason: str = ""
    """The job's Failed reason when ``failed``."""
    message: str = ""
    """The service's own words on how the run ended (a failure's message names them)."""


class RemoteVerdictRule(Protocol):
    """A kind's reading of its service's report (pure): the one place its words map to an
    outcome."""

    def __call__(self, report: RemoteReport) -> RemoteVerdict: ...


@dataclass(frozen=True)
class RemoteRun:
    """A program the job hands to a service it brings up, whose own API says how it ends
    (a Ray job submitted to the job's Ray head through its job API): that verdict, not a
    replica's exit, is the job's outcome.

    The substrate reads ``status_url`` once the replica ``after`` is Running and ready and
    reports what it saw (:attr:`~kubemill.core.Observed.remote`); the core judges it with
    ``verdict`` (the replicas' success policy then decides nothing; a replica failing for
    good still fails the job). With ``submit_url`` the substrate submits the run itself
    when the core asks (``SubmitRemote``: the API does not know the run yet); without it,
    a replica of the Plan submits it (a submitter).
    """

    status_url: str
    after: str
    """The replica whose readiness means the API answers (the service's head)."""
    verdict: RemoteVerdictRule
    submit_url: str = ""
    submit_body: Mapping[str, Any] = field(default_factory=dict)
    """The JSON object POSTed to ``submit_url``."""


__all__ = ["RemoteReport", "RemoteRun", "RemoteVerdict", "RemoteVerdictRule"]
