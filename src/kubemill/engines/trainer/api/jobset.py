"""The JobSet template a training runtime holds (``jobset.x-k8s.io/v1alpha2``'s JobSetSpec),
as far as kubemill realises it.

kubemill runs no JobSet controller: it turns the template's replicated jobs into replicas
itself (:mod:`kubemill.engines.trainer.framework`). So every field of the JobSet and of its
batch Job templates is either honoured or refused here, at its field path, never silently
dropped. Honoured: each replicated job's ``name``, ``replicas``, ``dependsOn`` (checked by
the TrainJob against what the planner can order), its Job's ``parallelism``,
``completions``, ``completionMode`` and ``backoffLimit`` and pod template; the JobSet's
``successPolicy`` and ``network`` (every replica gets a stable host name, as JobSet's DNS
host names give; not-ready addresses are what kubemill's replica services publish
anyway). Refused: what needs JobSet's or the Job controller's own machinery (failure
policies and their rules, per-index backoff, start-up ordering, coordinators, TTLs,
another manager).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from kubemill.api.base import KubeModel, refused
from kubemill.api.kube import ObjectMeta, PodTemplateSpec

JSON = Any
_T = TypeVar("_T")


def _refuse_set(value: _T, what: str, hint: str) -> _T:
    """``value`` unchanged if unset, else the refusal naming what kubemill lacks."""
    if value is None:
        return value
    raise refused(f"not supported: {what}", hint)


class BatchJobSpec(KubeModel):
    """A replicated job's ``batch/v1`` Job spec: how many pods and what each runs."""

    parallelism: int | None = Field(default=None, ge=0)
    completions: int | None = Field(default=None, ge=0)
    completion_mode: Literal["Indexed", "NonIndexed"] | None = None
    """Every replica gets its index (kubemill's replicas are always indexed)."""
    backoff_limit: int | None = Field(default=None, ge=0)
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    active_deadline_seconds: int | None = None
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    pod_failure_policy: JSON | None = None
    success_policy: JSON | None = None
    ttl_seconds_after_finished: int | None = None
    suspend: bool | None = None
    pod_replacement_policy: str | None = None
    manual_selector: bool | None = None
    selector: JSON | None = None
    managed_by: str | None = None

    @field_validator("active_deadline_seconds")
    @classmethod
    def _no_job_deadline(cls, value: int | None) -> int | None:
        return _refuse_set(
            value,
            "a deadline per replicated job",
            "set the TrainJob's spec.activeDeadlineSeconds, which bounds the whole job",
        )

    @field_validator(
        "backoff_limit_per_index",
        "max_failed_indexes",
        "pod_failure_policy",
        "success_policy",
        "pod_replacement_policy",
    )
    @classmethod
    def _no_job_policies(cls, value: Any) -> Any:
        return _refuse_set(
            value,
            "the Job controller's per-index and pod-failure policies; kubemill judges "
            "every replica by its restart policy and backoffLimit",
            "remove it; backoffLimit bounds the restarts",
        )

    @field_validator("ttl_seconds_after_finished", "suspend", "manual_selector", "selector")
    @classmethod
    def _no_job_lifecycle(cls, value: Any) -> Any:
        return _refuse_set(
            value,
            "the TrainJob owns its replicas' lifecycle (suspend, deletion and selection)",
            "remove it; suspend the TrainJob with spec.suspend",
        )

    @field_validator("managed_by")
    @classmethod
    def _no_job_manager(cls, value: str | None) -> str | None:
        return _refuse_set(value, "another manager for a replicated job", "remove it")


class JobTemplateSpec(KubeModel):
    """A replicated job's Job template: labels (the ancestor step) and the Job spec."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: BatchJobSpec = Field(default_factory=BatchJobSpec)


class DependsOn(KubeModel):
    """A replicated job starts once another is Ready or Complete."""

    name: str = Field(min_length=1)
    status: Literal["Ready", "Complete"]


class ReplicatedJob(KubeModel):
    """One replicated job of the JobSet: ``replicas`` Jobs from one template."""

    name: str = Field(min_length=1, max_length=63)
    replicas: int = Field(default=1, ge=0)
    template: JobTemplateSpec = Field(default_factory=JobTemplateSpec)
    depends_on: list[DependsOn] | None = Field(default=None, max_length=1)
    group_name: str | None = None

    @field_validator("group_name")
    @classmethod
    def _no_groups(cls, value: str | None) -> str | None:
        return _refuse_set(value, "replicated job groups (JobSet's groupName)", "remove it")

    @property
    def pods(self) -> int:
        """How many pods the replicated job asks for: its Jobs times each one's pods."""
        per_job = self.template.spec.parallelism
        return self.replicas * (1 if per_job is None else per_job)


class JobSetNetwork(KubeModel):
    """JobSet's DNS settings; kubemill's replicas have stable host names either way."""

    enable_dns_hostnames: bool | None = Field(default=None, alias="enableDNSHostnames")
    subdomain: str | None = None
    publish_not_ready_addresses: bool | None = None

    @field_validator("enable_dns_hostnames")
    @classmethod
    def _hostnames_always(cls, value: bool | None) -> bool | None:
        if value is False:
            raise refused(
                "not supported: every replica gets a stable host name",
                "remove it (or set it to true)",
            )
        return value

    @field_validator("subdomain")
    @classmethod
    def _own_subdomain(cls, value: str | None) -> str | None:
        return _refuse_set(
            value,
            "a subdomain of your own; kubemill names its replicas' hosts itself",
            "remove it",
        )


class JobSetSuccessPolicy(KubeModel):
    """When the JobSet succeeds: all (or any) Jobs of the target replicated jobs succeed."""

    operator: Literal["All", "Any"]
    target_replicated_jobs: list[str] | None = None


class JobSetSpec(KubeModel):
    """The JobSet a runtime's template describes."""

    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list, max_length=50)
    network: JobSetNetwork | None = None
    success_policy: JobSetSuccessPolicy | None = None
    failure_policy: JSON | None = None
    startup_policy: JSON | None = None
    suspend: bool | None = None
    coordinator: JSON | None = None
    managed_by: str | None = None
    ttl_seconds_after_finished: int | None = None

    @field_validator("replicated_jobs")
    @classmethod
    def _unique_names(cls, value: list[ReplicatedJob]) -> list[ReplicatedJob]:
        names = [job.name for job in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise PydanticCustomError(
                "kubemill_invalid",
                f"replicated job names must be unique: {', '.join(twice)} appear twice",
                {"hint": "rename one of them"},
            )
        return value

    @field_validator("failure_policy", "startup_policy", "coordinator")
    @classmethod
    def _no_jobset_policies(cls, value: Any) -> Any:
        return _refuse_set(
            value,
            "JobSet's failure, start-up and coordinator policies; kubemill judges the "
            "replicas itself (any replica failing for good fails the TrainJob)",
            "remove it",
        )

    @field_validator("suspend", "managed_by", "ttl_seconds_after_finished")
    @classmethod
    def _no_jobset_lifecycle(cls, value: Any) -> Any:
        return _refuse_set(
            value,
            "the TrainJob owns the lifecycle the JobSet would have",
            "remove it; suspend the TrainJob with spec.suspend",
        )

    def replicated_job(self, name: str) -> ReplicatedJob | None:
        """The replicated job of this name, if the template has one."""
        return next((job for job in self.replicated_jobs if job.name == name), None)


class JobSetTemplateSpec(KubeModel):
    """A runtime's ``template``: the JobSet's labels and annotations, and its spec."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSetSpec = Field(default_factory=JobSetSpec)


__all__ = [
    "BatchJobSpec",
    "DependsOn",
    "JobSetNetwork",
    "JobSetSpec",
    "JobSetSuccessPolicy",
    "JobSetTemplateSpec",
    "JobTemplateSpec",
    "ReplicatedJob",
]
