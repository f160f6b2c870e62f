"""A remote run: a program a job hands to a service it brings up (a Ray job submitted to
the job's Ray head through its job API), whose own API says how it ends.

A framework declares it in its Plan (``Plan.remote``); the substrate reports what the API
answered (:class:`RemoteReport`); the core judges it with the Plan's own
:class:`RemoteVerdictRule`, the one place a kind's words map to an outcome. A Plan may also
have the whole run tried again when it fails (``Plan.retry``, a :class:`RunRetry`: a Ray
job on a new Ray cluster), the core counting the attempts (:class:`Attempts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from kubemill.api import JobStatus


@dataclass(frozen=True)
class RemoteReport:
    """What a substrate saw of a :class:`RemoteRun` through the service's own API: the JSON
    object its status URL answered, or that the service does not know the run (yet)."""

    found: bool
    """The API answered with the run (False: it answered 404, not submitted yet)."""
    body: Mapping[str, Any] = field(default_factory=dict)
    """The API's answer as it is (a JSON object), when ``found``."""
    source: str = ""
    """Which instance of the service answered: the uid of the ``after`` replica's pod the
    substrate asked ("": not said). The core judges a report only while that pod is the
    replica's live one, so the answer of a service torn down (an earlier attempt's head)
    is never taken for the new one's."""


@dataclass(frozen=True)
class RemoteVerdict:
    """How a :class:`RemoteRun` stands, in the core's words, from its service's report."""

    state: Literal["waiting", "running", "succeeded", "failed"]
    reason: str = ""
    """The job's Failed reason when ``failed``."""
    message: str = ""
    """The service's own words on how the run ended (a failure's message names them)."""
    retryable: bool = True
    """Whether a failure is one the Plan's :class:`RunRetry` tries again (False: the run was
    stopped on purpose, e.g. a Ray job stopped through its API)."""


class RemoteVerdictRule(Protocol):
    """A kind's reading of its service's report (pure): the one place its words map to an
    outcome."""

    def __call__(self, report: RemoteReport) -> RemoteVerdict: ...


@dataclass(frozen=True)
class SecretFile:
    """One file of one of the Plan's secret FileSets, named where the substrate reads a
    credential it generated for the job (a :class:`~kubemill.frameworks.RandomToken`).
    Locally ``file_set`` may instead be the absolute directory of another job's set (the
    token of an existing Ray cluster a Ray job selects), read where it was written."""

    file_set: str
    file: str


@dataclass(frozen=True)
class RemoteRun:
    """A program the job hands to a service it brings up, whose own API says how it ends
    (a Ray job submitted to the job's Ray head through its job API): that verdict, not a
    replica's exit, is the job's outcome.

    The service is the replica ``after``, listening on ``port``; the Plan names no host,
    because only the substrate knows where that replica is (locally the loopback address,
    on Kubernetes its pod's ``status.podIP``): it builds the URLs (:meth:`url`) from that
    address. The substrate reads ``status_path`` once ``after`` is Running and ready and
    reports what it saw (:attr:`~kubemill.core.Observed.remote`); the core judges it with
    ``verdict`` (the replicas' success policy then decides nothing; a replica failing for
    good still fails the job). With ``submit_path`` the substrate submits the run itself
    when the core asks (``SubmitRemote``: the API does not know the run yet); without it,
    a replica of the Plan submits it (a submitter).

    A service that is another job's (an existing Ray cluster a Ray job selects) is no
    replica of the Plan: ``after`` is then "" and ``host`` is where that service serves,
    as the substrate found it before planning ("" while it does not serve); ``lost`` is
    the run's verdict once that service is gone for good under it.
    """

    after: str
    """The replica whose readiness means the API answers (the service's head); "": the
    service is another job's, at ``host``."""
    port: int
    """The port of ``after`` the API listens on."""
    status_path: str
    """The run's status, ``GET`` (e.g. ``/api/jobs/<id>``)."""
    verdict: RemoteVerdictRule
    submit_path: str = ""
    """Where the substrate POSTs ``submit_body`` ("": a replica submits the run)."""
    submit_body: Mapping[str, Any] = field(default_factory=dict)
    """The JSON object POSTed to ``submit_path``."""
    bearer_token: SecretFile | None = None
    """The API wants ``Authorization: Bearer <this file's content>`` (a Ray head with token
    authentication); None: it wants no credential."""
    host: str = ""
    """Where another job's service serves (``after`` ""), while it does ("": not found, or
    not ready)."""
    lost: RemoteVerdict | None = None
    """The run's verdict when another job's service it was handed to is gone for good:
    the job's, unless the service's own last report had already ended the run."""

    @property
    def serving_elsewhere(self) -> bool:
        """Whether the service is another job's and serves now (at ``host``)."""
        return not self.after and bool(self.host)

    def url(self, host: str, path: str) -> str:
        """``http://`` to ``path`` on ``port`` of ``host`` (the ``after`` replica's address
        as the substrate reaches it; an IPv6 address bracketed)."""
        where = f"[{host}]" if ":" in host else host
        return f"http://{where}:{self.port}{path}"


@dataclass(frozen=True)
class Attempts:
    """How many times a job's whole run has ended, as the core counts them for a
    :class:`RunRetry` (KubeRay's ``status.failed`` and ``status.succeeded``)."""

    failed: int = 0
    """Attempts that failed: those retried, and the last one if the job failed for good."""
    succeeded: int = 0
    """Attempts that succeeded (1 once the job has, since a success is never retried)."""
    retrying: bool = False
    """The failed attempt's pods are being torn down before the next one starts (this pass
    decided the retry, or its pods are still going)."""


class AttemptsReader(Protocol):
    """Reads a kind's status back into the :class:`Attempts` the core wrote there."""

    def __call__(self, status: JobStatus) -> Attempts: ...


@dataclass(frozen=True)
class RunRetry:
    """The job's whole run is tried again when it fails (KubeRay's ``backoffLimit``: a Ray
    job on a new Ray cluster): every pod of the failed attempt goes, and the job is created
    anew, up to ``limit`` times; the core counts the attempts in the kind's status
    (``recorded`` reads them back; the status extension writes
    :attr:`StatusView.attempts`)."""

    limit: int
    """Retries after a failed attempt (0: none, the first failure is final)."""
    recorded: AttemptsReader


__all__ = [
    "Attempts",
    "AttemptsReader",
    "RemoteReport",
    "RemoteRun",
    "RemoteVerdict",
    "RemoteVerdictRule",
    "RunRetry",
    "SecretFile",
]
