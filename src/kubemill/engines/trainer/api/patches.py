"""A TrainJob's ``runtimePatches``, as Kubeflow Trainer v2 defines them, and applying them.

A runtime patch is what a manager (the user, Kueue, an admission webhook: ``manager``) changes
in the runtime's template for one TrainJob, without a runtime of its own: per replicated job
(``trainingRuntimeSpec.template.spec.replicatedJobs[]``, by ``name``), its pods' labels and
annotations and a restricted part of their spec (service account, volumes, placement, security
context, pull secrets, scheduling gates, and per container by name its env, volume mounts
and security context). Patches apply in their order, each on top of the previous ones,
before the TrainJob's trainer and initializer values.

kubemill realises a patched pod template as it realises the same fields written in the
runtime (on Kubernetes passed to the pods; locally as any pod template, placement and
volumes having no local form). What kubemill cannot realise is refused at its field path:
the JobSet's and the Jobs' own metadata (kubemill creates neither object), a replicated job
or container the runtime lacks, and, as upstream refuses it, env on the containers the
TrainJob's ``trainer`` and ``initializer`` own.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel, refused
from kubemill.api.errors import FieldError
from kubemill.api.kube import Container, EnvVar, PodTemplateSpec

JSON = Any
OWNED_CONTAINERS = ("node", "dataset-initializer", "model-initializer")
"""Containers whose env only the TrainJob's ``trainer`` and ``initializer`` set (upstream)."""
PATH = "spec.runtimePatches"


class PatchMeta(KubeModel):
    """The metadata a patch may set on the pods: labels and annotations only."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class _ObjectMeta(KubeModel):
    """The labels and annotations of an object kubemill does not create (refused)."""

    OBJECT: ClassVar[str]

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    @field_validator("labels", "annotations")
    @classmethod
    def _nowhere_to_go(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return value
        raise refused(
            f"not supported: kubemill creates no {cls.OBJECT} (it runs the pods itself), "
            "so its metadata has nowhere to go",
            "patch the pods' labels and annotations: "
            "replicatedJobs[].template.spec.template.metadata",
        )


class JobSetMeta(_ObjectMeta):
    OBJECT: ClassVar[str] = "JobSet"


class JobMeta(_ObjectMeta):
    OBJECT: ClassVar[str] = "Job per replicated job"


class ContainerPatch(KubeModel):
    """One container of the runtime's pod template, by name."""

    name: str = Field(min_length=1, max_length=253)
    env: list[EnvVar] | None = Field(default=None, max_length=128)
    volume_mounts: list[JSON] | None = Field(default=None, max_length=128)
    security_context: JSON | None = None


class PodSpecPatch(KubeModel):
    """The pod spec fields a manager may patch."""

    service_account_name: str | None = Field(default=None, max_length=253)
    volumes: list[JSON] | None = Field(default=None, max_length=128)
    init_containers: list[ContainerPatch] | None = Field(default=None, max_length=64)
    containers: list[ContainerPatch] | None = Field(default=None, max_length=64)
    image_pull_secrets: list[JSON] | None = Field(default=None, max_length=64)
    security_context: JSON | None = None
    node_selector: dict[str, str] | None = None
    affinity: JSON | None = None
    tolerations: list[JSON] | None = Field(default=None, max_length=128)
    scheduling_gates: list[JSON] | None = Field(default=None, max_length=16)


class PodTemplatePatch(KubeModel):
    metadata: PatchMeta | None = None
    spec: PodSpecPatch | None = None


class JobSpecPatch(KubeModel):
    template: PodTemplatePatch | None = None


class JobTemplatePatch(KubeModel):
    metadata: JobMeta | None = None
    spec: JobSpecPatch | None = None


class ReplicatedJobPatch(KubeModel):
    name: str = Field(min_length=1, max_length=253)
    template: JobTemplatePatch | None = None


class JobSetSpecPatch(KubeModel):
    replicated_jobs: list[ReplicatedJobPatch] | None = Field(default=None, max_length=100)


class JobSetTemplatePatch(KubeModel):
    metadata: JobSetMeta | None = None
    spec: JobSetSpecPatch | None = None


class TrainingRuntimeSpecPatch(KubeModel):
    template: JobSetTemplatePatch | None = None


class RuntimePatch(KubeModel):
    """One manager's patch of the runtime's template."""

    manager: str = Field(min_length=1, max_length=253)
    time: str | None = None
    """When the patch was last written (upstream's webhook sets it; for people only)."""
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None

    def replicated_jobs(self) -> list[ReplicatedJobPatch]:
        spec = self.training_runtime_spec
        template = spec.template if spec is not None else None
        jobs = template.spec if template is not None else None
        return (jobs.replicated_jobs if jobs is not None else None) or []


def _job_path(index: int, job: int) -> str:
    return f"{PATH}[{index}].trainingRuntimeSpec.template.spec.replicatedJobs[{job}]"


def patch_errors(
    patches: list[RuntimePatch], templates: dict[str, PodTemplateSpec], main: dict[str, str]
) -> list[FieldError]:
    """What cannot be applied to the runtime's pod templates (by replicated job name): a
    manager twice, a replicated job or container the runtime lacks, env on a container the
    TrainJob's trainer or initializers own (upstream's rule) or on the one kubemill runs as
    the step (``main``, by replicated job name; locally the only container that runs, so a
    patch's env reaches side containers only, which run on Kubernetes alone)."""
    errors: list[FieldError] = []
    managers: set[str] = set()
    for i, patch in enumerate(patches):
        if patch.manager in managers:
            errors.append(
                FieldError(
                    f"{PATH}[{i}].manager",
                    f"{patch.manager!r} has a patch already (one patch per manager)",
                    "merge the two patches into one",
                )
            )
        managers.add(patch.manager)
        for j, job in enumerate(patch.replicated_jobs()):
            where = _job_path(i, j)
            template = templates.get(job.name)
            if template is None:
                errors.append(
                    FieldError(
                        f"{where}.name",
                        f"the runtime has no replicated job {job.name!r}",
                        "name one of " + ", ".join(templates),
                    )
                )
                continue
            spec = _pod_patch(job)
            pod = spec.spec if spec is not None else None
            if pod is None:
                continue
            for field, wire, have in (
                ("containers", "containers", template.spec.containers),
                ("init_containers", "initContainers", template.spec.init_containers or []),
            ):
                names = [c.name for c in have]
                for k, container in enumerate(getattr(pod, field) or []):
                    at = f"{where}.template.spec.template.spec.{wire}[{k}]"
                    if container.name not in names:
                        errors.append(
                            FieldError(
                                f"{at}.name",
                                f"replicated job {job.name!r} has no {wire[:-1]} "
                                f"{container.name!r}",
                                "name one of " + (", ".join(names) or "none: it has none"),
                            )
                        )
                    elif container.env and container.name in OWNED_CONTAINERS:
                        errors.append(
                            FieldError(
                                f"{at}.env",
                                f"the env of container {container.name!r} is the TrainJob's "
                                "to set, as upstream has it",
                                "set it in spec.trainer.env or spec.initializer.<dataset|"
                                "model>.env",
                            )
                        )
                    elif container.env and container.name == main.get(job.name):
                        errors.append(
                            FieldError(
                                f"{at}.env",
                                f"not supported: container {container.name!r} is the one "
                                f"kubemill runs as step {job.name!r}, whose env is the "
                                "runtime's and the TrainJob's",
                                "set it in the runtime's template or in spec.trainer.env",
                            )
                        )
    return errors


def _pod_patch(job: ReplicatedJobPatch) -> PodTemplatePatch | None:
    template = job.template
    spec = template.spec if template is not None else None
    return spec.template if spec is not None else None


def apply_patches(patches: list[RuntimePatch], name: str, template: PodTemplateSpec) -> None:
    """Apply, in order, what the patches say for replicated job ``name`` to its pod
    ``template`` (a copy of the runtime's), checked by :func:`patch_errors` first: maps
    merged by key, named lists by name, tolerations added, the rest replaced."""
    for patch in patches:
        for job in patch.replicated_jobs():
            pod_patch = _pod_patch(job) if job.name == name else None
            if pod_patch is None:
                continue
            if pod_patch.metadata is not None:
                template.metadata.labels.update(pod_patch.metadata.labels or {})
                template.metadata.annotations.update(pod_patch.metadata.annotations or {})
            if pod_patch.spec is not None:
                _apply_pod_spec(pod_patch.spec, template)


def _apply_pod_spec(patch: PodSpecPatch, template: PodTemplateSpec) -> None:
    spec = template.spec
    if patch.service_account_name is not None:
        spec.service_account_name = patch.service_account_name
    if patch.security_context is not None:
        spec.security_context = patch.security_context
    if patch.affinity is not None:
        spec.affinity = patch.affinity
    if patch.node_selector:
        spec.node_selector = {**(spec.node_selector or {}), **patch.node_selector}
    if patch.tolerations:
        spec.tolerations = [*(spec.tolerations or []), *patch.tolerations]
    for field in ("volumes", "image_pull_secrets", "scheduling_gates"):
        added = getattr(patch, field)
        if added:
            setattr(spec, field, _by_name(getattr(spec, field) or [], added))
    _apply_containers(patch.containers or [], spec.containers)
    _apply_containers(patch.init_containers or [], spec.init_containers or [])


def upsert_env(current: list[EnvVar], new: list[EnvVar]) -> list[EnvVar]:
    """``current`` with each of ``new`` set by name: replaced in place, or appended."""
    merged = {var.name: var for var in current}
    merged.update({var.name: var for var in new})
    return list(merged.values())


def _by_name(current: list[JSON], new: list[JSON]) -> list[JSON]:
    """``current`` with each of ``new`` set by its ``name``: replaced in place, or added."""
    merged = {item.get("name") if isinstance(item, dict) else None: item for item in current}
    merged.update({item.get("name") if isinstance(item, dict) else None: item for item in new})
    return list(merged.values())


def _apply_containers(patches: list[ContainerPatch], containers: list[Container]) -> None:
    by_name = {c.name: c for c in containers}
    for patch in patches:
        container = by_name.get(patch.name)
        if container is None:
            continue
        if patch.env:
            container.env = upsert_env(container.env or [], patch.env)
        if patch.volume_mounts:
            # A mount is one path: a patch's mount at a path the runtime mounts replaces it.
            paths = {m.get("mountPath") for m in patch.volume_mounts if isinstance(m, dict)}
            kept = [
                m
                for m in container.volume_mounts or []
                if not (isinstance(m, dict) and m.get("mountPath") in paths)
            ]
            container.volume_mounts = [*kept, *patch.volume_mounts]
        if patch.security_context is not None:
            container.security_context = patch.security_context


__all__ = [
    "OWNED_CONTAINERS",
    "ContainerPatch",
    "PodSpecPatch",
    "RuntimePatch",
    "apply_patches",
    "patch_errors",
    "upsert_env",
]
