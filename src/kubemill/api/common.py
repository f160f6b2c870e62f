"""The vocabulary every job kind shares, named as in Kubeflow ``kubeflow.org/v1``.

``ReplicaSpec``, ``RunPolicy`` (with ``SchedulingPolicy``), ``JobStatus``, ``Condition``
and ``ReplicaStatus`` mean the same for every replica-set kind, Kubeflow's and those that follow, so
the core reconciler handles all of them with one set of rules. :class:`Job` is the base
of every kind and exposes what the frameworks and the core need without knowing the kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from kubemill.api.base import KubeModel, refused
from kubemill.api.errors import FieldError, child_path
from kubemill.api.kube import ObjectMeta, PodTemplateSpec

GROUP = "kubemill.dev"
"""Our own API group; upstream groups are accepted by the loader and mapped onto it."""
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

STOP_ANNOTATION = f"{GROUP}/stop"
"""Set on a job (any value: who asked, and why) to stop it for good: the core stops its
active replicas and records it Failed with reason ``Interrupted``. An annotation, not a spec
field, so that it survives on upstream-group objects whose schema kubemill does not own;
``kubemill interrupt`` / Ctrl-C during ``kubemill run`` set it on both substrates."""


class RestartPolicy(StrEnum):
    """What happens when a replica's process (pod) exits."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"
    """Exit codes 1-127 are permanent failures; 128 and above (signals) are retried."""


class CleanPodPolicy(StrEnum):
    """Which pods to delete once the job has finished."""

    NONE = "None"
    RUNNING = "Running"
    ALL = "All"


class ConditionType(StrEnum):
    """Job conditions, with upstream (Kubeflow) semantics."""

    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    READY = "Ready"
    """Service jobs only (a Mars cluster): enough replicas are up to serve; never Succeeded."""


class SchedulingPolicy(KubeModel):
    """Gang-scheduling settings, turned into a PodGroup on Kubernetes."""

    min_available: int | None = Field(default=None, ge=0)
    queue: str | None = None
    min_resources: dict[str, str | int] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = Field(default=None, ge=0)


MANAGED_BY_KUBEMILL = frozenset({"kubeflow.org/training-operator", "kubeflow.org/mpi-operator"})
"""``runPolicy.managedBy`` values that mean "the built-in controller": kubemill is that
(mpi-operator's own value for its jobs)."""


class RunPolicy(KubeModel):
    """How a job runs and ends; the same for every kind."""

    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    active_deadline_seconds: int | None = Field(default=None, ge=0)
    backoff_limit: int | None = Field(default=None, ge=0)
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = False
    managed_by: str | None = None
    """Which controller reconciles the job. kubemill stands in for the training operator,
    so only that value (or none) is accepted; handing a job to another controller
    (Kueue's MultiKueue) is refused rather than silently reconciled here too."""

    @field_validator("managed_by")
    @classmethod
    def _only_this_controller(cls, value: str | None) -> str | None:
        if value and value not in MANAGED_BY_KUBEMILL:
            raise refused(
                f"not supported: {value!r} names another controller, and kubemill "
                "reconciles every job it is given",
                "remove managedBy, or set it to "
                + " or ".join(repr(v) for v in sorted(MANAGED_BY_KUBEMILL)),
            )
        return value


MAX_REPLICAS = 10_000
"""The most replicas of one type a job may ask for: far above any real job, low enough
that a typo (``99999999999``) is refused when validated rather than planned into memory."""


class ReplicaSpec(KubeModel):
    """One replica type (Chief, Worker, PS, Master, ...): how many and what each runs."""

    replicas: int | None = Field(default=1, ge=0, le=MAX_REPLICAS)
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    restart_policy: RestartPolicy | None = None


class Condition(KubeModel):
    """One observed condition of a job."""

    type: ConditionType
    status: Literal["True", "False", "Unknown"] = "True"
    reason: str = ""
    message: str = ""
    last_update_time: datetime | None = None
    last_transition_time: datetime | None = None


class ReplicaStatus(KubeModel):
    """Counts of one replica type's pods."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0
    restarts: int = 0
    """Restarts counted against ``backoffLimit``: ``retiredRestarts`` plus the in-place
    restarts of this type's pods that still exist. kubemill only."""
    retired_restarts: int = 0
    """The part of ``restarts`` whose pods are gone: every recreation counts 1, plus the
    in-place restarts each deleted pod had (whatever it was deleted for). Kept because a
    pod's restart count disappears with it. kubemill only."""
    label_selector: dict[str, Any] | None = None
    selector: str | None = None


class Metric(KubeModel):
    """One scalar metric a job's program reported (Kubeflow Trainer v2's ``Metric``)."""

    name: str = Field(min_length=1, max_length=64)
    value: str = Field(min_length=1, max_length=64)
    """The number as text, as upstream serialises it."""


class TrainerStatus(KubeModel):
    """How far a job's program got, from its progress reports (:mod:`kubemill.progress`),
    in the shape of Kubeflow Trainer v2's ``status.trainerStatus``."""

    progress_percentage: int | None = Field(default=None, ge=0, le=100)
    estimated_remaining_seconds: int | None = Field(default=None, ge=0)
    metrics: list[Metric] = Field(default_factory=list, max_length=256)
    last_updated_time: datetime | None = None
    """When the program made the report shown (not when the status was written)."""
    step: int | None = Field(default=None, ge=0)
    """The step reported. kubemill only (upstream reports it as a metric, if at all)."""
    total: int | None = Field(default=None, ge=1)
    """The step at which the program is done. kubemill only."""


@dataclass(frozen=True)
class ConditionVocabulary:
    """How one kind words the core's conditions, declared by its engine on its status model
    (:attr:`JobStatus.VOCABULARY`). The core decides in its own words (:class:`ConditionType`)
    for every kind; a kind whose upstream words them otherwise declares the difference here:

    - :attr:`words`: the wire name of a condition whose name differs (a status is written
      with it and read back from it, so a round trip is exact);
    - :attr:`unused`: the conditions the kind does not have: the core never writes them
      (:func:`kubemill.core.conditions.set_condition`), so no reader ever meets them;
    - :attr:`reasons`: upstream's reason for a reason the core gives (the core's reason
      -> the kind's), applied by the core as it writes the condition.

    The job's phase (``JobStatus.phase``, what ``kubemill get`` and ``wait`` show) stays in
    the core's words for every kind: a finished job is ``Succeeded`` or ``Failed``.
    """

    words: Mapping[ConditionType, str] = field(default_factory=dict)
    unused: frozenset[ConditionType] = frozenset()
    reasons: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        wire = list(self.words.values())
        clashes = [w for w in wire if wire.count(w) > 1 or w in _CORE_WORDS]
        if clashes:
            # A wire word must name one condition only, or reading it back would guess.
            raise ValueError(f"condition words {sorted(set(clashes))} name two conditions")

    def wire_word(self, kind: str) -> str:
        """The wire name of the core's condition ``kind`` (its own value when unchanged)."""
        return self.words.get(ConditionType(kind), str(kind)) if self.words else str(kind)

    def wire_types(self) -> list[str]:
        """The wire names of every condition the kind has, in the core's order (a CRD's
        enum of ``status.conditions[].type``)."""
        return [self.wire_word(c.value) for c in ConditionType if c not in self.unused]

    def core_word(self, wire: str) -> str:
        """The core's name of a condition read as ``wire`` (unknown words are left as they
        are, for the model to refuse)."""
        for core, word in self.words.items():
            if word == wire:
                return core.value
        return wire


_CORE_WORDS = frozenset(c.value for c in ConditionType)
CORE_VOCABULARY = ConditionVocabulary()
"""The core's own words, unchanged: every kind's unless its status model says otherwise."""


class JobStatus(KubeModel):
    """The observed state of a job, as the status subresource carries it."""

    VOCABULARY: ClassVar[ConditionVocabulary] = CORE_VOCABULARY
    """How the kind words its conditions on the wire (see :class:`ConditionVocabulary`)."""

    conditions: list[Condition] = Field(default_factory=list)
    replica_statuses: dict[str, ReplicaStatus] = Field(default_factory=dict)
    start_time: datetime | None = None
    completion_time: datetime | None = None
    last_reconcile_time: datetime | None = None
    trainer_status: TrainerStatus | None = None
    """The program's latest progress report, if it reports any (written by the core)."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.VOCABULARY.words and not issubclass(cls, WordedStatus):
            # Renaming costs every write and read of a status: only a kind that renames pays.
            raise TypeError(f"{cls.__name__}: a status that renames conditions is a WordedStatus")

    def condition(self, kind: ConditionType) -> Condition | None:
        """The condition of this type, if the job has one."""
        for cond in self.conditions:
            if cond.type == kind:
                return cond
        return None

    def is_true(self, kind: ConditionType) -> bool:
        """Whether the condition of this type is present and True."""
        cond = self.condition(kind)
        return cond is not None and cond.status == "True"

    @property
    def finished(self) -> bool:
        """Succeeded or Failed: the terminal states."""
        return self.is_true(ConditionType.SUCCEEDED) or self.is_true(ConditionType.FAILED)

    @property
    def run_outcome(self) -> Literal["active", "succeeded", "failed"]:
        """What a controller that created this job makes of it (one of its runs): still
        active, or finished with a success or a failure (a failure wins)."""
        if self.is_true(ConditionType.FAILED):
            return "failed"
        if self.is_true(ConditionType.SUCCEEDED):
            return "succeeded"
        return "active"

    @property
    def phase(self) -> str:
        """One word for tables: the last True condition (Failed/Succeeded win), else Pending."""
        for terminal in (ConditionType.FAILED, ConditionType.SUCCEEDED):
            if self.is_true(terminal):
                return terminal.value
        true_ones = [c for c in self.conditions if c.status == "True"]
        return true_ones[-1].type.value if true_ones else "Pending"


class WordedStatus(JobStatus):
    """A status whose kind names some conditions its own way on the wire
    (:attr:`ConditionVocabulary.words`): written in the kind's words, read back into the
    core's. Only such a kind's status pays for the renaming."""

    @model_validator(mode="before")
    @classmethod
    def _read_in_core_words(cls, data: Any) -> Any:
        if not cls.VOCABULARY.words or not isinstance(data, dict):
            return data
        conditions = data.get("conditions")
        if not isinstance(conditions, list):
            return data
        read = [
            {**c, "type": cls.VOCABULARY.core_word(str(c.get("type")))}
            if isinstance(c, dict)
            else c
            for c in conditions
        ]
        return {**data, "conditions": read}

    @model_serializer(mode="wrap")
    def _write_in_kind_words(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        dumped = handler(self)
        vocabulary = type(self).VOCABULARY
        if not vocabulary.words or not isinstance(dumped, dict):
            return dumped
        conditions = dumped.get("conditions")
        if isinstance(conditions, list):
            dumped["conditions"] = [
                {**c, "type": vocabulary.wire_word(str(c["type"]))}
                if isinstance(c, dict) and "type" in c
                else c
                for c in conditions
            ]
        return dumped


class Job(KubeModel):
    """The base of every job kind. Subclasses set the ClassVars and ``replica_specs``."""

    KIND: ClassVar[str] = ""
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = ()
    """Canonical replica type names, in the order replicas are listed and started."""
    DEFAULT_CONTAINER: ClassVar[str] = ""
    """The container that gets the framework's environment (``tensorflow``, ``pytorch``).
    Empty for kinds that take the first container of each template (MPI's): see
    :meth:`main_container_name`. Such kinds have no framework port either."""
    DEFAULT_PORT_NAME: ClassVar[str] = ""
    DEFAULT_PORT: ClassVar[int] = 0
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    REPLICA_SPECS_FIELD: ClassVar[str] = ""
    """The wire name of the replica map (``tfReplicaSpecs``) for error paths."""
    DERIVED_REPLICA_SPECS: ClassVar[bool] = False
    """True for a kind whose :attr:`replica_specs` are derived from fields of its own
    (Spark's ``driver``/``executor``): the loader's replica-map checks would name fields
    the manifest does not have, so such a kind checks its fields in :meth:`kind_errors`."""
    SUSPEND_FIELD: ClassVar[tuple[str, ...]] = ("runPolicy", "suspend")
    """Where, under ``spec``, a manifest of the kind says the job is suspended (what
    ``kubemill suspend``/``resume`` patch): ``runPolicy.suspend``, or Spark's ``suspend``."""

    api_version: str = API_VERSION
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: JobStatus = Field(default_factory=JobStatus)

    @property
    def name(self) -> str:
        """The job's name (validated to be set by the loader)."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """The job's namespace, ``default`` when unset."""
        return self.metadata.namespace or "default"

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """Replica specs keyed by canonical replica type."""
        raise NotImplementedError

    @property
    def run_policy(self) -> RunPolicy:
        """The job's run policy (defaulted)."""
        raise NotImplementedError

    @classmethod
    def suspend_patch(cls, suspend: bool) -> dict[str, Any]:
        """The merge patch that suspends (``True``) or resumes a job of this kind."""
        patch: dict[str, Any] = {cls.SUSPEND_FIELD[-1]: suspend}
        for key in reversed(("spec", *cls.SUSPEND_FIELD[:-1])):
            patch = {key: patch}
        return patch

    def replica_count(self, replica_type: str) -> int:
        """How many replicas of a type the job asks for (0 if the type is absent)."""
        spec = self.replica_specs.get(replica_type)
        return 0 if spec is None or spec.replicas is None else spec.replicas

    def restart_policy(self, replica_type: str) -> RestartPolicy:
        """The (defaulted) restart policy of a replica type."""
        spec = self.replica_specs[replica_type]
        return spec.restart_policy or self.default_restart_policy(replica_type)

    def default_restart_policy(self, replica_type: str) -> RestartPolicy:
        """The restart policy a replica type gets when it names none (a kind whose types
        differ, e.g. MPI's Launcher, overrides this)."""
        return self.DEFAULT_RESTART_POLICY

    def main_container_name(self, replica_type: str) -> str:
        """The container of a replica type that gets the framework's environment: the
        one named :attr:`DEFAULT_CONTAINER`, or for kinds without one the template's
        first container ("" if the template has none, which validation reports)."""
        if self.DEFAULT_CONTAINER:
            return self.DEFAULT_CONTAINER
        containers = self.replica_specs[replica_type].template.spec.containers
        return containers[0].name if containers else ""

    def kind_errors(self) -> list[FieldError]:
        """Checks across fields that only this kind has (one chief, elastic bounds, ...).

        The loader runs them with the checks every kind shares; a kind overrides this.
        """
        return []

    def refused_fields(self) -> list[FieldError]:
        """Fields this job sets that kubemill would not honour, found across fields.

        The loader reports them with its other checks. (A field refused whatever else the
        job says is refused by its model's validator instead.) Today: a pod template
        ``restartPolicy`` that the replica's would replace. A pod runs with its replica
        type's policy, ``ExitCode`` as ``Never`` (the core decides those restarts: see
        :func:`kubemill.core.policy.pod_restart_policy`); upstream replaces the
        template's with only a warning event, so a template that disagrees is refused
        rather than silently overridden, and one that agrees is accepted.
        """
        errors: list[FieldError] = []
        field = f"spec.{self.REPLICA_SPECS_FIELD}"
        for rtype, spec in self.replica_specs.items():
            written = spec.template.spec.restart_policy
            policy = self.restart_policy(rtype) if rtype in self.REPLICA_TYPES else None
            if written is None or policy is None:
                continue
            runs_as = RestartPolicy.NEVER if policy is RestartPolicy.EXIT_CODE else policy
            if written == runs_as.value:
                continue
            replica = child_path(field, rtype)
            default = self.default_restart_policy(rtype)
            who = self.KIND if default is self.DEFAULT_RESTART_POLICY else f"{self.KIND} {rtype}"
            errors.append(
                FieldError(
                    f"{replica}.template.spec.restartPolicy",
                    f"{written!r} would be replaced by the replica's restartPolicy "
                    f"{policy.value!r}",
                    f"set {replica}.restartPolicy instead and remove this one; {who} "
                    f"replicas default to {default.value}",
                )
            )
        return errors

    _source_paths: Callable[[str], str] | None = PrivateAttr(default=None)

    def set_source_paths(self, mapper: Callable[[str], str]) -> None:
        """Remember how this model's field paths map onto the manifest the user wrote
        (the loader sets it for legacy versions, whose layout differs)."""
        self._source_paths = mapper

    def source_path(self, path: str) -> str:
        """Where the field at ``path`` of this model is in the manifest the user wrote, so
        errors found after loading (e.g. "not runnable locally") point at the user's text."""
        return self._source_paths(path) if self._source_paths is not None else path
