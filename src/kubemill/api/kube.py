"""The part of the Kubernetes core API that job manifests embed (ObjectMeta, pod templates).

The fields kubemill reads are typed; the rest of the Kubernetes pod and container
schema is still accepted (typed as plain JSON values) so that any valid pod template
loads, while a misspelt field is still reported with a "did you mean".
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from kubemill.api.base import KubeModel, OpenModel, refused

JSON = Any


class OwnerReference(KubeModel):
    """A pointer from a child object to the object that owns it."""

    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(OpenModel):
    """Object metadata. Open: the API server adds fields (managedFields, ...) we just carry."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class ObjectFieldSelector(KubeModel):
    """``valueFrom.fieldRef``: a field of the pod itself, e.g. ``metadata.name``."""

    field_path: str
    api_version: str | None = None


class EnvVarSource(KubeModel):
    """Where an environment variable's value comes from."""

    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: JSON | None = None
    config_map_key_ref: JSON | None = None
    secret_key_ref: JSON | None = None


class EnvVar(KubeModel):
    """One environment variable of a container."""

    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


class ContainerPort(KubeModel):
    """A port a container listens on."""

    container_port: int = Field(ge=1, le=65535)
    name: str | None = None
    protocol: str | None = None
    host_port: int | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class Container(KubeModel):
    """A container of a pod template. kubemill reads name, image, command, args, env, ports."""

    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    env: list[EnvVar] | None = None
    ports: list[ContainerPort] | None = None
    # The remaining Kubernetes container fields, carried through unchanged.
    env_from: list[JSON] | None = None
    resources: dict[str, JSON] | None = None
    resize_policy: list[JSON] | None = None
    restart_policy: str | None = None
    volume_mounts: list[JSON] | None = None
    volume_devices: list[JSON] | None = None
    liveness_probe: JSON | None = None
    readiness_probe: JSON | None = None
    startup_probe: JSON | None = None
    lifecycle: JSON | None = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None
    image_pull_policy: str | None = None
    security_context: JSON | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None

    @property
    def has_command(self) -> bool:
        """Whether it names a program of its own: not none, empty, or the seed's ``[""]``."""
        return any(self.command or ())


class PodSpec(KubeModel):
    """A pod's spec. Containers are typed; other pod fields are carried through unchanged."""

    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    restart_policy: str | None = None
    volumes: list[JSON] | None = None
    service_account_name: str | None = None
    service_account: str | None = None
    scheduler_name: str | None = None
    node_selector: dict[str, str] | None = None
    node_name: str | None = None
    affinity: JSON | None = None
    tolerations: list[JSON] | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    host_network: bool | None = None
    host_pid: bool | None = Field(default=None, alias="hostPID")
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    hostname: str | None = None
    subdomain: str | None = None
    dns_policy: str | None = None
    dns_config: JSON | None = None
    security_context: JSON | None = None
    image_pull_secrets: list[JSON] | None = None
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    automount_service_account_token: bool | None = None
    enable_service_links: bool | None = None
    ephemeral_containers: list[JSON] | None = None
    host_aliases: list[JSON] | None = None
    overhead: dict[str, JSON] | None = None
    preemption_policy: str | None = None
    readiness_gates: list[JSON] | None = None
    resource_claims: list[JSON] | None = None
    resources: JSON | None = None
    runtime_class_name: str | None = None
    scheduling_gates: list[JSON] | None = None
    set_hostname_as_fqdn: bool | None = Field(default=None, alias="setHostnameAsFQDN")
    share_process_namespace: bool | None = None
    topology_spread_constraints: list[JSON] | None = None
    os: JSON | None = None
    host_users: bool | None = None


class TemplateMeta(KubeModel):
    """Metadata allowed in a pod template."""

    name: str | None = None
    """Refused: every pod is named ``<job>-<replica type>-<index>`` (upstream ignores it)."""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _no_name(cls, value: str | None) -> str | None:
        if value:
            raise refused(
                f"{value!r} would be ignored: each replica's pod is named "
                "<job>-<replica type>-<index>",
                "remove it; use labels to mark the pods",
            )
        return value


class PodTemplateSpec(KubeModel):
    """A pod template: what every pod of one replica type looks like."""

    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
