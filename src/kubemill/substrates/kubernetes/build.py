"""Pure ``build_*`` functions: the exact objects the operator sends for a job.

Every child the operator creates (a Pod and a headless Service per replica, the gang
scheduler's PodGroup) is built here and nowhere else, so ``kubemill render`` shows
byte for byte what the reconcile would send. No I/O: a job and its Plan in, dicts out.

Shapes follow the Kubeflow training operator (``pod.go``, ``service.go``,
``podgroup_control.go``), with ``kubemill.dev/*`` labels instead of
``training.kubeflow.org/*``:

- a pod is the replica's template with the operator's labels laid over the template's
  (template annotations kept), an ownerReference to the job with ``controller: true``,
  the pod-level restartPolicy from :func:`kubemill.core.policy.pod_restart_policy`
  (``ExitCode`` becomes ``Never``: the operator decides on restarts), and the Plan's
  environment appended to the framework's container;
- a Service is headless (``clusterIP: None``) with the pod's name, selecting it by job
  name, replica type and index, with the framework container's named ports; its DNS name
  ``<pod>.<ns>.svc`` is the replica's address (see :mod:`.network`), so pods need no
  ``hostname``/``subdomain`` of their own;
- with gang scheduling, pods get the scheduler's name (unless the template names one) and
  the PodGroup marker (volcano: annotation ``scheduling.k8s.io/group-name`` and
  ``volcano.sh/task-spec``; scheduler-plugins: label ``scheduling.x-k8s.io/pod-group``),
  and the PodGroup is named like the job.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from kubemill.api import Job, RestartPolicy
from kubemill.core import (
    Action,
    ChildKind,
    CreateChild,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateService,
    UpdateObject,
    WriteFiles,
    pod_restart_policy,
    stopped_body,
)
from kubemill.frameworks import (
    LABEL_JOB_NAME,
    LABEL_OPERATOR,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    OPERATOR_NAME,
    AccessPlan,
    ExposedService,
    NetworkPolicyPlan,
    Plan,
    ReplicaPlan,
)
from kubemill.substrates.files import resolved_contents
from kubemill.substrates.kubernetes.controlled import build_controlled
from kubemill.substrates.kubernetes.observe import CONTENT_DIGEST_ANNOTATION
from kubemill.substrates.kubernetes.progress import ProgressSidecar, add_progress

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
"""Names a pod's volcano PodGroup."""
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
"""Tells volcano which task (replica type, lowercased) of the group a pod belongs to."""
SCHEDULER_PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""Names a pod's scheduler-plugins (coscheduling) PodGroup."""
SCHEDULER_PLUGINS_DEFAULT_NAME = "scheduler-plugins-scheduler"
"""The scheduler profile name the scheduler-plugins chart deploys by default."""
NOT_COPIED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
"""Job annotations not carried onto the PodGroup (a whole copy of the job is noise)."""

SELECTOR_LABELS = (LABEL_JOB_NAME, LABEL_REPLICA_TYPE, LABEL_REPLICA_INDEX)
"""The labels a replica's Service selects its pod by."""
FILES_VOLUME_PREFIX = "kubemill-files-"
"""Volumes of delivered files are named ``kubemill-files-<n>`` (n: the FileSet's position)."""
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = f"{RBAC_GROUP}/v1"
NETWORKING_API_VERSION = "networking.k8s.io/v1"
CHILD_RESOURCES: dict[ChildKind, tuple[str, str]] = {
    "ConfigMap": ("v1", "configmaps"),
    "Secret": ("v1", "secrets"),
    "ServiceAccount": ("v1", "serviceaccounts"),
    "Role": (RBAC_API_VERSION, "roles"),
    "RoleBinding": (RBAC_API_VERSION, "rolebindings"),
    "Deployment": ("apps/v1", "deployments"),
    "NetworkPolicy": (NETWORKING_API_VERSION, "networkpolicies"),
}
"""(apiVersion, plural) of each child kind beyond pods, services and PodGroups."""


class UnsupportedPlanError(ValueError):
    """A Plan asks for something the Kubernetes substrate cannot realise yet."""


class GangKind(StrEnum):
    """Which PodGroup API a gang scheduler reads."""

    VOLCANO = "volcano"
    SCHEDULER_PLUGINS = "scheduler-plugins"


@dataclass(frozen=True)
class GangScheduler:
    """A gang scheduler: its PodGroup API and the ``schedulerName`` pods ask for."""

    kind: GangKind
    scheduler_name: str

    @classmethod
    def named(cls, name: str) -> GangScheduler:
        """From ``--gang-scheduler-name``, with upstream's rule.

        ``volcano`` is volcano; ``scheduler-plugins`` is the coscheduling plugin under
        its default profile name; any other name is a scheduler-plugins profile of that
        name (a cluster may deploy the plugin under its own scheduler name).
        """
        if not name:
            raise ValueError("a gang scheduler name must not be empty")
        if name == GangKind.VOLCANO:
            return cls(GangKind.VOLCANO, "volcano")
        if name == GangKind.SCHEDULER_PLUGINS:
            return cls(GangKind.SCHEDULER_PLUGINS, SCHEDULER_PLUGINS_DEFAULT_NAME)
        return cls(GangKind.SCHEDULER_PLUGINS, name)

    @property
    def name(self) -> str:
        """The ``--gang-scheduler-name`` that selects this scheduler (inverse of :meth:`named`)."""
        if self.kind is GangKind.VOLCANO or self.scheduler_name == SCHEDULER_PLUGINS_DEFAULT_NAME:
            return self.kind.value
        return self.scheduler_name

    @property
    def api_group(self) -> str:
        """The PodGroup's API group."""
        if self.kind is GangKind.VOLCANO:
            return "scheduling.volcano.sh"
        return "scheduling.x-k8s.io"

    @property
    def api_version(self) -> str:
        """The PodGroup's ``apiVersion``."""
        version = "v1beta1" if self.kind is GangKind.VOLCANO else "v1alpha1"
        return f"{self.api_group}/{version}"

    plural: ClassVar[str] = "podgroups"
    """The PodGroup resource (both APIs use the same plural)."""


def gang_scheduler(value: str | GangScheduler | None) -> GangScheduler | None:
    """Accept a scheduler name, a :class:`GangScheduler` or None (no gang scheduling)."""
    if value is None or isinstance(value, GangScheduler):
        return value
    return GangScheduler.named(value)


@dataclass(frozen=True)
class Owner:
    """The job as its children's ownerReference names it."""

    api_version: str
    kind: str
    name: str
    uid: str

    @classmethod
    def of(cls, job: Job, *, api_version: str | None = None) -> Owner:
        """The owner for ``job``.

        ``api_version`` is the group the object was read from: the loader maps
        ``kubeflow.org/v1`` jobs onto ``kubemill.dev/v1``, but their children must point at
        the object that exists. ``uid`` is empty until the job exists in a cluster
        (``kubemill render`` of a file); the API server refuses an empty uid, which is
        safer than a made-up one the garbage collector would act on.
        """
        return cls(api_version or job.api_version, job.KIND, job.name, job.metadata.uid or "")

    def reference(self) -> dict[str, Any]:
        """The ``ownerReferences`` entry: the job controls its child and blocks its deletion."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def _owner(job: Job, owner: Owner | None) -> Owner:
    return owner if owner is not None else Owner.of(job)


def _child_metadata(
    job: Job,
    name: str,
    labels: Mapping[str, str],
    owner: Owner | None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": job.namespace, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    metadata["ownerReferences"] = [_owner(job, owner).reference()]
    return metadata


HOST_ONLY_COMMAND = ("/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done")
"""What a host-only replica's container runs (:attr:`ReplicaPlan.host_only`): it waits, and
ends at once with 0 on SIGTERM. (A plain ``sleep`` as the container's PID 1 ignores SIGTERM,
so every stop would wait out the grace period; upstream's ``sleep 365d`` does.)"""


def replica_labels(replica: ReplicaPlan) -> dict[str, str]:
    """The operator's labels on a replica's pod and service (the Plan's, plus operator-name)."""
    return {LABEL_OPERATOR: OPERATOR_NAME, **replica.labels}


def replica_selector(plan: Plan, replica_type: str) -> str:
    """The label selector (string form) of every pod of one replica type.

    Written to ``status.replicaStatuses.<type>.selector`` for the scale subresource.
    """
    job_name, type_label = plan.name, replica_type.lower()
    for replica in plan.of_type(replica_type):
        job_name, type_label = replica.labels[LABEL_JOB_NAME], replica.labels[LABEL_REPLICA_TYPE]
        break
    return f"{LABEL_JOB_NAME}={job_name},{LABEL_REPLICA_TYPE}={type_label}"


def build_pod(
    job: Job,
    replica: ReplicaPlan,
    *,
    gang: GangScheduler | None = None,
    owner: Owner | None = None,
    plan: Plan | None = None,
    progress: ProgressSidecar | None = None,
) -> dict[str, Any]:
    """The Pod of one replica; with ``plan``, its delivered files and service account too;
    with ``progress``, the progress file and its forwarder (:mod:`.progress`)."""
    template = replica.template.to_wire()
    template_meta = template.get("metadata", {})
    spec: dict[str, Any] = template.get("spec", {})
    labels = {**template_meta.get("labels", {}), **replica_labels(replica)}
    annotations = dict(template_meta.get("annotations", {}))

    spec["restartPolicy"] = pod_restart_policy(RestartPolicy(replica.restart_policy))
    container = _container(spec, replica)
    if replica.host_only:
        container["command"] = list(HOST_ONLY_COMMAND)
        container.pop("args", None)
    container["env"] = [*container.get("env", []), *(v.to_wire() for v in replica.env)]
    if plan is not None:
        if plan.subdomain:
            # <name>.<subdomain>.<ns>.svc resolves through the job's headless service.
            spec.setdefault("hostname", replica.name)
            spec.setdefault("subdomain", plan.subdomain)
        _mount_files(spec, container, plan, replica)
        access = plan.access
        if access is not None and _applies(access.replica_types, replica):
            # The user's own service account wins: it may already carry more rights.
            spec.setdefault("serviceAccountName", access.name)
    if progress is not None:
        by = _owner(job, owner)
        add_progress(
            spec,
            container,
            progress,
            api_version=by.api_version,
            kind=by.kind,
            namespace=job.namespace,
            name=job.name,
        )

    if gang is not None:
        spec.setdefault("schedulerName", gang.scheduler_name)
        if gang.kind is GangKind.VOLCANO:
            annotations[VOLCANO_GROUP_ANNOTATION] = job.name
            annotations[VOLCANO_TASK_ANNOTATION] = replica.replica_type.lower()
        else:
            labels[SCHEDULER_PLUGINS_GROUP_LABEL] = job.name

    metadata = _child_metadata(job, replica.name, labels, owner, annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _applies(replica_types: tuple[str, ...], replica: ReplicaPlan) -> bool:
    return not replica_types or replica.replica_type in replica_types


def _mount_files(
    spec: dict[str, Any], container: dict[str, Any], plan: Plan, replica: ReplicaPlan
) -> None:
    """Each FileSet the replica gets: a volume of its ConfigMap/Secret, mounted read-only."""
    for position, file_set in enumerate(plan.files):
        if not _applies(file_set.replica_types, replica):
            continue
        volume = f"{FILES_VOLUME_PREFIX}{position}"
        items = [
            {"key": f.name, "path": path, "mode": f.mode}
            for f in file_set.files
            for path in f.mounted_as
        ]
        source: dict[str, Any]
        if file_set.secret:
            source = {"secret": {"secretName": file_set.name, "items": items}}
        else:
            source = {"configMap": {"name": file_set.name, "items": items}}
        spec["volumes"] = [*spec.get("volumes", []), {"name": volume, **source}]
        mount = {"name": volume, "mountPath": file_set.mount_path, "readOnly": True}
        container["volumeMounts"] = [*container.get("volumeMounts", []), mount]


def _container(spec: dict[str, Any], replica: ReplicaPlan) -> dict[str, Any]:
    for container in spec.get("containers", []):
        if container.get("name") == replica.container:
            found: dict[str, Any] = container
            return found
    # The loader refuses such a job; only a hand-built Plan can get here.
    raise UnsupportedPlanError(
        f"replica {replica.name}: the pod template has no container named {replica.container!r}"
    )


def build_service(job: Job, replica: ReplicaPlan, *, owner: Owner | None = None) -> dict[str, Any]:
    """The headless Service that gives one replica its stable DNS name."""
    labels = replica_labels(replica)
    selector = {key: labels[key] for key in SELECTOR_LABELS}
    ports = [{"name": name, "port": port} for name, port in replica.ports.items()]
    spec: dict[str, Any] = {"clusterIP": "None", "selector": selector}
    if ports:
        spec["ports"] = ports
    metadata = _child_metadata(
        job, replica.name, {**selector, LABEL_OPERATOR: OPERATOR_NAME}, owner
    )
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def _job_labels(job: Job) -> dict[str, str]:
    return {LABEL_JOB_NAME: job.name, LABEL_OPERATOR: OPERATOR_NAME}


def build_files(job: Job, action: WriteFiles, *, owner: Owner | None = None) -> dict[str, Any]:
    """The ConfigMap (or Secret) of one FileSet, with the digest the core compares against.

    File modes are not part of a ConfigMap; the pods' volumes carry them (``items[].mode``).
    """
    annotations = {CONTENT_DIGEST_ANNOTATION: action.digest}
    metadata = _child_metadata(job, action.name, _job_labels(job), owner, annotations)
    contents = resolved_contents(action.files, owner=f"{job.namespace}/{job.name}")
    if action.secret:
        data = {
            name: base64.b64encode(content.encode("utf-8")).decode("ascii")
            for name, content in contents.items()
        }
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": action.secret_type,
            "data": data,
        }
    data = contents
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def build_access(
    job: Job, access: AccessPlan, kind: ChildKind, *, owner: Owner | None = None
) -> dict[str, Any]:
    """One of the per-job ServiceAccount, Role and RoleBinding (all named ``access.name``)."""
    metadata = _child_metadata(job, access.name, _job_labels(job), owner)
    if kind == "ServiceAccount":
        return {"apiVersion": "v1", "kind": kind, "metadata": metadata}
    if kind == "Role":
        rules: list[dict[str, Any]] = []
        for rule in access.rules:
            wire: dict[str, Any] = {
                "apiGroups": list(rule.api_groups),
                "resources": list(rule.resources),
                "verbs": list(rule.verbs),
            }
            if rule.resource_names:
                wire["resourceNames"] = list(rule.resource_names)
            rules.append(wire)
        return {"apiVersion": RBAC_API_VERSION, "kind": kind, "metadata": metadata, "rules": rules}
    if kind == "RoleBinding":
        return {
            "apiVersion": RBAC_API_VERSION,
            "kind": kind,
            "metadata": metadata,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": access.name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": access.name, "namespace": job.namespace}
            ],
        }
    raise UnsupportedPlanError(f"{access.name}: {kind} is not part of a job's access")


def build_network_policy(
    job: Job, policy: NetworkPolicyPlan, *, owner: Owner | None = None
) -> dict[str, Any]:
    """A NetworkPolicy: pods with ``pod_labels`` take ingress only from ``from_labels``'s."""
    return {
        "apiVersion": NETWORKING_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": _child_metadata(job, policy.name, _job_labels(job), owner),
        "spec": {
            "podSelector": {"matchLabels": dict(policy.pod_labels)},
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(policy.from_labels)}}]}],
        },
    }


def build_exposed_service(
    job: Job, plan: Plan, service: ExposedService, *, owner: Owner | None = None
) -> dict[str, Any]:
    """A NodePort/ClusterIP/LoadBalancer service in front of the replicas of one type, or
    the job's headless service (every replica, not-ready ones too: a host must resolve
    before it is ready, as MPI's workers are looked up while they start)."""
    replicas = plan.of_type(service.replica_type) if service.replica_type else plan.replicas
    if not replicas:
        raise UnsupportedPlanError(
            f"service {service.name} selects {service.replica_type} replicas; the job has none"
        )
    labels = replica_labels(replicas[0])
    selector = {LABEL_JOB_NAME: labels[LABEL_JOB_NAME]}
    if service.replica_type:
        selector[LABEL_REPLICA_TYPE] = labels[LABEL_REPLICA_TYPE]
    if service.index is not None:
        selector[LABEL_REPLICA_INDEX] = str(service.index)
    ports: list[dict[str, Any]] = []
    for port in service.ports:
        entry: dict[str, Any] = {
            "name": port.name,
            "port": port.port,
            "targetPort": port.target_port,
        }
        if port.node_port is not None:
            entry["nodePort"] = port.node_port
        if port.app_protocol is not None:
            entry["appProtocol"] = port.app_protocol
        ports.append(entry)
    metadata = _child_metadata(job, service.name, _job_labels(job), owner)
    spec: dict[str, Any]
    if service.type == "Headless":
        spec = {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True}
        if ports:
            spec["ports"] = ports
    else:
        spec = {"type": service.type, "selector": selector, "ports": ports}
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def build_pod_group(
    job: Job,
    request: CreatePodGroup,
    *,
    gang: GangScheduler,
    owner: Owner | None = None,
) -> dict[str, Any]:
    """The PodGroup the core asked for, in ``gang``'s API.

    The core decides the numbers (``minMember``, default queue, ``minResources`` summed
    from the pods when the job gives none); this only spells them for the scheduler:
    volcano takes ``minMember``, ``queue``, ``priorityClassName``, ``minResources``;
    scheduler-plugins takes ``minMember``, ``minResources``, ``scheduleTimeoutSeconds``.
    """
    min_resources = dict(request.min_resources)
    spec: dict[str, Any] = {"minMember": request.min_member}
    if gang.kind is GangKind.VOLCANO:
        if request.queue:
            spec["queue"] = request.queue
        if request.priority_class:
            spec["priorityClassName"] = request.priority_class
        if min_resources:
            spec["minResources"] = min_resources
    else:
        if min_resources:
            spec["minResources"] = min_resources
        if request.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = request.schedule_timeout_seconds
    labels = {LABEL_JOB_NAME: job.name, LABEL_OPERATOR: OPERATOR_NAME}
    # Upstream copies the job's annotations: volcano reads some of them on the group.
    annotations = {
        k: v for k, v in job.metadata.annotations.items() if k not in NOT_COPIED_ANNOTATIONS
    }
    metadata = _child_metadata(job, request.name, labels, owner, annotations)
    return {"apiVersion": gang.api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec}


def build_service_cluster_object(
    job: Job, plan: Plan, action: CreateObject | UpdateObject, *, owner: Owner | None = None
) -> dict[str, Any]:
    """One object of a service cluster, as its framework built it, owned by the job and
    with the digest the core compares against."""
    cluster = plan.service_cluster
    for body in cluster.objects if cluster is not None else ():
        if (body["kind"], body["metadata"]["name"]) == (action.kind, action.name):
            stopped = isinstance(action, UpdateObject) and action.stopped
            built = copy.deepcopy(stopped_body(body) if stopped else dict(body))
            built["metadata"]["ownerReferences"] = [_owner(job, owner).reference()]
            if action.digest:
                annotations = dict(built["metadata"].get("annotations") or {})
                annotations[CONTENT_DIGEST_ANNOTATION] = action.digest
                built["metadata"]["annotations"] = annotations
            return built
    raise UnsupportedPlanError(f"the reconcile asked for {action.kind} {action.name}")


def build_for_action(
    job: Job,
    plan: Plan,
    action: Action,
    *,
    gang: GangScheduler | None = None,
    owner: Owner | None = None,
    progress: ProgressSidecar | None = None,
) -> dict[str, Any] | None:
    """The object a create action of :func:`kubemill.core.reconcile` stands for.

    ``CreatePod``/``CreateService`` name a replica (or an exposed service) of ``plan``;
    ``WriteFiles`` is a ConfigMap or Secret (created or rewritten whole); ``CreateChild`` is
    part of the Plan's access or one of its network policies; ``CreateObject`` one of a
    service cluster's objects; ``CreatePodGroup`` needs ``gang``. Any other action creates
    nothing and gives None. ``progress``: pods get the progress sidecar.
    """
    if isinstance(action, CreatePod):
        replica = plan.replica(action.name)
        if replica.controller is not None:  # a batch/v1 Job runs its pod (no sidecar)
            return build_controlled(replica, build_pod(job, replica, owner=owner, plan=plan))
        return build_pod(job, replica, gang=gang, owner=owner, plan=plan, progress=progress)
    if isinstance(action, CreateService):
        for exposed in plan.exposed:
            if exposed.name == action.name:
                return build_exposed_service(job, plan, exposed, owner=owner)
        return build_service(job, plan.replica(action.name), owner=owner)
    if isinstance(action, WriteFiles):
        return build_files(job, action, owner=owner)
    if isinstance(action, CreateChild) and action.kind == "NetworkPolicy":
        for policy in plan.network_policies:
            if policy.name == action.name:
                return build_network_policy(job, policy, owner=owner)
        raise UnsupportedPlanError(f"the reconcile asked for NetworkPolicy {action.name}")
    if isinstance(action, CreateChild):
        if plan.access is None or plan.access.name != action.name:
            raise UnsupportedPlanError(f"the reconcile asked for {action.kind} {action.name}")
        return build_access(job, plan.access, action.kind, owner=owner)
    if isinstance(action, CreateObject | UpdateObject):
        return build_service_cluster_object(job, plan, action, owner=owner)
    if isinstance(action, CreatePodGroup):
        if gang is None:
            raise UnsupportedPlanError(
                f"the reconcile asked for PodGroup {action.name}, but no gang scheduler is set"
            )
        return build_pod_group(job, action, gang=gang, owner=owner)
    return None


__all__ = [
    "CHILD_RESOURCES",
    "CONTENT_DIGEST_ANNOTATION",
    "FILES_VOLUME_PREFIX",
    "HOST_ONLY_COMMAND",
    "NOT_COPIED_ANNOTATIONS",
    "SCHEDULER_PLUGINS_DEFAULT_NAME",
    "SCHEDULER_PLUGINS_GROUP_LABEL",
    "SELECTOR_LABELS",
    "VOLCANO_GROUP_ANNOTATION",
    "VOLCANO_TASK_ANNOTATION",
    "GangKind",
    "GangScheduler",
    "Owner",
    "UnsupportedPlanError",
    "build_access",
    "build_exposed_service",
    "build_files",
    "build_for_action",
    "build_network_policy",
    "build_pod",
    "build_pod_group",
    "build_service",
    "build_service_cluster_object",
    "gang_scheduler",
    "replica_labels",
    "replica_selector",
]
