"""The pod templates a SparkApplication's driver and executor fields stand for, and a pod's
memory as Spark requests it.

These are the model's own derived view (:attr:`SparkApplication.replica_specs`): what the
user asked of each pod, merged as Spark merges a pod template with its confs. Spark's own
arguments, labels, ports and configuration are the framework's to add
(:mod:`kubemill.engines.spark.framework.planner`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubemill.api.kube import (
    Container,
    ContainerPort,
    EnvVar,
    EnvVarSource,
    PodSpec,
    PodTemplateSpec,
    TemplateMeta,
)
from kubemill.engines.spark.api.names import (
    JVM_OVERHEAD_FACTOR,
    MAX_NAME,
    MIN_MEMORY_OVERHEAD_MIB,
    NON_JVM_OVERHEAD_FACTOR,
    SPARK_MEMORY,
    spark_memory_mib,
)
from kubemill.engines.spark.api.spec import (
    SECRET_ENV,
    DriverSpec,
    SparkApplicationSpec,
    SparkApplicationType,
    SparkPodSpec,
    SparkPort,
)


def memory_overhead_factor(spec: SparkApplicationSpec) -> float:
    """The overhead factor: the spec's, else Spark's for the application's type."""
    if spec.memory_overhead_factor is not None:
        return float(spec.memory_overhead_factor)
    jvm = (spec.type or SparkApplicationType.SCALA).jvm
    return JVM_OVERHEAD_FACTOR if jvm else NON_JVM_OVERHEAD_FACTOR


def pod_memory_mib(spec: SparkApplicationSpec, memory: str, overhead: str | None) -> int:
    """A pod's memory in MiB as Spark requests it: the heap plus the overhead (the one
    given, else the factor's share of the heap, at least 384 MiB)."""
    heap = spark_memory_mib(memory)
    extra = (
        spark_memory_mib(overhead)
        if overhead is not None
        else max(MIN_MEMORY_OVERHEAD_MIB, heap * memory_overhead_factor(spec))
    )
    return int(heap + extra)


def pod_template(spec: SparkApplicationSpec, role: SparkPodSpec, container: str) -> PodTemplateSpec:
    """The pod template one role's fields stand for: the user's ``template`` (if any) with
    every field of the role on top, as Spark merges a pod template with its confs.

    The main container (named ``container``, or the template's first) gets the image,
    env, resources, mounts, security context, lifecycle and ports; ``sidecars`` follow
    it; the pod gets the volumes the role mounts, the scheduling fields, the service
    account, labels and annotations. Spark's own arguments, labels, ports and
    configuration are the framework's to add.
    """
    base = PodTemplateSpec.model_validate(role.template or {})
    pod = base.spec
    main = _main_container(pod, container)
    main.image = role.image or spec.image or main.image
    main.image_pull_policy = spec.image_pull_policy or main.image_pull_policy
    env = _role_env(role) + [
        EnvVar(name=variable, value=path)
        for _volume, path, variable in _config_volumes(spec, role)
        if variable
    ]
    main.env = (main.env or []) + env or None
    main.env_from = (main.env_from or []) + (role.env_from or []) or None
    main.resources = _resources(spec, role, main.resources)
    mounts = list(main.volume_mounts or []) + list(role.volume_mounts or [])
    mounts += [
        {"name": volume["name"], "mountPath": path, "readOnly": True}
        for volume, path, _env in _config_volumes(spec, role)
    ]
    main.volume_mounts = mounts or None
    main.security_context = role.security_context or main.security_context
    main.lifecycle = role.lifecycle or main.lifecycle
    if role.ports:
        main.ports = (main.ports or []) + _container_ports(role.ports)
    pod.containers += [c.model_copy(deep=True) for c in role.sidecars or []]
    if role.init_containers:
        pod.init_containers = (pod.init_containers or []) + [
            c.model_copy(deep=True) for c in role.init_containers
        ]
    pod.volumes = _volumes(spec, role, pod.volumes) or None
    if role.host_network:
        # As upstream: a pod on the host's network still resolves cluster names.
        pod.dns_policy = "ClusterFirstWithHostNet"
    pod.restart_policy = "Never"
    pod.service_account_name = role.service_account or pod.service_account_name
    pod.scheduler_name = role.scheduler_name or pod.scheduler_name
    selector = {**(pod.node_selector or {}), **(spec.node_selector or {})}
    selector.update(role.node_selector or {})
    pod.node_selector = selector or None
    pod.affinity = role.affinity or pod.affinity
    pod.tolerations = role.tolerations or pod.tolerations
    pod.security_context = role.pod_security_context or pod.security_context
    pod.host_network = role.host_network if role.host_network is not None else pod.host_network
    pod.dns_config = role.dns_config or pod.dns_config
    if role.termination_grace_period_seconds is not None:
        pod.termination_grace_period_seconds = role.termination_grace_period_seconds
    pod.host_aliases = role.host_aliases or pod.host_aliases
    if role.share_process_namespace is not None:
        pod.share_process_namespace = role.share_process_namespace
    pod.runtime_class_name = role.runtime_class_name or pod.runtime_class_name
    pod.priority_class_name = role.priority_class_name or pod.priority_class_name
    if spec.image_pull_secrets:
        pod.image_pull_secrets = [{"name": name} for name in spec.image_pull_secrets]
    meta = TemplateMeta(
        labels={**base.metadata.labels, **(role.labels or {})},
        annotations={**base.metadata.annotations, **(role.annotations or {})},
    )
    # A deep copy: the view must share no list or mapping with the spec it came from.
    return PodTemplateSpec(metadata=meta, spec=pod).model_copy(deep=True)


def _main_container(pod: PodSpec, name: str) -> Container:
    """The container Spark runs in: the template's one of that name, else its first
    (Spark's rule), else a new one."""
    for candidate in pod.containers:
        if candidate.name == name:
            return candidate
    if pod.containers:
        return pod.containers[0]
    pod.containers.append(Container(name=name))
    return pod.containers[0]


def _role_env(role: SparkPodSpec) -> list[EnvVar]:
    """``env``, then the deprecated ``envVars`` and ``envSecretKeyRefs`` (sorted), then the
    variables typed Secrets announce their files by."""
    out = [e.model_copy(deep=True) for e in role.env or []]
    out += [EnvVar(name=k, value=v) for k, v in sorted((role.env_vars or {}).items())]
    out += [
        EnvVar(
            name=k,
            value_from=EnvVarSource(secret_key_ref={"name": ref.name, "key": ref.key}),
        )
        for k, ref in sorted((role.env_secret_key_refs or {}).items())
    ]
    for secret in role.secrets or []:
        if secret.secret_type in SECRET_ENV:
            variable, file = SECRET_ENV[secret.secret_type]
            out.append(EnvVar(name=variable, value=f"{secret.path.rstrip('/')}/{file}"))
    return out


def _resources(
    spec: SparkApplicationSpec, role: SparkPodSpec, current: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Requests and limits as Spark sets them: ``coreRequest`` (else ``cores``) CPU
    requested, ``coreLimit`` the CPU limit, the heap plus overhead as the memory request
    and limit, GPUs as a limit."""
    requests: dict[str, Any] = dict((current or {}).get("requests") or {})
    limits: dict[str, Any] = dict((current or {}).get("limits") or {})
    conf = spec.spark_conf or {}
    if role.core_request is not None:
        requests["cpu"] = role.core_request
    elif role.cores is not None:
        requests["cpu"] = str(role.cores)
    if role.core_limit is not None:
        limits["cpu"] = role.core_limit
    name = "driver" if isinstance(role, DriverSpec) else "executor"
    memory = role.memory or conf.get(f"spark.{name}.memory")
    if memory is not None and SPARK_MEMORY.match(memory):
        size = pod_memory_mib(spec, memory, role.memory_overhead)
        requests["memory"] = limits["memory"] = f"{size}Mi"
    if role.gpu is not None:
        limits[role.gpu.name] = role.gpu.quantity
    out = {**(current or {})}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out or None


def _container_ports(ports: Iterable[SparkPort]) -> list[ContainerPort]:
    return [
        ContainerPort(name=p.name, container_port=p.container_port, protocol=p.protocol)
        for p in ports
    ]


def _volumes(
    spec: SparkApplicationSpec, role: SparkPodSpec, current: list[Any] | None
) -> list[Any]:
    """The template's volumes, the ones of ``spec.volumes`` this role mounts (as upstream
    adds only those), and one per ConfigMap and Secret of the role."""
    out = list(current or [])
    have = {v.get("name") for v in out if isinstance(v, Mapping)}
    mounted = {m.get("name") for m in role.volume_mounts or [] if isinstance(m, Mapping)}
    for volume in spec.volumes or []:
        name = volume.get("name") if isinstance(volume, Mapping) else None
        if name in mounted and name not in have:
            out.append(volume)
            have.add(name)
    return out + [volume for volume, _path, _env in _config_volumes(spec, role)]


SPARK_CONF_DIR = "/etc/spark/conf"
HADOOP_CONF_DIR = "/etc/hadoop/conf"
"""Where upstream mounts ``sparkConfigMap`` and ``hadoopConfigMap`` (and points
``SPARK_CONF_DIR``/``HADOOP_CONF_DIR`` at)."""


def _config_volumes(
    spec: SparkApplicationSpec, role: SparkPodSpec
) -> list[tuple[dict[str, Any], str, str]]:
    """(volume, mount path, variable naming the path or "") for the ConfigMaps and Secrets
    a role gets: ``sparkConfigMap`` and ``hadoopConfigMap`` (both roles), the role's
    ``configMaps`` and ``secrets`` (each a volume ``<name>-vol``, as upstream names them)."""
    out: list[tuple[dict[str, Any], str, str]] = []
    if spec.spark_config_map:
        volume = {"name": "spark-configmap-volume", "configMap": {"name": spec.spark_config_map}}
        out.append((volume, SPARK_CONF_DIR, "SPARK_CONF_DIR"))
    if spec.hadoop_config_map:
        volume = {"name": "hadoop-configmap-volume", "configMap": {"name": spec.hadoop_config_map}}
        out.append((volume, HADOOP_CONF_DIR, "HADOOP_CONF_DIR"))
    for config_map in role.config_maps or []:
        volume = {"name": _volume_name(config_map.name), "configMap": {"name": config_map.name}}
        out.append((volume, config_map.path, ""))
    for secret in role.secrets or []:
        volume = {"name": _volume_name(secret.name), "secret": {"secretName": secret.name}}
        out.append((volume, secret.path, ""))
    return out


def _volume_name(name: str) -> str:
    """``<name>-vol``, cut to the 63 characters a volume name may have (as upstream cuts it)."""
    return f"{name}-vol"[:MAX_NAME]
