"""A toy engine, written as a plugin would be: its API, its framework, one Engine.

``ToyCluster`` is a service (never Succeeded; Ready while its Members are up) with a Head
and Members. Its Plan delivers a file set (a static greeting and a listing of the running
members, rewritten as they come and go) and a Secret for the Head alone, expects the Head
to create pods of its own (``Helper``: foreign, counted, never deleted), and reports an
``endpoint`` in a status field of its own. Nothing in kubemill names it: tests register it with
``KUBEMILL_ENGINES=toy_engine:ENGINE`` (and this directory on ``PYTHONPATH``), so the
operator and detached supervisors know it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field, model_validator

from kubemill.api import Job, JobStatus, KindApi, ReplicaSpec, RestartPolicy, RunPolicy
from kubemill.api.base import KubeModel
from kubemill.api.defaults import apply_job_defaults
from kubemill.frameworks import (
    AccessPlan,
    AccessRule,
    FilePlan,
    FileSet,
    ForeignPods,
    HostListing,
    Network,
    Plan,
    PlanError,
    ReplicaSlot,
    ServicePolicy,
    StatusView,
    build_replicas,
    env,
)
from kubemill.kinds import Engine, OperatorGrant

HEAD, MEMBER = "Head", "Member"
MOUNT = "/etc/toy"
TOKEN_MOUNT = "/var/run/toy"


class ToySpec(KubeModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    toy_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    greeting: str = "hello"
    min_members: int = Field(default=1, ge=1)


class ToyClusterStatus(JobStatus):
    endpoint: str = ""
    """Where the Head serves, once it is up and ready."""


class ToyCluster(Job):
    KIND: ClassVar[str] = "ToyCluster"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = (HEAD, MEMBER)
    DEFAULT_CONTAINER: ClassVar[str] = "toy"
    DEFAULT_PORT_NAME: ClassVar[str] = "toy-port"
    DEFAULT_PORT: ClassVar[int] = 7070
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    REPLICA_SPECS_FIELD: ClassVar[str] = "toyReplicaSpecs"

    kind: str = "ToyCluster"
    spec: ToySpec = Field(default_factory=ToySpec)
    status: ToyClusterStatus = Field(default_factory=ToyClusterStatus)

    @model_validator(mode="after")
    def _defaults(self) -> ToyCluster:
        apply_job_defaults(self)
        return self

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.toy_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def endpoint(view: StatusView) -> Mapping[str, object]:
    """The Head's address once it is running and ready."""
    for pod in view.pods:
        if pod.replica_type == HEAD and not pod.owner and pod.ready and pod.phase == "Running":
            rep = view.plan.replica(pod.name)
            return {"endpoint": f"http://{rep.host}:{rep.ports.get('toy-port', 0)}"}
    return {"endpoint": ""}


class ToyFramework:
    kind = "ToyCluster"

    def plan(self, job: Job, network: Network) -> Plan:
        if not isinstance(job, ToyCluster):
            raise PlanError(f"the toy framework plans ToyClusters, not {job.KIND}")
        config = f"{job.name}-config"
        files_dir = network.files_path(config, MOUNT)

        token_dir = network.files_path(f"{job.name}-token", TOKEN_MOUNT)

        def env_for(slot: ReplicaSlot) -> list:  # type: ignore[type-arg]
            variables = [
                env("TOY_ROLE", slot.replica_type.lower()),
                env("TOY_INDEX", str(slot.index)),
                env("TOY_FILES", files_dir),
            ]
            if slot.replica_type == HEAD:
                variables.append(env("TOY_TOKEN", f"{token_dir}/token"))
            return variables

        replicas = build_replicas(
            job, network, env_for=env_for, is_master=lambda slot: slot.replica_type == HEAD
        )
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=replicas,
            outcome=ServicePolicy(MEMBER, min_ready=job.spec.min_members),
            files=(
                FileSet(
                    config,
                    (
                        FilePlan("greeting", job.spec.greeting + "\n"),
                        FilePlan("members", listing=HostListing(MEMBER, "{host} member-{index}")),
                    ),
                    mount_path=MOUNT,
                ),
                # Only the Head gets the token, as a Secret: render hides its value.
                FileSet(
                    f"{job.name}-token",
                    (FilePlan("token", f"toy-token-of-{job.name}\n", mode=0o600),),
                    mount_path=TOKEN_MOUNT,
                    secret=True,
                    replica_types=(HEAD,),
                ),
            ),
            # The Head watches its cluster's pods, as a Mars supervisor does.
            access=AccessPlan(
                f"{job.name}-head",
                (AccessRule(("",), ("pods",), ("get", "list", "watch")),),
                replica_types=(HEAD,),
            ),
            foreign=(ForeignPods("Helper", owner_type=HEAD),),
            status_extension=endpoint,
        )


ENGINE = Engine(
    KindApi(model=ToyCluster, plural="toyclusters", short_names=("toy",)),
    ToyFramework(),
    "a toy service kind registered by a plugin (tests)",
    grants=(
        OperatorGrant(
            ("",),
            ("configmaps",),
            ("list", "watch", "create", "update", "delete"),
            "toy clusters deliver a config file set",
        ),
        OperatorGrant(
            ("",),
            ("secrets",),
            ("list", "watch", "create", "update", "delete"),
            "toy clusters deliver a token to their head",
        ),
        OperatorGrant(
            ("",),
            ("serviceaccounts",),
            ("list", "watch", "create", "delete"),
            "a toy cluster's head runs as an account of its own",
        ),
        OperatorGrant(
            ("rbac.authorization.k8s.io",),
            ("roles", "rolebindings"),
            ("list", "watch", "create", "delete"),
            "the head's account may read the cluster's pods",
        ),
        # RBAC grants only what the granter holds: the head's Role reads pods.
        OperatorGrant(("",), ("pods",), ("get",), "the head's Role lets it read pods"),
    ),
)


def manifest(name: str, *, command: list[str], greeting: str, members: int = 2) -> dict[str, Any]:
    """A ToyCluster manifest: one Head and ``members`` Members running ``command``, Ready
    once all the members are."""

    def replicas(count: int) -> dict[str, Any]:
        container = {"name": "toy", "image": "python", "command": command}
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "ToyCluster",
        "metadata": {"name": name},
        "spec": {
            "greeting": greeting,
            "minMembers": members,
            "toyReplicaSpecs": {"Head": replicas(1), "Member": replicas(members)},
        },
    }
