"""Defaulting shared by the training kinds, as the upstream webhooks do it.

Applied by the kinds' ``model_validator``s, so every loaded job is already defaulted:
replica-type keys case-normalised, ``replicas`` 1, the kind's restart policy, the
``cleanPodPolicy`` None, and the framework port on the default container (for kinds that
have one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_core import PydanticCustomError

from kubemill.api.common import CleanPodPolicy, Job, ReplicaSpec, RestartPolicy, RunPolicy
from kubemill.api.kube import ContainerPort


def normalise_replica_keys(raw: Any, canonical: Iterable[str]) -> Any:
    """Map ``worker``/``WORKER`` to ``Worker`` etc.; unknown keys are left for validation."""
    if not isinstance(raw, Mapping):
        return raw
    by_lower = {name.lower(): name for name in canonical}
    normalised: dict[Any, Any] = {}
    spelt: dict[Any, Any] = {}
    for key, value in raw.items():
        name = by_lower.get(str(key).lower(), key)
        if name in normalised:
            message = f"replica type {name} is given twice (as {spelt[name]!r} and {key!r})"
            raise PydanticCustomError(
                "kubemill_duplicate_replica_type",
                # pydantic formats the message with ctx; our text is final, so escape it.
                message.replace("{", "{{").replace("}", "}}"),
                {"hint": "keep one of them"},
            )
        normalised[name] = value
        spelt[name] = key
    return normalised


def apply_job_defaults(job: Job) -> None:
    """Fill every default a training kind shares, in place, from the kind's ClassVars."""
    default_replica_specs(
        job.replica_specs,
        restart_policy=job.DEFAULT_RESTART_POLICY,
        container=job.DEFAULT_CONTAINER,
        port_name=job.DEFAULT_PORT_NAME,
        port=job.DEFAULT_PORT,
    )
    default_run_policy(job.run_policy)


def default_replica_specs(
    specs: dict[str, ReplicaSpec],
    *,
    restart_policy: RestartPolicy,
    container: str,
    port_name: str,
    port: int,
) -> None:
    """Fill replica defaults in place (the models are fresh from validation)."""
    for spec in specs.values():
        if spec.replicas is None:
            spec.replicas = 1
        if spec.restart_policy is None:
            spec.restart_policy = restart_policy
        if not port_name:
            continue  # a kind without a framework port (MPI's)
        for c in spec.template.spec.containers:
            if c.name != container:
                continue
            ports = c.ports or []
            if not any(p.name == port_name for p in ports):
                ports.append(ContainerPort(name=port_name, container_port=port))
            c.ports = ports


def default_run_policy(policy: RunPolicy | None) -> RunPolicy:
    """A run policy with upstream defaults (cleanPodPolicy None, not suspended)."""
    policy = policy or RunPolicy()
    if policy.clean_pod_policy is None:
        policy.clean_pod_policy = CleanPodPolicy.NONE
    if policy.suspend is None:
        policy.suspend = False
    return policy
