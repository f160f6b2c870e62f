"""A second toy plugin engine, shaped like MPI: hosts first, then a client that execs into them.

``ToyHosts`` has ``Host`` replicas whose container may have no command: its framework
then plans them ``host_only`` (locally a Host idles and serves exec, as an MPI worker in
exec mode does), and one ``Client`` that starts once every Host is
ready and decides the job's outcome, as MPI's launcher does. Each Host gets a variable
only it has (``TOY_HOST_TOKEN``), so a command exec'd into it can prove whose environment
it ran in. As in MPI, whose upstream names no container, the first container of each
template is the one that runs (and gets the env). Tests register it with
``KUBEMILL_ENGINES=toy_host_engine:ENGINE``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from pydantic import Field, model_validator

from kubemill.api import Job, JobStatus, KindApi, ReplicaSpec, RestartPolicy, RunPolicy
from kubemill.api.base import KubeModel
from kubemill.api.defaults import apply_job_defaults
from kubemill.frameworks import (
    Network,
    Plan,
    PlanError,
    ReplicaSlot,
    build_replicas,
    decided_by,
    env,
)
from kubemill.kinds import Engine, LocalSupport

CLIENT, HOST = "Client", "Host"


class ToyHostsSpec(KubeModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    toy_host_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class ToyHosts(Job):
    KIND: ClassVar[str] = "ToyHosts"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = (CLIENT, HOST)
    DEFAULT_CONTAINER: ClassVar[str] = "toy"
    DEFAULT_PORT_NAME: ClassVar[str] = "toy-port"
    DEFAULT_PORT: ClassVar[int] = 7171
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.NEVER
    REPLICA_SPECS_FIELD: ClassVar[str] = "toyHostReplicaSpecs"

    kind: str = "ToyHosts"
    spec: ToyHostsSpec = Field(default_factory=ToyHostsSpec)
    status: JobStatus = Field(default_factory=JobStatus)

    @model_validator(mode="after")
    def _defaults(self) -> ToyHosts:
        apply_job_defaults(self)
        return self

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.toy_host_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def host_token(job: str, index: int) -> str:
    """The value only Host ``index`` of job ``job`` has in ``TOY_HOST_TOKEN``."""
    return f"token-of-{job}-host-{index}"


class ToyHostsFramework:
    kind = "ToyHosts"

    def plan(self, job: Job, network: Network) -> Plan:
        if not isinstance(job, ToyHosts):
            raise PlanError(f"the toy hosts framework plans ToyHosts, not {job.KIND}")

        def env_for(slot: ReplicaSlot) -> list:  # type: ignore[type-arg]
            variables = [env("TOY_ROLE", slot.replica_type.lower())]
            if slot.replica_type == HOST:
                variables.append(env("TOY_HOST_TOKEN", host_token(job.name, slot.index)))
            return variables

        replicas = build_replicas(
            job, network, env_for=env_for, is_master=lambda slot: slot.replica_type == CLIENT
        )
        # Hosts first; the client once every host is ready (MPI's WaitForWorkersReady).
        staged = tuple(
            replace(
                r,
                stage=1 if r.replica_type == CLIENT else 0,
                container=r.template.spec.containers[0].name,
                host_only=r.replica_type == HOST and not r.template.spec.containers[0].has_command,
            )
            for r in replicas
        )
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=staged,
            outcome=decided_by(CLIENT),
            start_gate="ready",
        )


ENGINE = Engine(
    KindApi(model=ToyHosts, plural="toyhosts", short_names=("toyh",)),
    ToyHostsFramework(),
    "a toy kind with host replicas that a client execs into (tests)",
    local=LocalSupport(),
)


def manifest(
    name: str,
    *,
    client: list[str],
    hosts: int = 2,
    host_command: list[str] | None = None,
    host_env: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A ToyHosts manifest: ``hosts`` Hosts with no command (or ``host_command``), and a
    Client running ``client``."""
    host: dict[str, Any] = {"name": "toy", "image": "python"}
    if host_command is not None:
        host["command"] = host_command
    if host_env:
        host["env"] = host_env
    client_container = {"name": "toy", "image": "python", "command": client}
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "ToyHosts",
        "metadata": {"name": name},
        "spec": {
            "toyHostReplicaSpecs": {
                "Client": {"replicas": 1, "template": {"spec": {"containers": [client_container]}}},
                "Host": {"replicas": hosts, "template": {"spec": {"containers": [host]}}},
            }
        },
    }
