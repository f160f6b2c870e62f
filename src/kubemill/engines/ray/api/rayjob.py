"""The RayJob kind, as KubeRay's ``ray.io/v1`` defines it: a Ray job (``entrypoint``, run by
Ray's job API) on a Ray cluster the RayJob brings up for itself (``rayClusterSpec``, a
RayCluster's spec as :mod:`.raycluster` models it), or on an existing RayCluster of its
namespace (``clusterSelector``, :mod:`.selection`), which it never deletes or suspends.

How it is submitted is ``submissionMode``: ``K8sJobMode`` (the default) runs a submitter
(``ray job submit --no-wait``, then ``ray job logs --follow``, as KubeRay's submitter Job
does), ``HTTPMode`` has kubemill itself POST the job to the head's job API. The outcome is
Ray's own: the job API's status (``SUCCEEDED``, ``FAILED``, ``STOPPED``), decided by the core
(the engine's verdict rule, :mod:`kubemill.engines.ray.framework.rayjob`). The status is
KubeRay's (``jobStatus``, ``jobDeploymentStatus``, ``jobId``, ``dashboardURL``,
``rayClusterName``, ``startTime``/``endTime``, ``message``, ``rayJobInfo``) beside the core's
conditions. ``backoffLimit`` retries a failed Ray job on a new cluster, as KubeRay's:
``failed`` and ``succeeded`` count the attempts (which failures are retried:
:mod:`kubemill.engines.ray.framework.rayjob`).

What kubemill does not honour yet is refused at its field path: ``InteractiveMode`` and
``SidecarMode``, a cron ``schedule``,
``deletionStrategy`` and another controller (``managedBy``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, ClassVar, Literal

import yaml
from pydantic import Field, PrivateAttr, field_validator

from kubemill.api.base import KubeModel, invalid, refused
from kubemill.api.common import (
    CleanPodPolicy,
    Job,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
)
from kubemill.api.errors import FieldError
from kubemill.api.kinds import AGE_COLUMN, KindApi, PrinterColumn
from kubemill.api.kube import Container, PodSpec, PodTemplateSpec
from kubemill.engines.ray.api.raycluster import (
    API_VERSION,
    HEAD,
    RayCluster,
    RayClusterSpec,
    RayClusterStatus,
)
from kubemill.engines.ray.api.refusals import refusal_validator
from kubemill.engines.ray.api.selection import CLUSTER_KEY, SelectedCluster, selected_name

SUBMITTER = "Submitter"
"""The submitter's replica type (``K8sJobMode``): its pod is ``<job>-submitter-0``."""

SUBMITTER_CONTAINER = "ray-job-submitter"
"""The default submitter container's name, as KubeRay's."""

DEFAULT_SUBMITTER_BACKOFF = 2
"""Failures of the submitter that are retried before the RayJob fails, as KubeRay's
submitter Job's default ``backoffLimit``."""

SUBMISSION_FAILED = "SubmissionFailed"
"""KubeRay's reason when the submitter failed for good (its Job's ``Failed`` condition)."""

SubmissionMode = Literal["K8sJobMode", "HTTPMode"]

RayJobState = Literal["", "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]
"""Ray's job statuses as its job API reports them ("" before the job is known)."""

DeploymentStatus = Literal[
    "",
    "Initializing",
    "Running",
    "Complete",
    "Failed",
    "Suspending",
    "Suspended",
    "Retrying",
    "Waiting",
]
"""KubeRay's ``jobDeploymentStatus`` values (kubemill writes all but Waiting, which belongs
to InteractiveMode)."""

_NOT_YET: dict[str, str] = {
    "InteractiveMode": "kubemill submits the job itself; waiting for a user's submission is "
    "not supported yet",
    "SidecarMode": "a submitter inside the head pod is not supported yet",
}


class SubmitterConfig(KubeModel):
    """The submitter Job's settings (``K8sJobMode``)."""

    backoff_limit: int | None = Field(default=None, ge=0)
    """Restarts of the submitter before the RayJob fails (default 2, as KubeRay's)."""


class RayJobSpec(KubeModel):
    """What a RayJob runs and on what."""

    entrypoint: str = ""
    runtime_env_yaml: str = Field(default="", alias="runtimeEnvYAML")
    job_id: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    ray_cluster_spec: RayClusterSpec | None = None
    cluster_selector: dict[str, str] | None = None
    submission_mode: SubmissionMode = "K8sJobMode"
    submitter_pod_template: PodTemplateSpec | None = None
    submitter_config: SubmitterConfig | None = None
    entrypoint_num_cpus: float | None = Field(default=None, ge=0)
    entrypoint_num_gpus: float | None = Field(default=None, ge=0)
    entrypoint_resources: str | None = None
    shutdown_after_job_finishes: bool = False
    ttl_seconds_after_finished: int = Field(default=0, ge=0)
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    backoff_limit: int | None = Field(default=0, ge=0)
    """Retries of a failed Ray job, each on a new cluster (KubeRay's; 0: none)."""
    suspend: bool = False
    schedule: str | None = None
    deletion_strategy: dict[str, Any] | None = None
    managed_by: str | None = None

    _refused = refusal_validator("RayJobSpec")

    @field_validator("submission_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        if isinstance(value, str) and value in _NOT_YET:
            raise refused(f"{value}: {_NOT_YET[value]}", "use K8sJobMode (the default) or HTTPMode")
        return value

    @field_validator("runtime_env_yaml")
    @classmethod
    def _runtime_env(cls, value: str) -> str:
        if value.strip():
            runtime_env_of(value)
        return value

    @field_validator("entrypoint_resources")
    @classmethod
    def _resources(cls, value: str | None) -> str | None:
        if value:
            resources_of(value)
        return value

    @field_validator("job_id")
    @classmethod
    def _job_id(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", value):
            raise invalid(
                f"{value!r} is not a submission id kubemill passes on",
                "letters, digits, '_', '.' and '-', at most 100, starting with a letter or digit",
            )
        return value


def runtime_env_of(text: str) -> dict[str, Any]:
    """``runtimeEnvYAML`` as the mapping Ray's job API takes (ValueError if it is not one)."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError("a runtime environment is a mapping (e.g. 'pip: [numpy]')")
    return loaded


def resources_of(text: str) -> dict[str, float]:
    """``entrypointResources`` (a JSON object of resource -> quantity) as Ray's API takes it."""
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(loaded, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in loaded.values()
    ):
        raise ValueError('a JSON object of resource names to quantities, e.g. {"custom": 1}')
    return {str(k): float(v) for k, v in loaded.items()}


class RayJobStatusInfo(KubeModel):
    """The Ray job's own times, as Ray's job API reports them (KubeRay's ``rayJobInfo``)."""

    start_time: datetime | None = None
    end_time: datetime | None = None


class RayJobStatus(JobStatus):
    """KubeRay's status fields beside the core's conditions; the core writes every field (the
    kind's status extension, from what the pass decided and Ray reported)."""

    job_id: str | None = None
    ray_cluster_name: str | None = None
    dashboard_url: str | None = Field(default=None, alias="dashboardURL")
    job_status: RayJobState | None = None
    job_deployment_status: DeploymentStatus | None = None
    reason: str | None = None
    message: str | None = None
    end_time: datetime | None = None
    ray_job_info: RayJobStatusInfo | None = None
    succeeded: int | None = None
    failed: int | None = None
    ray_cluster_status: RayClusterStatus | None = None
    observed_generation: int | None = None


class RayJob(Job):
    """A Ray job on a Ray cluster of its own: the head, the worker groups and (``K8sJobMode``)
    a submitter; finished when Ray says the job is."""

    KIND: ClassVar[str] = "RayJob"
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ALWAYS
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True
    SUSPEND_FIELD: ClassVar[tuple[str, ...]] = ("suspend",)

    api_version: str = API_VERSION
    kind: str = "RayJob"
    spec: RayJobSpec
    status: RayJobStatus = Field(default_factory=RayJobStatus)
    _selected: SelectedCluster | None = PrivateAttr(default=None)

    @property
    def selects(self) -> str:
        """The existing RayCluster it runs on (``clusterSelector``); "": its own."""
        return selected_name(self.spec.cluster_selector)

    @property
    def selected(self) -> SelectedCluster | None:
        """That cluster as the substrate found it (None: not looked up)."""
        return self._selected

    def with_selected(self, selected: SelectedCluster) -> RayJob:
        """This RayJob handed what the substrate found of the cluster it selects."""
        job = self.model_copy()
        job._selected = selected
        return job

    @property
    def cluster(self) -> RayCluster:
        """The job's Ray cluster as a RayCluster of the same name would be (what the
        RayCluster planner builds the head and the workers of)."""
        spec = self.spec.ray_cluster_spec
        assert spec is not None, "a RayJob without rayClusterSpec is refused on load"
        return RayCluster(
            metadata=self.metadata, spec=spec.model_copy(update={"suspend": self.spec.suspend})
        )

    @property
    def submission_id(self) -> str:
        """The Ray job's submission id: ``jobId``, else the RayJob's name and uid."""
        if self.spec.job_id:
            return self.spec.job_id
        uid = self.metadata.uid or ""
        return f"{self.name}-{uid[:8]}" if uid else self.name

    @property
    def has_submitter(self) -> bool:
        return self.spec.submission_mode == "K8sJobMode"

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The cluster's (the head, then each worker group), then the submitter; on a
        selected cluster the submitter alone."""
        if self.spec.ray_cluster_spec is None and not self.selects:
            return {}
        specs = dict(self.cluster.replica_specs) if not self.selects else {}
        if self.has_submitter:
            specs[SUBMITTER] = ReplicaSpec(
                replicas=1,
                restart_policy=RestartPolicy.ON_FAILURE,
                template=self.submitter_template,
            )
        return specs

    @property
    def submitter_template(self) -> PodTemplateSpec:
        """``submitterPodTemplate``, else KubeRay's default: one container with the head's
        image and its modest resources."""
        if self.spec.submitter_pod_template is not None:
            return self.spec.submitter_pod_template
        if self.selects:
            image = self.selected.head_image if self.selected is not None else None
        else:
            assert self.spec.ray_cluster_spec is not None
            head = self.spec.ray_cluster_spec.head_group_spec.template.spec
            image = head.containers[0].image if head.containers else None
        container = Container.model_validate(
            {
                "name": SUBMITTER_CONTAINER,
                "image": image,
                "resources": {
                    "limits": {"cpu": "1", "memory": "1Gi"},
                    "requests": {"cpu": "500m", "memory": "200Mi"},
                },
            }
        )
        return PodTemplateSpec(spec=PodSpec(containers=[container], restart_policy="Never"))

    @property
    def submitter_backoff_limit(self) -> int:
        """The submitter's failures that are retried: ``submitterConfig.backoffLimit``, else
        KubeRay's default (2)."""
        config = self.spec.submitter_config
        limit = config.backoff_limit if config is not None else None
        return DEFAULT_SUBMITTER_BACKOFF if limit is None else limit

    @property
    def run_policy(self) -> RunPolicy:
        """KubeRay's settings in the core's terms: ``shutdownAfterJobFinishes`` deletes the
        cluster's pods once the Ray job ended (``ttlSecondsAfterFinished`` later: the Plan's
        ``clean_after``) and the RayJob stays, with its status, as KubeRay keeps it. No
        backoff limit of the job's pods: KubeRay keeps the cluster's pods running whatever
        their restarts, and the submitter's failures count against its own limit
        (:attr:`submitter_backoff_limit`, the submitter's controller in the Plan)."""
        shutdown = self.spec.shutdown_after_job_finishes
        return RunPolicy(
            clean_pod_policy=CleanPodPolicy.ALL if shutdown else CleanPodPolicy.NONE,
            active_deadline_seconds=self.spec.active_deadline_seconds,
            backoff_limit=None,
            suspend=self.spec.suspend,
        )

    def main_container_name(self, replica_type: str) -> str:
        """The Ray container (a template's first, as KubeRay takes it)."""
        containers = self.replica_specs[replica_type].template.spec.containers
        return containers[0].name if containers else ""

    def kind_errors(self) -> list[FieldError]:
        spec = self.spec
        errors: list[FieldError] = []
        if not spec.entrypoint.strip():
            errors.append(
                FieldError(
                    "spec.entrypoint",
                    "required field is missing: kubemill submits it to the cluster",
                    "give the command the Ray job runs, e.g. 'python script.py'",
                )
            )
        if spec.cluster_selector:
            return errors + self._selector_errors()
        if spec.ray_cluster_spec is None:
            errors.append(
                FieldError(
                    "spec.rayClusterSpec",
                    "required field is missing: the RayJob brings up its own cluster, "
                    "unless clusterSelector selects an existing one",
                    "give the cluster's headGroupSpec and workerGroupSpecs, or "
                    f"clusterSelector: {{{CLUSTER_KEY}: <a RayCluster's name>}}",
                )
            )
            return errors
        for error in self.cluster.kind_errors():
            path = error.path
            if path.startswith("spec."):
                path = "spec.rayClusterSpec." + path.removeprefix("spec.")
            errors.append(FieldError(path, error.message, error.hint))
        for i, group in enumerate(spec.ray_cluster_spec.worker_group_specs):
            if group.group_name == SUBMITTER.lower():
                errors.append(
                    FieldError(
                        f"spec.rayClusterSpec.workerGroupSpecs[{i}].groupName",
                        "'submitter' names the RayJob's submitter",
                        "call the group otherwise",
                    )
                )
        return errors + self._submitter_errors()

    def _selector_errors(self) -> list[FieldError]:
        """What KubeRay refuses with ``clusterSelector`` (its words), and a cluster spec
        beside it, which KubeRay would ignore."""
        spec = self.spec
        selector = spec.cluster_selector or {}
        errors: list[FieldError] = []
        if not self.selects:
            errors.append(
                FieldError(
                    f"spec.clusterSelector.{CLUSTER_KEY}",
                    "cluster name in ClusterSelector should not be empty",
                    f"select the RayCluster by its name: {CLUSTER_KEY}: <name>",
                )
            )
        for key in sorted(set(selector) - {CLUSTER_KEY}):
            errors.append(
                FieldError(
                    f"spec.clusterSelector.{key}",
                    f"KubeRay selects a cluster by {CLUSTER_KEY} alone, and would ignore it",
                    f"remove it; {CLUSTER_KEY} names the cluster",
                )
            )
        if spec.ray_cluster_spec is not None:
            errors.append(
                FieldError(
                    "spec.rayClusterSpec",
                    "a RayJob runs on the cluster clusterSelector selects, and KubeRay would "
                    "ignore this one",
                    "remove rayClusterSpec, or clusterSelector to bring up a cluster of its own",
                )
            )
        if spec.suspend:
            errors.append(
                FieldError(
                    "spec.suspend",
                    "the ClusterSelector mode doesn't support the suspend operation",
                    "remove suspend: a RayJob never suspends a cluster it did not create",
                )
            )
        if spec.backoff_limit:
            errors.append(
                FieldError(
                    "spec.backoffLimit",
                    "BackoffLimit is incompatible with ClusterSelector mode",
                    "remove backoffLimit (or set 0)",
                )
            )
        return errors + self._submitter_errors()

    def _submitter_errors(self) -> list[FieldError]:
        errors: list[FieldError] = []
        template = self.spec.submitter_pod_template
        if template is not None and not template.spec.containers:
            errors.append(
                FieldError(
                    "spec.submitterPodTemplate.spec.containers",
                    "at least one container is required",
                    "add the submitter's container (an image with Ray), or remove the template",
                )
            )
        return errors


RAYJOB = KindApi(
    model=RayJob,
    plural="rayjobs",
    short_names=("rayjob",),
    upstream=(API_VERSION,),
    categories=("kubemill", "all"),
    printer_columns=(
        PrinterColumn("Job Status", ".status.jobStatus"),
        PrinterColumn("Deployment Status", ".status.jobDeploymentStatus"),
        PrinterColumn("Ray Cluster Name", ".status.rayClusterName"),
        PrinterColumn("Start Time", ".status.startTime"),
        PrinterColumn("End Time", ".status.endTime"),
        AGE_COLUMN,
    ),
)
"""The RayJob kind: ``kubemill.dev/v1``, and KubeRay's ``ray.io/v1`` unchanged."""

__all__ = [
    "DEFAULT_SUBMITTER_BACKOFF",
    "HEAD",
    "RAYJOB",
    "SUBMISSION_FAILED",
    "SUBMITTER",
    "SUBMITTER_CONTAINER",
    "DeploymentStatus",
    "RayJob",
    "RayJobSpec",
    "RayJobState",
    "RayJobStatus",
    "RayJobStatusInfo",
    "SubmissionMode",
    "SubmitterConfig",
    "resources_of",
    "runtime_env_of",
]
