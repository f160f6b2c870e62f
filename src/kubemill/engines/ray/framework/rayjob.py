"""The RayJob planner: its cluster as the RayCluster planner builds it, the submitter
(``K8sJobMode``) or the HTTP submission (``HTTPMode``), and the one place Ray's job statuses
become the core's verdict (:func:`verdict`) and KubeRay's status fields (:func:`status_fields`).

The Ray job is a :class:`~kubemill.frameworks.RemoteRun`: the substrate reads the head's job
API (``GET /api/jobs/<submission id>`` on the head's dashboard port, at the head's address as
the substrate knows it: loopback locally, the head pod's IP on Kubernetes) once the head is
ready and reports what it answered; the core judges it with :func:`verdict`. In ``HTTPMode``
the substrate POSTs the submission there too, when the core asks. The submitter runs
KubeRay's sequence: wait for the dashboard, ``ray job status`` (already submitted by an
earlier try?), else ``ray job submit --no-wait``, then ``ray job logs --follow``; a fixed
script of kubemill's whose every value (the address, the id, the entrypoint's words) is an
argument of its own, never shell text.

``backoffLimit`` (:func:`retry_of`) is KubeRay's: a failed attempt is retried on a new
cluster, the core's whole-run retry (``Plan.retry``) tearing down every pod of the attempt
(head, workers, submitter) and creating them anew; ``status.failed`` and
``status.succeeded`` count the attempts, ``jobDeploymentStatus`` is ``Retrying`` while the
old cluster goes. Which failures are retried, as KubeRay's ``checkBackoffLimit``: the Ray
job FAILED (``AppFailed``) and the submitter failing for good (``SubmissionFailed``: it
could submit nothing more). Not retried: a deadline passed (``DeadlineExceeded``: KubeRay
counts it in ``failed`` but does not retry it, and neither does kubemill); a Ray job
STOPPED (someone stopped it on purpose; KubeRay calls that Complete, kubemill Failed as
before, but trying it again would undo the stop); a stop request or a halted substrate;
a replica failing for good. Each failure, retried or final, counts in ``failed``.
Deviations, and why: the submission id (``jobId``) stays the same across attempts, where
KubeRay draws a new random one unless ``spec.jobId`` is set: the Plan is fixed for the
job's life on the local substrate, and a new cluster does not know the old id anyway; and
the cluster keeps the RayJob's name (kubemill's pods are named after the job), so a new
cluster is new pods, a new head, not a new name.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from kubemill.api import ConditionType, EnvVar, Job, JobStatus, RestartPolicy
from kubemill.engines.ray.api.rayjob import (
    HEAD,
    SUBMISSION_FAILED,
    SUBMITTER,
    RayJob,
    RayJobStatus,
    RayJobStatusInfo,
    resources_of,
    runtime_env_of,
)
from kubemill.engines.ray.framework.raycluster import (
    cluster_plan,
    head_service_name,
    kube_head_ports,
    kube_token,
)
from kubemill.frameworks._common import PlanError
from kubemill.frameworks.controlled import ChildController
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    Network,
    Plan,
    ReplicaPlan,
    StatusView,
    decided_by,
    replica_name,
)
from kubemill.frameworks.remote import (
    Attempts,
    RemoteReport,
    RemoteRun,
    RemoteVerdict,
    RunRetry,
)

JOBS_PATH = "/api/jobs/"
"""Ray's job API on the head's dashboard port."""

TERMINAL_FAILURES = frozenset({"FAILED", "STOPPED"})
"""Ray's job statuses that fail the RayJob (``SUCCEEDED`` is its success)."""

APP_FAILED = "AppFailed"
"""KubeRay's reason when the Ray job itself failed (or was stopped)."""

SUBMITTER_SCRIPT = """\
address="$1"; id="$2"; shift 2
until python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
"$address/api/gcs_healthz" >/dev/null 2>&1; do
  echo "Waiting for the Ray dashboard at $address ..."; sleep 1
done
if ! ray job status --address "$address" "$id" >/dev/null 2>&1; then
  ray job submit --address "$address" --submission-id "$id" --no-wait "$@" || exit
fi
exec ray job logs --address "$address" --follow "$id"
"""
"""The submitter's program (bash): its arguments are the dashboard's address, the submission
id, then ``ray job submit``'s options and ``--`` and the entrypoint's words."""


def verdict(report: RemoteReport) -> RemoteVerdict:
    """Ray's job status in the core's words: ``SUCCEEDED`` succeeds, ``FAILED`` and
    ``STOPPED`` fail with Ray's message (reason ``AppFailed``; a stopped job is not retried),
    the rest is not over."""
    if not report.found:
        return RemoteVerdict("waiting")
    status = str(report.body.get("status") or "")
    message = str(report.body.get("message") or "")
    if status == "SUCCEEDED":
        return RemoteVerdict("succeeded", message=message)
    if status in TERMINAL_FAILURES:
        words = f"the Ray job is {status}: {message}" if message else f"the Ray job is {status}"
        return RemoteVerdict(
            "failed", reason=APP_FAILED, message=words, retryable=status != "STOPPED"
        )
    return RemoteVerdict("running", message=message)


def submit_options(job: RayJob) -> list[str]:
    """``ray job submit``'s options from the spec (beyond the address and the id)."""
    spec = job.spec
    options: list[str] = []
    if spec.runtime_env_yaml.strip():
        options += ["--runtime-env-json", json.dumps(runtime_env_of(spec.runtime_env_yaml))]
    if spec.metadata:
        options += ["--metadata-json", json.dumps(spec.metadata)]
    if spec.entrypoint_num_cpus:
        options += ["--entrypoint-num-cpus", format(spec.entrypoint_num_cpus, "g")]
    if spec.entrypoint_num_gpus:
        options += ["--entrypoint-num-gpus", format(spec.entrypoint_num_gpus, "g")]
    if spec.entrypoint_resources:
        options += ["--entrypoint-resources", spec.entrypoint_resources]
    return options


def entrypoint_words(entrypoint: str) -> list[str]:
    """The entrypoint as ``ray job submit -- <words>`` takes it: Ray joins the words back
    into one shell command (``shlex.join``), so a command that uses the shell's own syntax
    (pipes, ``&&``) is given as ``bash -c '...'``."""
    try:
        return shlex.split(entrypoint)
    except ValueError as exc:
        raise PlanError(f"spec.entrypoint: cannot split it into words: {exc}") from None


def submitter_command(job: RayJob, address: str) -> list[str]:
    """The submitter's argv: :data:`SUBMITTER_SCRIPT` with everything as arguments."""
    return [
        "bash",
        "-c",
        SUBMITTER_SCRIPT,
        "ray-job-submitter",
        address,
        job.submission_id,
        *submit_options(job),
        "--",
        *entrypoint_words(job.spec.entrypoint),
    ]


def submission_body(job: RayJob) -> dict[str, Any]:
    """What ``HTTPMode`` POSTs to the job API (the fields of Ray's ``JobSubmitRequest``)."""
    spec = job.spec
    body: dict[str, Any] = {
        "entrypoint": spec.entrypoint.strip(),
        "submission_id": job.submission_id,
    }
    if spec.runtime_env_yaml.strip():
        body["runtime_env"] = runtime_env_of(spec.runtime_env_yaml)
    if spec.metadata:
        body["metadata"] = dict(spec.metadata)
    if spec.entrypoint_num_cpus:
        body["entrypoint_num_cpus"] = spec.entrypoint_num_cpus
    if spec.entrypoint_num_gpus:
        body["entrypoint_num_gpus"] = spec.entrypoint_num_gpus
    if spec.entrypoint_resources:
        body["entrypoint_resources"] = resources_of(spec.entrypoint_resources)
    return body


def _ms(value: object) -> datetime | None:
    """A Unix time in milliseconds (as Ray's job API gives times) as a UTC datetime."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return datetime.fromtimestamp(value / 1000, UTC)
    return None


def attempts_of(status: JobStatus) -> Attempts:
    """The attempts the core counted, as the status extension wrote them (KubeRay's
    ``failed``, ``succeeded``, and ``Retrying``)."""
    assert isinstance(status, RayJobStatus)
    return Attempts(
        failed=status.failed or 0,
        succeeded=status.succeeded or 0,
        retrying=status.job_deployment_status == "Retrying",
    )


def retry_of(job: RayJob) -> RunRetry:
    """``backoffLimit`` as the core's whole-run retry (see the module doc)."""
    return RunRetry(limit=job.spec.backoff_limit or 0, recorded=attempts_of)


def status_fields(view: StatusView, dashboard: str | None = None) -> Mapping[str, object]:
    """KubeRay's status fields of a RayJob from what the pass decided and Ray reported;
    ``dashboard``: KubeRay's ``dashboardURL`` (``host:port``)."""
    job = view.job
    assert isinstance(job, RayJob)
    status = view.status
    report = view.remote
    attempts = view.attempts or Attempts()
    fields: dict[str, object] = {
        "job_id": job.submission_id,
        "ray_cluster_name": job.name,
        "dashboard_url": dashboard,
        "end_time": status.completion_time,
        "failed": attempts.failed,
        "succeeded": attempts.succeeded,
    }
    if report is None and not status.finished:
        # A new attempt (or none yet): what Ray said of an earlier one is no longer the
        # job's, as KubeRay resets it before it starts again.
        fields |= {"job_status": None, "ray_job_info": None, "message": None, "reason": None}
    if report is not None and report.found:
        fields["job_status"] = str(report.body.get("status") or "") or None
        fields["ray_job_info"] = RayJobStatusInfo(
            start_time=_ms(report.body.get("start_time")),
            end_time=_ms(report.body.get("end_time")),
        )
        ray_message = report.body.get("message")
        if ray_message:
            fields["message"] = str(ray_message)
    failed = status.condition(ConditionType.FAILED)
    if failed is not None and failed.status == "True":
        fields["job_deployment_status"] = "Failed"
        fields["reason"] = failed.reason
        fields["message"] = failed.message
    elif status.is_true(ConditionType.SUCCEEDED):
        fields["job_deployment_status"] = "Complete"
    elif status.is_true(ConditionType.SUSPENDED):
        fields["job_deployment_status"] = "Suspended"
    elif attempts.retrying:
        fields["job_deployment_status"] = "Retrying"
    elif report is not None and report.found:
        fields["job_deployment_status"] = "Running"
    else:
        fields["job_deployment_status"] = "Initializing"
    return fields


def job_plan(job: RayJob, cluster: Plan, dashboard: str, port: int) -> Plan:
    """The RayJob's Plan: ``cluster`` (its cluster's Plan, as the RayCluster planner builds
    it for the substrate) with the submitter after every node and the Ray job as a remote
    run on the head's dashboard ``port``. ``dashboard`` is ``http://host:port`` of the
    head's job API as a pod of the job (the submitter) reaches it, and KubeRay's
    ``dashboardURL``. The cluster's service rule gives way to the Ray job's verdict."""
    head = replica_name(job.name, HEAD, 0)
    replicas = list(cluster.replicas)
    if job.has_submitter:
        replicas.append(_submitter(job, cluster, dashboard))
    remote = RemoteRun(
        after=head,
        port=port,
        status_path=f"{JOBS_PATH}{job.submission_id}",
        verdict=verdict,
        submit_path="" if job.has_submitter else JOBS_PATH,
        submit_body={} if job.has_submitter else submission_body(job),
    )
    return replace(
        cluster,
        kind=job.KIND,
        replicas=tuple(replicas),
        # Judged by the Ray job (the remote run); the rule only names the deciding replica.
        outcome=decided_by(SUBMITTER if job.has_submitter else HEAD),
        remote=remote,
        # KubeRay's TTL deletes the cluster that long after the end, never the RayJob.
        clean_after=_ttl(job),
        retry=retry_of(job),
        status_extension=partial(status_fields, dashboard=dashboard.removeprefix("http://")),
    )


def _ttl(job: RayJob) -> timedelta | None:
    """How long after the end the cluster is shut down (``shutdownAfterJobFinishes``)."""
    ttl = job.spec.ttl_seconds_after_finished
    return timedelta(seconds=ttl) if job.spec.shutdown_after_job_finishes and ttl else None


def _submitter(job: RayJob, cluster: Plan, dashboard: str) -> ReplicaPlan:
    """The submitter replica, a stage after every node of the cluster (so it starts once
    they are ready: the Plan's start gate), run through a child controller as KubeRay runs
    it (its Job)."""
    spec = job.replica_specs[SUBMITTER]
    container = job.main_container_name(SUBMITTER)
    command = submitter_command(job, dashboard)
    template = spec.template.model_copy(deep=True)
    for each in template.spec.containers:
        if each.name == container:
            each.command = command
            each.args = None
    return ReplicaPlan(
        replica_type=SUBMITTER,
        index=0,
        name=replica_name(job.name, SUBMITTER, 0),
        template=template,
        container=container,
        env=(EnvVar(name="RAY_ADDRESS", value=dashboard),),
        ports={},
        restart_policy=spec.restart_policy or RestartPolicy.ON_FAILURE,
        labels={
            LABEL_JOB_NAME: job.name,
            LABEL_REPLICA_TYPE: SUBMITTER.lower(),
            LABEL_REPLICA_INDEX: "0",
            LABEL_JOB_ROLE: "submitter",
        },
        stage=max((rep.stage for rep in cluster.replicas), default=0) + 1,
        # As KubeRay's: a batch/v1 Job of the RayJob's name on Kubernetes (a process
        # locally), retried up to submitterConfig.backoffLimit; failing for good fails the
        # RayJob with SubmissionFailed.
        controller=ChildController(
            name=job.name,
            backoff_limit=job.submitter_backoff_limit,
            failure_reason=SUBMISSION_FAILED,
        ),
    )


def kube_dashboard(job: RayJob) -> str:
    """The head's job API as the submitter reaches it in a cluster: through the head
    Service, as KubeRay's ``dashboardURL``."""
    service = f"{head_service_name(job.name)}.{job.namespace}.svc.cluster.local"
    return f"http://{service}:{kube_head_ports(job.cluster.spec)['dashboard']}"


class RayJobs:
    """The RayJob framework: the cluster as the RayCluster planner builds it, then
    :func:`job_plan`."""

    kind = RayJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        assert isinstance(job, RayJob)
        spec = job.cluster.spec
        port = kube_head_ports(spec)["dashboard"]
        planned = job_plan(job, cluster_plan(job, spec, network), kube_dashboard(job), port)
        return kube_token(spec, planned)  # every replica's, the submitter's too


__all__ = [
    "APP_FAILED",
    "JOBS_PATH",
    "SUBMITTER_SCRIPT",
    "TERMINAL_FAILURES",
    "RayJobs",
    "attempts_of",
    "entrypoint_words",
    "job_plan",
    "kube_dashboard",
    "retry_of",
    "status_fields",
    "submission_body",
    "submit_options",
    "submitter_command",
    "verdict",
]
