"""The TrainJob (``trainer.kubeflow.org/v1alpha1``), field for field as Kubeflow Trainer v2
defines it, and what it stands for once its runtime is resolved.

A TrainJob is thin: it names a runtime (``spec.runtimeRef``) and says what differs (the
trainer's image, command, args, env, nodes, resources and processes per node; the
initializers' storage URIs, env and secrets). Its replicas are the runtime's replicated
jobs, one replica type each (:data:`STEPS`), with the TrainJob's values applied as upstream
applies them: the runtime patches first (:mod:`.patches`), then the trainer's to the
container named ``node`` of the replicated job labelled as the trainer step, env merged by
name (:attr:`TrainJob.replica_specs`). Its run policy is
derived too (:attr:`TrainJob.run_policy`). The runtime comes from the cluster-less registry
(:mod:`.runtimes`); a TrainJob whose runtime is unknown, or uses what kubemill does not run
yet, is refused at ``spec.runtimeRef`` with the runtime's own field path in the message.

Upstream's conditions are ``Suspended``, ``Complete`` and ``Failed``, with its reasons
(:data:`.spec.REASONS`): the status model declares them (:data:`.spec.VOCABULARY`) and the
core writes them so (``Complete`` for its Succeeded, no Created/Running/Restarting).
``status.jobsStatus`` is filled by the planner's status extension, one entry per
replicated job.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, PrivateAttr, model_validator

from kubemill.api.common import (
    CleanPodPolicy,
    Job,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
)
from kubemill.api.errors import FieldError
from kubemill.api.kube import ContainerPort, EnvVar, PodTemplateSpec
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.defaults import ANCESTOR_LABEL
from kubemill.engines.trainer.api.jobset import ReplicatedJob
from kubemill.engines.trainer.api.patches import apply_patches, patch_errors, upsert_env
from kubemill.engines.trainer.api.policies import (
    JAX_PORT,
    JAX_RESERVED_ENV,
    POLICY_PORTS,
    RESERVED_ENV,
    RUN_POLICIES,
    TORCH_RESERVED_ENV,
    TRAINER_PORT,
    XGBOOST_RESERVED_ENV,
)
from kubemill.engines.trainer.api.runtime import NUM_PROC_WORDS, TrainingRuntime
from kubemill.engines.trainer.api.spec import (
    DatasetInitializer,
    ModelInitializer,
    Trainer,
    TrainJobSpec,
    TrainJobStatus,
)
from kubemill.engines.trainer.api.steps import (
    DATASET_INITIALIZER,
    JOB_RESTART_POLICIES,
    LAUNCHER,
    MODEL_INITIALIZER,
    MPI_NODES,
    NODE,
    STEPS,
    TRAINER_NODE,
    runtime_errors,
    start_stages,
)

TRAINER_STEP = "trainer"
"""The ancestor label's value on the replicated job the trainer's values apply to."""
TRAINER_CONTAINER = "node"
TRAINER_PORT_NAME = "trainjob-port"
DEFAULT_BACKOFF_LIMIT = 6
"""A batch Job's backoffLimit when its template names none."""
STORAGE_URI = "STORAGE_URI"
"""The variable an initializer reads its ``storageUri`` from (upstream's initializers)."""
_RUNTIME_PATH = "spec.runtimeRef.name"
_DERIVED_PATH = re.compile(
    r"^spec\.runtimeRef\.(?P<step>[a-z0-9-]+)\.template\.spec\.containers\[(?P<container>\d+)\]"
    r"(?P<rest>.*)$"
)
_ENV_ITEM = re.compile(r"^\.env\[(?P<index>\d+)\](?P<tail>.*)$")
_FIELD_SOURCES = {
    ".image": ("image", "image", True),
    ".command": ("command", "command", True),
    ".args": ("args", "args", True),
    ".resources": ("resources_per_node", "resourcesPerNode", True),
    ".envFrom": ("secret_ref", "secretRef.name", False),
}
"""A container's field -> (the TrainJob's field that set it, its wire name, whether the
rest of the path carries over)."""


class TrainJob(Job):
    """A training job whose replicas come from a training runtime."""

    KIND: ClassVar[str] = "TrainJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = STEPS
    DEFAULT_CONTAINER: ClassVar[str] = ""
    """Each step's own container (see :meth:`main_container_name`)."""
    DEFAULT_PORT_NAME: ClassVar[str] = TRAINER_PORT_NAME
    DEFAULT_PORT: ClassVar[int] = TRAINER_PORT
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ON_FAILURE
    """JobSet's default for a pod template that names no restart policy."""
    REPLICA_SPECS_FIELD: ClassVar[str] = "runtimeRef"
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True
    SUSPEND_FIELD: ClassVar[tuple[str, ...]] = ("suspend",)

    kind: str = "TrainJob"
    spec: TrainJobSpec
    status: TrainJobStatus = Field(default_factory=TrainJobStatus)

    _runtime: TrainingRuntime | None = PrivateAttr(default=None)
    _specs: dict[str, ReplicaSpec] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _defaults(self) -> TrainJob:
        if self.spec.suspend is None:
            self.spec.suspend = False
        return self

    # --- the runtime ----------------------------------------------------------------------

    @property
    def runtime(self) -> TrainingRuntime | None:
        """The runtime ``spec.runtimeRef`` names, from the registry (None if unknown)."""
        if self._runtime is None:
            ref = self.spec.runtime_ref
            self._runtime = runtimes.find(ref.runtime_kind, ref.name, self.namespace)
        return self._runtime

    def trainer_job(self) -> ReplicatedJob | None:
        """The runtime's replicated job of the trainer step: labelled so, else ``node``."""
        runtime = self.runtime
        if runtime is None:
            return None
        jobs = runtime.spec.template.spec.replicated_jobs
        labelled = [
            j for j in jobs if j.template.metadata.labels.get(ANCESTOR_LABEL) == TRAINER_STEP
        ]
        if labelled:
            return labelled[0]
        # The mpi policy's trainer is its launcher (mpirun), unless the runtime says else.
        wanted = LAUNCHER if self.framework == "mpi" else NODE
        return next((j for j in jobs if j.name == wanted), None)

    def mpi_nodes_job(self) -> ReplicatedJob | None:
        """Under the mpi policy, the replicated job of the hosts mpirun reaches."""
        runtime = self.runtime
        if runtime is None or self.framework != "mpi":
            return None
        jobs = runtime.spec.template.spec.replicated_jobs
        return next((j for j in jobs if j.name in MPI_NODES), None)

    @property
    def mpi_nodes(self) -> int:
        """The hosts' replicas: ``numNodes``, less the launcher when it runs ranks too
        (``runLauncherAsNode``), at least 1, as upstream's mpi plugin counts them."""
        runtime = self.runtime
        policy = runtime.spec.ml_policy if runtime is not None else None
        mpi = policy.mpi if policy is not None else None
        if mpi is not None and mpi.run_launcher_as_node:
            return max(self.num_nodes - 1, 1)
        return self.num_nodes

    def trainer_container(self, job: ReplicatedJob) -> str | None:
        """The container of the trainer step the TrainJob's trainer applies to: ``node``,
        else (an mpi launcher) ``launcher``."""
        names = [c.name for c in job.template.spec.template.spec.containers]
        if TRAINER_CONTAINER in names:
            return TRAINER_CONTAINER
        if job.name == LAUNCHER and LAUNCHER in names:
            return LAUNCHER
        return None

    @property
    def num_nodes(self) -> int:
        """Training nodes: the trainer's ``numNodes``, else the ML policy's, else 1."""
        trainer = self.spec.trainer
        if trainer is not None and trainer.num_nodes is not None:
            return trainer.num_nodes
        runtime = self.runtime
        policy = runtime.spec.ml_policy if runtime is not None else None
        if policy is not None and policy.num_nodes is not None:
            return policy.num_nodes
        return 1

    @property
    def framework(self) -> str | None:
        """The runtime's ML policy's framework (``torch``, ``mpi``, ...), if any."""
        runtime = self.runtime
        policy = runtime.spec.ml_policy if runtime is not None else None
        return policy.framework if policy is not None else None

    # --- what the core and the substrates read ----------------------------------------------

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """One replica type per replicated job of the runtime, with the TrainJob's values
        applied; empty when the runtime is unknown (validation says so)."""
        if self._specs is None:
            self._specs = self._derive_specs()
        return self._specs

    def _derive_specs(self) -> dict[str, ReplicaSpec]:
        runtime = self.runtime
        if runtime is None:
            return {}
        trainer_job = self.trainer_job()
        specs: dict[str, ReplicaSpec] = {}
        for job in runtime.spec.template.spec.replicated_jobs:
            if job.name not in STEPS:
                continue
            template = job.template.spec.template.model_copy(deep=True)
            apply_patches(self.spec.runtime_patches or [], job.name, template)
            count = job.pods
            if job is self.mpi_nodes_job():
                count = self.mpi_nodes
            elif job is trainer_job and not (self.framework == "mpi" and job.name == LAUNCHER):
                count = self.num_nodes
            if job is trainer_job:
                self._apply_trainer(template, self.trainer_container(job))
            if job.name in (DATASET_INITIALIZER, MODEL_INITIALIZER):
                self._apply_initializer(job.name, template)
            written = template.spec.restart_policy
            policy = JOB_RESTART_POLICIES.get(written or "", self.DEFAULT_RESTART_POLICY)
            specs[job.name] = ReplicaSpec(replicas=count, template=template, restart_policy=policy)
        return specs

    def _apply_trainer(self, template: PodTemplateSpec, name: str | None) -> None:
        for container in template.spec.containers:
            if container.name != name:
                continue
            trainer = self.spec.trainer
            if trainer is not None:
                if trainer.image is not None:
                    container.image = trainer.image
                if trainer.command is not None:
                    container.command = list(trainer.command)
                if trainer.args is not None:
                    container.args = list(trainer.args)
                if trainer.env:
                    container.env = upsert_env(container.env or [], trainer.env)
                if trainer.resources_per_node is not None:
                    container.resources = dict(trainer.resources_per_node)
            port = POLICY_PORTS.get(self.framework or "")
            if port is not None:
                ports = container.ports or []
                if not any(p.container_port == port for p in ports):
                    ports.append(ContainerPort(name=TRAINER_PORT_NAME, container_port=port))
                container.ports = ports

    def _apply_initializer(self, step: str, template: PodTemplateSpec) -> None:
        initializer = self.spec.initializer
        settings = None
        if initializer is not None:
            settings = initializer.dataset if step == DATASET_INITIALIZER else initializer.model
        if settings is None:
            return
        for container in template.spec.containers:
            if container.name != step:
                continue
            extra = list(settings.env or [])
            if settings.storage_uri is not None:
                extra.append(EnvVar(name=STORAGE_URI, value=settings.storage_uri))
            container.env = upsert_env(container.env or [], extra)
            if settings.secret_ref is not None and settings.secret_ref.name:
                container.env_from = [
                    *(container.env_from or []),
                    {"secretRef": {"name": settings.secret_ref.name}},
                ]

    def main_container_name(self, replica_type: str) -> str:
        """The step's container: ``node`` where the template has one (the trainer's, and
        upstream's launcher's), else the one named after the step, else the first."""
        containers = self.replica_specs[replica_type].template.spec.containers
        names = [c.name for c in containers]
        for wanted in (TRAINER_CONTAINER, replica_type):
            if wanted in names:
                return wanted
        return names[0] if names else ""

    def source_path(self, path: str) -> str:
        """Where a problem found in a derived replica (a local refusal, at
        ``spec.runtimeRef.<step>.template.spec.containers[i]...``) is in the TrainJob the
        user wrote: the trainer's or an initializer's field that put the value there, else
        the runtime reference (the value is the runtime's)."""
        match = _DERIVED_PATH.match(path)
        if match is None or match["step"] not in self.replica_specs:
            return path
        containers = self.replica_specs[match["step"]].template.spec.containers
        index = int(match["container"])
        if index >= len(containers):
            return _RUNTIME_PATH
        container = containers[index]
        owner, values = self._owner_of(match["step"], container.name)
        rest = match["rest"]
        if owner is None or values is None:
            return _RUNTIME_PATH
        env = _ENV_ITEM.match(rest)
        if env is not None:
            items = container.env or []
            name = items[int(env["index"])].name if int(env["index"]) < len(items) else ""
            written = [var.name for var in values.env or []]
            if name in written:
                return f"{owner}.env[{written.index(name)}]{env['tail']}"
            storage = getattr(values, "storage_uri", None)
            if name == STORAGE_URI and storage is not None:
                return f"{owner}.storageUri"
            return _RUNTIME_PATH
        for part, (field, wire, keep_tail) in _FIELD_SOURCES.items():
            under = rest == part or rest.startswith((part + ".", part + "["))
            if under and getattr(values, field, None) is not None:
                return f"{owner}.{wire}" + (rest[len(part) :] if keep_tail else "")
        return _RUNTIME_PATH

    def _owner_of(
        self, step: str, container: str
    ) -> tuple[str | None, Trainer | DatasetInitializer | ModelInitializer | None]:
        """The TrainJob field whose values a step's container carries, and those values."""
        trainer_job = self.trainer_job()
        if (
            trainer_job is not None
            and step == trainer_job.name
            and container == self.trainer_container(trainer_job)
        ):
            return "spec.trainer", self.spec.trainer
        initializer = self.spec.initializer
        if initializer is not None and container == step:
            if step == DATASET_INITIALIZER:
                return "spec.initializer.dataset", initializer.dataset
            if step == MODEL_INITIALIZER:
                return "spec.initializer.model", initializer.model
        return None, None

    @property
    def run_policy(self) -> RunPolicy:
        """The shared run policy the TrainJob and its runtime stand for: ``suspend`` and
        ``activeDeadlineSeconds`` from the TrainJob, ``backoffLimit`` from the trainer
        step's Job (6 as a batch Job defaults it), gang scheduling from the runtime's
        PodGroup policy (every pod at once); pods are kept once finished."""
        trainer_job = self.trainer_job()
        backoff = trainer_job.template.spec.backoff_limit if trainer_job is not None else None
        return RunPolicy(
            clean_pod_policy=CleanPodPolicy.NONE,
            active_deadline_seconds=self.spec.active_deadline_seconds,
            backoff_limit=DEFAULT_BACKOFF_LIMIT if backoff is None else backoff,
            scheduling_policy=self.scheduling_policy,
            suspend=bool(self.spec.suspend),
        )

    @property
    def scheduling_policy(self) -> SchedulingPolicy | None:
        """A PodGroup of every replica when the runtime asks for gang scheduling."""
        runtime = self.runtime
        policy = runtime.spec.pod_group_policy if runtime is not None else None
        if policy is None or (policy.coscheduling is None and policy.volcano is None):
            return None
        total = sum(spec.replicas or 0 for spec in self.replica_specs.values())
        timeout = policy.coscheduling.schedule_timeout_seconds if policy.coscheduling else None
        return SchedulingPolicy(min_available=total, schedule_timeout_seconds=timeout)

    # --- validation -------------------------------------------------------------------------

    def kind_errors(self) -> list[FieldError]:
        """The runtime exists and uses only what kubemill runs; the TrainJob's values fit it."""
        ref = self.spec.runtime_ref
        runtime = self.runtime
        if runtime is None:
            names = runtimes.known(ref.runtime_kind, self.namespace)
            return [
                FieldError(
                    "spec.runtimeRef.name",
                    f"no {ref.runtime_kind} named {ref.name!r} is known",
                    "kubemill knows "
                    + (", ".join(names) if names else "none of this kind")
                    + "; give its manifest with --runtime FILE (kubemill run, validate,"
                    " render) or in the config file's runtimes: list; on a cluster, apply it"
                    " (kubectl apply -f FILE)",
                )
            ]
        errors = runtime_errors(runtime, ref.name)
        templates = {
            job.name: job.template.spec.template
            for job in runtime.spec.template.spec.replicated_jobs
            if job.name in STEPS
        }
        main = {step: self.main_container_name(step) for step in self.replica_specs}
        errors += patch_errors(self.spec.runtime_patches or [], templates, main)
        errors += self._trainer_errors(runtime)
        errors += self._initializer_errors()
        errors += self._name_errors()
        return errors

    def refused_fields(self) -> list[FieldError]:
        """Nothing beyond :meth:`kind_errors`: a step's restart policy is its template's."""
        return []

    def _trainer_errors(self, runtime: TrainingRuntime) -> list[FieldError]:
        trainer = self.spec.trainer
        errors: list[FieldError] = []
        trainer_job = self.trainer_job()
        where = f"{runtime.kind} {runtime.name}"
        if trainer_job is None:
            return [
                FieldError(
                    "spec.runtimeRef.name",
                    f"{where} has no trainer step (a replicated job labelled "
                    f"{ANCESTOR_LABEL}: {TRAINER_STEP}, or named {NODE})",
                    "name a runtime with a trainer step",
                )
            ]
        if trainer is not None and self.trainer_container(trainer_job) is None:
            errors.append(
                FieldError(
                    "spec.trainer",
                    f"{where}'s trainer step {trainer_job.name!r} has no container named "
                    f"{TRAINER_CONTAINER!r} to apply it to",
                    f"name the trainer container {TRAINER_CONTAINER!r} in the runtime",
                )
            )
        if trainer is None:
            return errors
        reserved = RESERVED_ENV.get(self.framework or "", frozenset())
        for i, var in enumerate(trainer.env or []):
            if var.name in reserved:
                errors.append(
                    FieldError(
                        f"spec.trainer.env[{i}].name",
                        f"{var.name} is set by the {self.framework} policy",
                        "remove it; use numNodes (and numProcPerNode)",
                    )
                )
        if self.framework != "torch" and trainer.num_proc_per_node in NUM_PROC_WORDS:
            errors.append(
                FieldError(
                    "spec.trainer.numProcPerNode",
                    f"{trainer.num_proc_per_node!r} is for the torch policy only",
                    "give a number",
                )
            )
        return errors

    def _initializer_errors(self) -> list[FieldError]:
        initializer = self.spec.initializer
        if initializer is None:
            return []
        errors: list[FieldError] = []
        for field, step, settings in (
            ("dataset", DATASET_INITIALIZER, initializer.dataset),
            ("model", MODEL_INITIALIZER, initializer.model),
        ):
            if settings is not None and step not in self.replica_specs:
                errors.append(
                    FieldError(
                        f"spec.initializer.{field}",
                        f"the runtime has no {step!r} step to apply it to",
                        f"remove it, or name a runtime with a {step} replicated job",
                    )
                )
        return errors

    def _name_errors(self) -> list[FieldError]:
        name = self.metadata.name or ""
        longest = max(
            (
                f"{name}-{step}-{spec.replicas - 1}"
                for step, spec in self.replica_specs.items()
                if spec.replicas
            ),
            key=len,
            default="",
        )
        if len(longest) <= 63:
            return []
        return [
            FieldError(
                "metadata.name",
                f"pod name {longest!r} would be {len(longest)} characters, over the 63 allowed",
                f"shorten the name to at most {63 - len(longest) + len(name)} characters",
            )
        ]


__all__ = [
    "DATASET_INITIALIZER",
    "JAX_PORT",
    "JAX_RESERVED_ENV",
    "LAUNCHER",
    "MODEL_INITIALIZER",
    "NODE",
    "POLICY_PORTS",
    "RUN_POLICIES",
    "STEPS",
    "TORCH_RESERVED_ENV",
    "TRAINER_CONTAINER",
    "TRAINER_NODE",
    "TRAINER_PORT",
    "XGBOOST_RESERVED_ENV",
    "TrainJob",
    "start_stages",
    "upsert_env",
]
