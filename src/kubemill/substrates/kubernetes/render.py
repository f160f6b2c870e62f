"""``kubemill render``: every object the operator creates for a job when it starts.

Nothing is decided here. The render drives the same pure reconcile the operator runs
(:func:`kubemill.core.reconcile`) from an empty cluster, pretending each created pod comes
up Running and each PodGroup is admitted, until the reconcile asks to create nothing more;
every create action it emitted on the way is built by the same :mod:`.build` functions the
operator calls, from the same Plan (:func:`kubemill.kinds.plan_for` with a
:class:`.network.KubernetesNetwork`). So an ordered start (later stages wait for earlier
ones), a volcano PodGroup that pods wait for, or a suspended job (nothing at all) render
exactly as the operator would create them.

A controller (a Spark schedule) creates no pods: its render is the runs the
operator creates on its first pass that creates any (decided by the same rules of the
registry, a schedule's when it is next due), each followed by that run's own objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import IO, Any, cast

import yaml

from kubemill.api import Job
from kubemill.core import (
    Action,
    ChildKind,
    ControllerContext,
    CreateChild,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRun,
    CreateService,
    Observed,
    ObservedChild,
    ObservedPod,
    ObservedPodGroup,
    ReconcileOptions,
    WriteFiles,
    reconcile,
)
from kubemill.frameworks import Plan
from kubemill.kinds import controller_for, is_controller, lifecycle_for, plan_for
from kubemill.substrates.kubernetes.build import (
    GangScheduler,
    UnsupportedPlanError,
    build_for_action,
    gang_scheduler,
)
from kubemill.substrates.kubernetes.network import KubernetesNetwork
from kubemill.substrates.kubernetes.progress import PROGRESS_PORT, ProgressSidecar
from kubemill.substrates.kubernetes.zones import resolve_zone

REDACTED_ANNOTATION = "kubemill.dev/redacted"
"""Marks a Secret whose values ``render`` left out (``--show-secrets`` shows them)."""

_CREATES = (CreatePod, CreateService, CreatePodGroup, WriteFiles, CreateChild, CreateObject)


class RenderError(RuntimeError):
    """The reconcile kept asking for new objects: a bug, reported instead of looping."""


def plan_on_kubernetes(job: Job) -> Plan:
    """The job's Plan with Kubernetes addresses (``<job>-<type>-<i>.<ns>.svc``)."""
    return plan_for(job, KubernetesNetwork(job.name, job.namespace))


def reconcile_options(gang: GangScheduler | None) -> ReconcileOptions:
    """The core's options for an operator running with ``gang``."""
    return ReconcileOptions(gang_scheduler=gang.kind.value if gang is not None else None)


def default_install_progress() -> ProgressSidecar:
    """The progress sidecar job pods get from an operator ``kubemill install`` put in place
    with its defaults (its image, namespace and Service)."""
    from kubemill.substrates.kubernetes.install.names import DEFAULT_IMAGE, DEFAULT_NAMESPACE, NAME

    return ProgressSidecar.in_cluster(
        DEFAULT_IMAGE, service=NAME, namespace=DEFAULT_NAMESPACE, port=PROGRESS_PORT
    )


def render_job(
    job: Job,
    *,
    namespace: str | None = None,
    gang_scheduler: str | GangScheduler | None = None,
    now: datetime | None = None,
    show_secrets: bool = False,
    progress: ProgressSidecar | None = None,
) -> list[dict[str, Any]]:
    """Every object the operator creates for ``job`` as it starts, in creation order.

    ``namespace`` overrides the job's own (``default`` when the manifest names none);
    ``gang_scheduler`` is ``volcano``, ``scheduler-plugins`` or a scheduler-plugins
    profile name, as the operator's ``--gang-scheduler-name``. Secrets (SSH keys, tokens)
    keep their keys but not their values unless ``show_secrets``: the only difference from
    what the operator sends, marked with the ``kubemill.dev/redacted`` annotation.
    ``progress``: the progress sidecar an operator with a progress endpoint adds to pods.
    """
    if namespace is not None and namespace != job.namespace:
        job = job.model_copy(deep=True)
        job.metadata.namespace = namespace
    if is_controller(job.KIND):
        return render_controller(
            job,
            gang_scheduler=gang_scheduler,
            now=now,
            show_secrets=show_secrets,
            progress=progress,
        )
    gang = _gang(gang_scheduler)
    plan = plan_on_kubernetes(job)
    objects = []
    for action in start_actions(job, plan, gang=gang, now=now):
        built = build_for_action(job, plan, action, gang=gang, progress=progress)
        if built is not None:
            objects.append(built if show_secrets else redact(built))
    return objects


def render_controller(
    controller: Job,
    *,
    gang_scheduler: str | GangScheduler | None = None,
    now: datetime | None = None,
    show_secrets: bool = False,
    progress: ProgressSidecar | None = None,
) -> list[dict[str, Any]]:
    """The runs the operator creates for ``controller`` on its first pass that creates any
    (now, or when it next wakes: a schedule's next due time), then what each run creates;
    nothing while it creates none (a suspended schedule). A controller that cannot be in
    force (an unknown time zone) is an :class:`UnsupportedPlanError` saying why."""
    rules = controller_for(controller.KIND).rules
    context = ControllerContext(zone_of=resolve_zone)
    moment = now or datetime.now(UTC)
    result = rules.decide(controller, [], now=moment, context=context)
    if result.refusal is not None:
        raise UnsupportedPlanError(result.refusal)
    if not any(isinstance(a, CreateRun) for a in result.actions) and result.wake_at is not None:
        woken = controller.model_copy(update={"status": result.status})
        result = rules.decide(woken, [], now=result.wake_at, context=context)
    objects: list[dict[str, Any]] = []
    for action in result.actions:
        if isinstance(action, CreateRun):
            body = action.run.to_wire()
            body.pop("status", None)
            objects.append(body)
            objects += render_job(
                action.run,
                gang_scheduler=gang_scheduler,
                now=now,
                show_secrets=show_secrets,
                progress=progress,
            )
    return objects


def redact(obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret without its values (keys kept, values empty); anything else unchanged."""
    if obj.get("kind") != "Secret" or not obj.get("data"):
        return obj
    metadata = dict(obj["metadata"])
    annotations = dict(metadata.get("annotations", {}))
    annotations[REDACTED_ANNOTATION] = "data values left out; render with --show-secrets"
    metadata["annotations"] = annotations
    return {**obj, "metadata": metadata, "data": dict.fromkeys(obj["data"], "")}


def _gang(value: str | GangScheduler | None) -> GangScheduler | None:
    return gang_scheduler(value)


def start_actions(
    job: Job, plan: Plan, *, gang: GangScheduler | None, now: datetime | None = None
) -> list[Action]:
    """The create actions the reconcile emits while the job starts up, in order."""
    now = now or datetime.now(UTC)
    options = reconcile_options(gang)
    observed = Observed()
    creates: list[Action] = []
    # Each pass can only unblock the next start stage, so this bound is never reached
    # unless the reconcile misbehaves.
    for _ in range(len(plan.replicas) + 3):
        result = reconcile(
            job, plan, observed, now, options=options, lifecycle=lifecycle_for(job.KIND)
        )
        new = [a for a in result.actions if isinstance(a, _CREATES)]
        if not new:
            return creates
        for action in new:
            if isinstance(action, WriteFiles) and action.update:
                # Files listing the running replicas are rewritten as they come up: show
                # the content they settle on, where the object was first created.
                creates = [
                    action if isinstance(a, WriteFiles) and a.name == action.name else a
                    for a in creates
                ]
            else:
                creates.append(action)
        observed = _as_if_created(observed, plan, new)
        job = job.model_copy(update={"status": result.status})
    raise RenderError(f"{plan.kind} {plan.name}: the reconcile did not settle while starting")


def _as_if_created(observed: Observed, plan: Plan, actions: Iterable[Action]) -> Observed:
    """What the operator would observe once the actions took effect and the pods came up."""
    pods = list(observed.pods)
    services = set(observed.services)
    group = observed.pod_group
    children = list(observed.children)
    for action in actions:
        if isinstance(action, CreatePod):
            rep = plan.replica(action.name)
            pods.append(
                ObservedPod(
                    name=rep.name,
                    replica_type=rep.replica_type,
                    index=rep.index,
                    phase="Running",
                    ready=True,
                )
            )
        elif isinstance(action, CreateService):
            services.add(action.name)
        elif isinstance(action, CreatePodGroup):
            group = ObservedPodGroup(action.name, phase="Running")
        elif isinstance(action, WriteFiles):
            kind: ChildKind = "Secret" if action.secret else "ConfigMap"
            children = [c for c in children if (c.kind, c.name) != (kind, action.name)]
            children.append(ObservedChild(kind, action.name, action.digest))
        elif isinstance(action, CreateChild):
            children.append(ObservedChild(action.kind, action.name))
        elif isinstance(action, CreateObject):
            if action.kind == "Service":
                services.add(action.name)
            else:
                children.append(ObservedChild(cast(ChildKind, action.kind), action.name))
    return dataclasses.replace(
        observed,
        pods=tuple(pods),
        services=frozenset(services),
        pod_group=group,
        children=tuple(children),
    )


class _Dumper(yaml.SafeDumper):
    """Block-style YAML with list items indented under their key, as kubectl prints."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        # Builders share small dicts (a probe, a selector); kubectl users expect them
        # written out, not as &id001 anchors.
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Multi-line strings (scripts, configs) as literal blocks, readable and diffable.
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(objects: Iterable[Mapping[str, Any]], stream: IO[str] | None = None) -> str:
    """A multi-document YAML stream (``---`` between objects), keys in builder order.

    Returns the text; also writes it to ``stream`` when one is given.
    """
    text = yaml.dump_all(
        [dict(o) for o in objects],
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        explicit_start=True,
        width=100,
    )
    if stream is not None:
        stream.write(text)
    return text


__all__ = [
    "REDACTED_ANNOTATION",
    "RenderError",
    "dump_yaml",
    "plan_on_kubernetes",
    "reconcile_options",
    "redact",
    "render_job",
    "start_actions",
]
