"""The RayCluster kind, field for field as KubeRay's ``ray.io/v1`` defines it.

A RayCluster is a head (``headGroupSpec``: its pod template, its ``rayStartParams`` and the
type of its Service) and worker groups (``workerGroupSpecs``: each a ``groupName``, a pod
template, ``rayStartParams`` and ``replicas`` between ``minReplicas`` and ``maxReplicas``),
kept running until deleted; ``suspend`` stops its pods and keeps the object. What kubemill
does not honour yet is refused at its field path, never ignored: KubeRay's in-tree
autoscaler (``enableInTreeAutoscaling``, ``autoscalerOptions``, a group's
``idleTimeoutSeconds`` and ``scaleStrategy.workersToDelete``), multi-host groups
(``numOfHosts`` above 1), per-group ``suspend``, GCS fault tolerance, an ingress and a
customised head Service, and ``rayStartParams`` that name what kubemill sets itself (the
head's ports and a worker's ``address``).

``authOptions`` (:mod:`.auth`) is KubeRay's switch of Ray's token authentication; without
it a cluster on Kubernetes has none, as KubeRay's. Locally every cluster has it whatever
the spec says (see :mod:`kubemill.engines.ray.local`).

Each group is a replica type of its own (the head is ``Head``; a worker group is its
``groupName``), so a group's pods are ``<cluster>-<group>-<index>``. The status is
KubeRay's (``state``, the worker counts, ``endpoints``, ``head``) beside the core's
conditions, written in KubeRay's words (:data:`VOCABULARY`): ``RayClusterProvisioned`` is
the core's Ready (the head and every worker ready), ``ReplicaFailure`` its Restarting (a
pod failed and is being replaced), and ``HeadPodReady`` the head pod's readiness.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from kubemill.api.base import KubeModel, refused
from kubemill.api.clusters import ClusterOptions
from kubemill.api.common import (
    MAX_REPLICAS,
    CleanPodPolicy,
    Condition,
    ConditionType,
    ConditionVocabulary,
    Job,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    WordedStatus,
)
from kubemill.api.errors import FieldError
from kubemill.api.kinds import AGE_COLUMN, KindApi, PrinterColumn
from kubemill.api.kube import PodTemplateSpec
from kubemill.engines.ray.api.auth import TOKEN_KEY, AuthOptions, token_secret_name
from kubemill.engines.ray.api.refusals import refusal_validator

GROUP = "ray.io"
API_VERSION = f"{GROUP}/v1"
"""KubeRay's apiVersion: its manifests load unchanged."""

HEAD = "Head"
"""The head's replica type (a worker group's is its ``groupName``)."""

RAY_VERSION = "2.60.0"
DEFAULT_IMAGE = f"rayproject/ray:{RAY_VERSION}"
"""The image ``kubemill cluster create ray`` gives its pods (locally: the Python running
kubemill, which has Ray with the ``ray`` extra)."""

MAX_INT32 = 2_147_483_647
"""KubeRay's default ``maxReplicas``: no bound."""

HEAD_POD_READY = "HeadPodReady"
"""KubeRay's condition of the head pod's readiness, kept in :attr:`RayClusterStatus.
head_pod_ready` and written as a condition."""

VOCABULARY = ConditionVocabulary(
    words={
        ConditionType.READY: "RayClusterProvisioned",
        ConditionType.RESTARTING: "ReplicaFailure",
    },
)
"""A RayCluster's conditions in KubeRay's words where KubeRay has one for the core's."""

_PARAM_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")

SET_BY_KUBEMILL: dict[str, str] = {
    "head": "the head is headGroupSpec; kubemill adds --head to its command",
    "address": "a worker joins its cluster's head; kubemill gives --address",
    "block": "every Ray node runs in the foreground (--block), as its pod's process",
}
"""``rayStartParams`` kubemill sets itself, and why (given by the user, they are refused)."""

HEAD_PORT_PARAMS: dict[str, str] = {
    "port": "the head's GCS port",
    "dashboard-port": "the head's dashboard port",
    "ray-client-server-port": "the head's Ray client server port",
}
"""``rayStartParams`` of the head's ports (KubeRay's defaults 6379, 8265, 10001): a port
number, which the head's container, its Service and every address of it then use; a
worker's are refused (they are the head's)."""


def _check_params(params: dict[str, str], *, head: bool) -> dict[str, str]:
    for key, value in params.items():
        if not _PARAM_KEY.match(key):
            raise ValueError(
                f"{key!r} is not a `ray start` option name: lowercase words joined by '-', "
                "without the leading '--' (e.g. num-cpus)"
            )
        if key in SET_BY_KUBEMILL:
            raise refused(f"{key!r} is set by kubemill: {SET_BY_KUBEMILL[key]}", f"remove {key!r}")
        if key in HEAD_PORT_PARAMS and not head:
            raise refused(
                f"{key!r} is {HEAD_PORT_PARAMS[key]}, not a worker's", "set it in headGroupSpec"
            )
        if key in HEAD_PORT_PARAMS and not (value.isdigit() and 0 < int(value) < 65536):
            raise ValueError(f"{key}: {value!r} is not a port number (1-65535)")
        if "\n" in value or "\x00" in value:
            raise ValueError(f"{key}: the value has a newline or a NUL")
    return params


class HeadGroupSpec(KubeModel):
    """The head: one pod running ``ray start --head``, behind a Service."""

    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = None
    """The head Service's type (default ``ClusterIP``)."""
    head_service: dict[str, Any] | None = None
    enable_ingress: bool | None = None
    ray_start_params: dict[str, str] = Field(default_factory=dict)
    template: PodTemplateSpec

    _refused = refusal_validator("HeadGroupSpec")

    @field_validator("ray_start_params")
    @classmethod
    def _params(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_params(value, head=True)


class ScaleStrategy(KubeModel):
    """Which workers the autoscaler asked to delete (the in-tree autoscaler only)."""

    workers_to_delete: list[str] | None = None

    _refused = refusal_validator("ScaleStrategy")


class WorkerGroupSpec(KubeModel):
    """A group of identical workers, each a pod running ``ray start --address=<head>``."""

    group_name: str = Field(min_length=1, max_length=63)
    replicas: int | None = Field(default=0, ge=0, le=MAX_REPLICAS)
    min_replicas: int | None = Field(default=0, ge=0, le=MAX_INT32)
    max_replicas: int | None = Field(default=MAX_INT32, ge=0, le=MAX_INT32)
    idle_timeout_seconds: int | None = None
    ray_start_params: dict[str, str] = Field(default_factory=dict)
    template: PodTemplateSpec
    scale_strategy: ScaleStrategy | None = None
    num_of_hosts: int | None = Field(default=1, ge=1)
    suspend: bool | None = None

    _refused = refusal_validator("WorkerGroupSpec")

    @field_validator("group_name")
    @classmethod
    def _group_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value):
            raise ValueError(
                f"{value!r} is not a valid group name: its pods are named after it "
                "(lowercase letters, digits and '-', starting and ending with a letter or digit)"
            )
        if value == HEAD.lower():
            raise ValueError("'head' names the head's pods; call the group otherwise")
        return value

    @field_validator("ray_start_params")
    @classmethod
    def _params(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_params(value, head=False)

    @property
    def count(self) -> int:
        """How many workers the group runs."""
        return self.replicas or 0


class RayClusterSpec(KubeModel):
    """What a RayCluster is made of."""

    head_group_spec: HeadGroupSpec
    worker_group_specs: list[WorkerGroupSpec] = Field(default_factory=list)
    suspend: bool | None = False
    ray_version: str | None = None
    """The Ray version the images run (informational, as in KubeRay)."""
    enable_in_tree_autoscaling: bool | None = None
    autoscaler_options: dict[str, Any] | None = None
    head_service_annotations: dict[str, str] | None = None
    gcs_fault_tolerance_options: dict[str, Any] | None = None
    managed_by: str | None = None
    auth_options: AuthOptions | None = None
    """Ray's token authentication (KubeRay's); none without it, as KubeRay's."""

    _refused = refusal_validator("RayClusterSpec")

    @property
    def token_auth(self) -> bool:
        """Whether the cluster's Ray uses token authentication on Kubernetes."""
        return self.auth_options is not None and self.auth_options.token

    @property
    def desired_workers(self) -> int:
        """Workers of every group."""
        return sum(group.count for group in self.worker_group_specs)


class HeadInfo(KubeModel):
    """Where the head is (KubeRay's ``status.head``)."""

    pod_ip: str | None = Field(default=None, alias="podIP")
    service_ip: str | None = Field(default=None, alias="serviceIP")
    pod_name: str | None = None
    service_name: str | None = None


class RayClusterStatus(WordedStatus):
    """KubeRay's status fields, beside the core's conditions in KubeRay's words; the core
    writes every field (the kind's status extension, from what the pass decided)."""

    VOCABULARY: ClassVar[ConditionVocabulary] = VOCABULARY

    state: Literal["ready", "suspended", "failed"] | None = None
    """``ready`` while the cluster is (the core's Ready), ``suspended``, or ``failed``."""
    reason: str | None = None
    desired_worker_replicas: int = 0
    ready_worker_replicas: int = 0
    available_worker_replicas: int = 0
    """Workers whose pods run (ready or not)."""
    min_worker_replicas: int = 0
    max_worker_replicas: int = 0
    endpoints: dict[str, str] = Field(default_factory=dict)
    """The head's ports by name (``gcs-server``, ``dashboard``, ``client``), as KubeRay
    gives them; locally the head's own loopback ports."""
    head: HeadInfo | None = None
    head_pod_ready: bool | None = Field(default=None, exclude=True)
    """The head pod is Running and ready; written as KubeRay's ``HeadPodReady``
    condition."""
    endpoint: str | None = None
    """The dashboard's address (``http://host:port``) while the cluster is ready
    (kubemill's, as every service cluster's: what ``kubemill cluster`` prints)."""
    ready_replicas: dict[str, int] = Field(default_factory=dict)
    """Ready pods by replica type (the head, each group). kubemill only."""
    auth_token_file: str | None = None
    """Where the file of the cluster's authentication token is: locally, where the substrate
    generated it (its path, never the token). kubemill only."""
    auth_token_secret: str | None = None
    """The Secret of the cluster's authentication token on Kubernetes (its name; the token
    is its key ``auth_token``, never here), with ``authOptions.mode: token``. kubemill
    only."""

    @model_validator(mode="before")
    @classmethod
    def _head_pod_ready_from_condition(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("conditions"), list):
            return data
        kept, ready = [], None
        for condition in data["conditions"]:
            if isinstance(condition, dict) and condition.get("type") == HEAD_POD_READY:
                ready = condition.get("status") == "True"
            else:
                kept.append(condition)
        if ready is None:
            return data
        return {**data, "conditions": kept, "headPodReady": ready}

    @model_serializer(mode="wrap")
    def _write_in_kind_words(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        dumped = WordedStatus._write_in_kind_words(self, handler, info)
        if self.head_pod_ready is None or not isinstance(dumped, dict):
            return dumped
        condition = Condition.model_construct(
            type=ConditionType.READY,  # overwritten below: the core has no such word
            status="True" if self.head_pod_ready else "False",
            reason="HeadPodRunningAndReady" if self.head_pod_ready else "HeadPodNotReady",
        )
        wire = condition.model_dump(mode="json", by_alias=True, exclude_none=True)
        wire["type"] = HEAD_POD_READY
        # First: the last condition is the core's latest (the State column, the phase).
        dumped["conditions"] = [wire, *dumped.get("conditions", [])]
        return dumped


class RayCluster(Job):
    """A Ray cluster: a head and worker groups, serving until deleted, never Succeeded."""

    KIND: ClassVar[str] = "RayCluster"
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ALWAYS
    """Of every pod, as KubeRay's: a Ray node that exits is replaced; a service is never
    done."""
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True
    SUSPEND_FIELD: ClassVar[tuple[str, ...]] = ("suspend",)

    api_version: str = API_VERSION
    kind: str = "RayCluster"
    spec: RayClusterSpec
    status: RayClusterStatus = Field(default_factory=RayClusterStatus)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The head, then each worker group by its name, with its template and count."""
        specs = {
            HEAD: ReplicaSpec(
                replicas=1,
                restart_policy=RestartPolicy.ALWAYS,
                template=self.spec.head_group_spec.template,
            )
        }
        for group in self.spec.worker_group_specs:
            specs[group.group_name] = ReplicaSpec(
                replicas=group.count, restart_policy=RestartPolicy.ALWAYS, template=group.template
            )
        return specs

    @property
    def run_policy(self) -> RunPolicy:
        """A service's: nothing ends it but its deletion; ``suspend`` stops its pods."""
        return RunPolicy(clean_pod_policy=CleanPodPolicy.ALL, suspend=bool(self.spec.suspend))

    def main_container_name(self, replica_type: str) -> str:
        """The Ray container: the template's first, as KubeRay takes it."""
        containers = self.replica_specs[replica_type].template.spec.containers
        return containers[0].name if containers else ""

    def kind_errors(self) -> list[FieldError]:
        errors = _template_errors("spec.headGroupSpec", self.spec.head_group_spec.template)
        seen: set[str] = set()
        for i, group in enumerate(self.spec.worker_group_specs):
            path = f"spec.workerGroupSpecs[{i}]"
            errors += _template_errors(path, group.template)
            if group.group_name in seen:
                errors.append(
                    FieldError(
                        f"{path}.groupName",
                        f"{group.group_name!r} names another group too",
                        "give each worker group a name of its own",
                    )
                )
            seen.add(group.group_name)
            low, high = group.min_replicas or 0, group.max_replicas
            if high is not None and low > high:
                errors.append(
                    FieldError(
                        f"{path}.minReplicas",
                        f"{low} is more than maxReplicas ({high})",
                        "lower minReplicas or raise maxReplicas",
                    )
                )
            elif not low <= group.count <= (MAX_INT32 if high is None else high):
                errors.append(
                    FieldError(
                        f"{path}.replicas",
                        f"{group.count} is not between minReplicas ({low}) and maxReplicas "
                        f"({high})",
                        "set replicas within the group's bounds",
                    )
                )
        if self.metadata.name:
            errors += _name_errors(self.metadata.name, [HEAD, *seen])
        return errors


def _template_errors(path: str, template: PodTemplateSpec) -> list[FieldError]:
    """A group's template must have its Ray container first, with an image."""
    containers = template.spec.containers
    cpath = f"{path}.template.spec.containers"
    if not containers:
        return [FieldError(cpath, "at least one container is required", "add the Ray container")]
    errors = [
        FieldError(
            f"{cpath}[{i}].image",
            "required field is missing",
            f"name an image (e.g. {DEFAULT_IMAGE}; locally any name runs the current Python)",
        )
        for i, container in enumerate(containers)
        if not container.image
    ]
    ray = containers[0]
    if ray.command or ray.args:
        errors.append(
            FieldError(
                f"{cpath}[0].{'command' if ray.command else 'args'}",
                "the Ray container (the first) runs `ray start`, which kubemill writes",
                "remove it; give `ray start` options in rayStartParams",
            )
        )
    written = template.spec.restart_policy
    if written is not None and written != RestartPolicy.ALWAYS.value:
        errors.append(
            FieldError(
                f"{path}.template.spec.restartPolicy",
                f"{written!r}: a Ray node that exits is replaced, as KubeRay's pods are",
                "remove it (or set Always)",
            )
        )
    return errors


MAX_NAME = 63


def _name_errors(name: str, replica_types: list[str]) -> list[FieldError]:
    """A pod name (``<cluster>-<group>-<index>``) over the DNS label limit, as one error."""
    longest = max((f"{name}-{rtype.lower()}-0" for rtype in replica_types), key=len)
    if len(longest) + 3 <= MAX_NAME:  # room for an index up to 9999
        return []
    return [
        FieldError(
            "metadata.name",
            f"pod names like {longest!r} would be too long for Kubernetes ({MAX_NAME} "
            "characters with their index)",
            "shorten the cluster's name or its groups' names",
        )
    ]


def client_addresses(cluster: Job, status: JobStatus) -> dict[str, str]:
    """Where a client reaches a Ready cluster, from its status: Ray's client address (what
    ``ray.init(address=...)`` takes) and the dashboard's (Ray's job API, ``ray job submit
    --address``); empty before the head has ports. Locally the head's own ports on
    127.0.0.1; on Kubernetes its Service's, inside the cluster. With token authentication,
    the environment a client needs for it: locally the token file's path, on Kubernetes
    where the token Secret is (never the token itself)."""
    if not isinstance(status, RayClusterStatus) or status.head is None:
        return {}
    head, ports = status.head, status.endpoints
    if head.service_name:
        host = f"{head.service_name}.{cluster.namespace}.svc.cluster.local"
    elif head.pod_ip:
        host = head.pod_ip
    else:
        return {}
    found = {}
    if "client" in ports:
        found["ray.init(address=...)"] = f"ray://{host}:{ports['client']}"
    if "dashboard" in ports:
        found["dashboard (ray job submit --address)"] = f"http://{host}:{ports['dashboard']}"
    if status.auth_token_file:
        found["token (in the client's environment)"] = (
            f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={status.auth_token_file}"
        )
    elif secret := status.auth_token_secret or _token_secret(cluster):
        read = (
            f"kubectl get secret {secret} -n {cluster.namespace} "
            f"-o jsonpath='{{.data.{TOKEN_KEY}}}' | base64 -d"
        )
        found["token (in the client's environment)"] = (
            f'RAY_AUTH_MODE=token RAY_AUTH_TOKEN="$({read})"'
        )
    return found


def _token_secret(cluster: Job) -> str | None:
    """The token Secret a RayCluster's spec asks for (``authOptions.mode: token``): what
    its status says in kubemill's group, and what KubeRay's own CRD, whose status schema has
    no ``authTokenSecret``, leaves a client to know."""
    if isinstance(cluster, RayCluster) and cluster.spec.token_auth:
        return token_secret_name(cluster.name)
    return None


RAYCLUSTER = KindApi(
    model=RayCluster,
    plural="rayclusters",
    short_names=("raycluster",),
    upstream=(API_VERSION,),
    categories=("kubemill", "all"),
    printer_columns=(
        PrinterColumn("Desired Workers", ".status.desiredWorkerReplicas", type="integer"),
        PrinterColumn("Available Workers", ".status.availableWorkerReplicas", type="integer"),
        PrinterColumn("Status", ".status.state"),
        AGE_COLUMN,
    ),
    schema_overrides={
        "status.conditions.*.type": {"enum": [*VOCABULARY.wire_types(), HEAD_POD_READY]},
    },
)
"""The RayCluster kind: ``kubemill.dev/v1``, and KubeRay's ``ray.io/v1`` unchanged."""


def cluster_manifest(name: str, options: ClusterOptions) -> dict[str, object]:
    """The RayCluster ``kubemill cluster create ray`` makes of its options: a head and one
    worker group of ``--workers`` replicas, each worker offering ``--worker-cpu`` CPUs to Ray
    (``num-cpus``; the head none, so tasks run on the workers), the pods' image ``--image``
    (default :data:`DEFAULT_IMAGE`) and ``--env`` in every container."""
    image = options.image or DEFAULT_IMAGE
    env = [{"name": key, "value": value} for key, value in options.env.items()]

    def template(container: str) -> dict[str, object]:
        spec: dict[str, object] = {"name": container, "image": image}
        if env:
            spec["env"] = env
        return {"spec": {"containers": [spec]}}

    cpus = format(options.worker_cpu, "g")
    return {
        "apiVersion": API_VERSION,
        "kind": RayCluster.KIND,
        "metadata": {"name": name},
        "spec": {
            "rayVersion": RAY_VERSION,
            # The head schedules and the workers compute, as KubeRay's guides advise.
            "headGroupSpec": {
                "rayStartParams": {"num-cpus": "0"},
                "template": template("ray-head"),
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": options.workers,
                    "minReplicas": options.min_workers or 0,
                    "maxReplicas": max(options.workers, options.min_workers or 0),
                    "rayStartParams": {"num-cpus": cpus},
                    "template": template("ray-worker"),
                }
            ],
        },
    }


__all__ = [
    "API_VERSION",
    "DEFAULT_IMAGE",
    "HEAD",
    "HEAD_POD_READY",
    "HEAD_PORT_PARAMS",
    "MAX_INT32",
    "RAYCLUSTER",
    "RAY_VERSION",
    "SET_BY_KUBEMILL",
    "VOCABULARY",
    "HeadGroupSpec",
    "HeadInfo",
    "RayCluster",
    "RayClusterSpec",
    "RayClusterStatus",
    "ScaleStrategy",
    "WorkerGroupSpec",
    "client_addresses",
    "cluster_manifest",
]
