"""Ray clusters: a RayCluster's Plan, what KubeRay builds (its ``pod.go`` and ``service.go``).

- **The head** (replica ``Head`` 0, stage 0): the template's first container (the Ray
  container, as KubeRay takes it) runs ``ray start --head --block`` with the head's ports
  (GCS :data:`GCS_PORT`, dashboard :data:`DASHBOARD_PORT`, Ray client :data:`CLIENT_PORT`,
  metrics :data:`METRICS_PORT`; or the ports its ``rayStartParams`` give them,
  :func:`kube_head_ports`), the dashboard on every interface of its pod
  (``--dashboard-host=0.0.0.0``, KubeRay's default), then the group's ``rayStartParams`` as
  ``--key=value`` flags (:func:`ray_start`). An argv list: no shell.
- **The head Service** ``<cluster>-head-svc`` (``serviceType``, default ClusterIP) in front
  of those ports; workers join through it.
- **Each worker group**: ``replicas`` pods (replica type: the ``groupName``; stage 1, created
  once the head is ready), each running ``ray start --block
  --address=<cluster>-head-svc.<ns>.svc.cluster.local:6379`` and its group's flags.
- **Readiness**, as KubeRay probes it: a node's raylet answers on its dashboard agent
  (``/api/local_raylet_healthz``), and on the head the GCS answers on the dashboard
  (``/api/gcs_healthz``). A probe the template sets is kept.
- **Outcome**: a :class:`ServicePolicy`: Ready (KubeRay's ``RayClusterProvisioned``) while
  the head and every worker are ready; never Succeeded. Pods restart ``Always``.
- **Status**: :func:`status_extension`: KubeRay's ``state``, worker counts, ``endpoints``,
  ``head`` and ``HeadPodReady``, from what the core's pass decided and observed.
- **Token authentication** (``authOptions.mode: token``; none without ``authOptions``, as
  KubeRay's): :func:`with_token` gives the Plan the cluster's token as a secret file set
  (a Secret named after the cluster, its key ``auth_token``, as KubeRay's; the substrate
  generates the token, the Plan only names it: :class:`~kubemill.frameworks.RandomToken`),
  and every replica (head, workers, a RayJob's submitter) ``RAY_AUTH_MODE=token`` and
  ``RAY_AUTH_TOKEN`` from that Secret (:func:`kube_auth_env`); a RayJob's job API is then
  read with it (:attr:`~kubemill.frameworks.RemoteRun.bearer_token`). The set is mounted
  too (every file set is), unread on Kubernetes: the same set is the local substrate's
  token file (:mod:`kubemill.engines.ray.local`).

How a node runs is a :class:`Nodes` (its argv, probe and environment): :func:`kube_nodes`
here, the local substrate's in :mod:`kubemill.engines.ray.local`; the rest of the Plan is
built once (:func:`cluster_replicas`) for both. Pure: addresses come from the
:class:`Network`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kubemill.api import ConditionType, EnvVar, Job
from kubemill.api.kube import ContainerPort, EnvVarSource, PodTemplateSpec
from kubemill.engines.ray.api.auth import TOKEN_KEY, token_secret_name
from kubemill.engines.ray.api.raycluster import (
    HEAD,
    MAX_INT32,
    HeadInfo,
    RayCluster,
    RayClusterSpec,
)
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    ExposedService,
    FilePlan,
    FileSet,
    Network,
    Plan,
    RandomToken,
    ReplicaPlan,
    ServicePolicy,
    ServicePort,
    StatusExtension,
    StatusView,
    replica_name,
)
from kubemill.frameworks.remote import SecretFile

GCS_PORT = 6379
DASHBOARD_PORT = 8265
CLIENT_PORT = 10001
METRICS_PORT = 8080
AGENT_LISTEN_PORT = 52365
"""The dashboard agent's HTTP port on every node (the readiness probes ask it)."""

HEAD_PORTS: dict[str, int] = {
    "gcs-server": GCS_PORT,
    "dashboard": DASHBOARD_PORT,
    "client": CLIENT_PORT,
    "metrics": METRICS_PORT,
}
"""The head's ports by KubeRay's names: its container's, its Service's, ``status.endpoints``
(each replaced by the head's ``rayStartParams`` option of :data:`PORT_OPTIONS` in a pod)."""
PORT_OPTIONS: dict[str, str] = {
    "gcs-server": "port",
    "dashboard": "dashboard-port",
    "client": "ray-client-server-port",
    "metrics": "metrics-export-port",
}
"""The ``ray start`` option of each head port."""
WORKER_PORTS: dict[str, int] = {"metrics": METRICS_PORT}

LABEL_CLUSTER = "ray.io/cluster"
LABEL_NODE_TYPE = "ray.io/node-type"
LABEL_GROUP = "ray.io/group"
LABEL_IS_RAY_NODE = "ray.io/is-ray-node"
HEAD_GROUP = "headgroup"
"""KubeRay's ``ray.io/group`` of the head."""

BARE_FLAGS = frozenset(
    {
        "disable-usage-stats",
        "ray-debugger-external",
        "no-redirect-output",
        "enable-resource-isolation",
    }
)
"""``ray start`` options that take no value: ``"true"`` (or ``""``) writes the bare flag."""


TOKEN_MOUNT = "/var/run/ray-token"  # noqa: S105 - a path, not a token
"""Where the token set is mounted in a pod (unread there: see the module)."""
AUTH_MODE_VAR = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"  # noqa: S105 - a variable's name, not a token


def token_files(name: str) -> FileSet:
    """The token of the Ray cluster named ``name``: a Secret of KubeRay's name and key,
    generated by the substrate, readable by its owner only."""
    token = FilePlan(TOKEN_KEY, mode=0o600, source=RandomToken())
    return FileSet(token_secret_name(name), (token,), mount_path=TOKEN_MOUNT, secret=True)


def kube_auth_env(name: str) -> tuple[EnvVar, ...]:
    """What makes a Ray process in a pod use the cluster's token, as KubeRay sets it: the
    mode, and the token from the cluster's Secret (the pod spec names the Secret only)."""
    source = EnvVarSource(
        secret_key_ref={"name": token_secret_name(name), "key": TOKEN_KEY},
    )
    return (
        EnvVar(name=AUTH_MODE_VAR, value="token"),
        EnvVar(name=TOKEN_VAR, value_from=source),
    )


def with_token(plan: Plan, env: Sequence[EnvVar]) -> Plan:
    """``plan`` with the cluster's token (see the module): its file set (once, whatever
    ``plan`` had of it), ``env`` on every replica (after the template's own, so a
    template's ``RAY_AUTH_TOKEN`` does not replace the token the substrate reads back), and
    the remote run's requests carrying the token."""
    files = token_files(plan.name)
    remote = plan.remote
    if remote is not None:
        remote = replace(remote, bearer_token=SecretFile(files.name, TOKEN_KEY))
    return replace(
        plan,
        replicas=tuple(replace(rep, env=(*rep.env, *env)) for rep in plan.replicas),
        files=(*(f for f in plan.files if f.name != files.name), files),
        remote=remote,
    )


def head_service_name(cluster: str) -> str:
    """KubeRay's name of the head Service."""
    return f"{cluster}-head-svc"


def head_address(cluster: str, namespace: str, port: int = GCS_PORT) -> str:
    """``host:port`` of the head's GCS as workers reach it: through the head Service."""
    return f"{head_service_name(cluster)}.{namespace}.svc.cluster.local:{port}"


def kube_head_ports(spec: RayClusterSpec) -> dict[str, int]:
    """The head's ports in a pod: :data:`HEAD_PORTS`, each replaced by the port its
    ``rayStartParams`` option gives (``dashboard-port: "8266"``), so that what the head
    listens on is what its container, its Service and its address declare."""
    params = spec.head_group_spec.ray_start_params
    ports = dict(HEAD_PORTS)
    for name, option in PORT_OPTIONS.items():
        value = str(params.get(option, "")).strip()
        if value.isdigit() and 0 < int(value) < 65536:
            ports[name] = int(value)
    return ports


def ray_start(
    role: list[str],
    defaults: Mapping[str, str],
    params: Mapping[str, str],
    overrides: Mapping[str, str],
) -> list[str]:
    """``ray start <role>``, then flags: ``defaults`` (in their order), replaced by the
    group's ``params``, replaced by the substrate's ``overrides``; the keys not among the
    defaults follow in key order."""
    merged = {**defaults, **params, **overrides}
    keys = [*defaults, *sorted(key for key in merged if key not in defaults)]
    flags = []
    for key in keys:
        value = merged[key]
        bare = value == "" or (key in BARE_FLAGS and value.lower() == "true")
        if key in BARE_FLAGS and value.lower() == "false":
            continue
        flags.append(f"--{key}" if bare else f"--{key}={value}")
    return ["ray", "start", *role, *flags]


def head_defaults() -> dict[str, str]:
    """The head's flags before its ``rayStartParams``, as KubeRay gives them."""
    return {
        "port": str(GCS_PORT),
        "dashboard-port": str(DASHBOARD_PORT),
        "ray-client-server-port": str(CLIENT_PORT),
        "dashboard-host": "0.0.0.0",  # noqa: S104 - KubeRay's default, inside the pod
        "metrics-export-port": str(METRICS_PORT),
        "dashboard-agent-listen-port": str(AGENT_LISTEN_PORT),
    }


def worker_defaults() -> dict[str, str]:
    """A worker's flags before its ``rayStartParams``."""
    return {
        "metrics-export-port": str(METRICS_PORT),
        "dashboard-agent-listen-port": str(AGENT_LISTEN_PORT),
    }


def healthz_probe(urls: list[str]) -> dict[str, Any]:
    """KubeRay's readiness probe: each URL answers ``success`` (wget, as its images have)."""
    checks = " && ".join(f"wget -T 2 -q -O- {url} | grep success" for url in urls)
    return {
        "exec": {"command": ["bash", "-c", checks]},
        "initialDelaySeconds": 10,
        "periodSeconds": 5,
        "timeoutSeconds": 2,
        "failureThreshold": 10,
    }


@dataclass(frozen=True)
class Nodes:
    """How each Ray node of a cluster runs on a substrate: for a replica (type, index),
    its ``ray start`` argv, its readiness probe, and environment beyond KubeRay's."""

    command: Callable[[str, int], list[str]]
    probe: Callable[[str, int], dict[str, Any]]
    env: Callable[[str, int], list[EnvVar]]


def kube_nodes(name: str, namespace: str, spec: RayClusterSpec) -> Nodes:
    """Nodes as KubeRay runs them in pods: fixed ports, workers joining the head Service."""
    params = group_params(spec)
    ports = kube_head_ports(spec)
    address = head_address(name, namespace, ports["gcs-server"])

    def command(rtype: str, index: int) -> list[str]:
        del index
        if rtype == HEAD:
            return ray_start(["--head", "--block"], head_defaults(), params[rtype], {})
        return ray_start(["--block", f"--address={address}"], worker_defaults(), params[rtype], {})

    def probe(rtype: str, index: int) -> dict[str, Any]:
        del index
        raylet = f"http://localhost:{AGENT_LISTEN_PORT}/api/local_raylet_healthz"
        if rtype == HEAD:
            gcs = f"http://localhost:{ports['dashboard']}/api/gcs_healthz"
            return healthz_probe([raylet, gcs])
        return healthz_probe([raylet])

    def env(rtype: str, index: int) -> list[EnvVar]:
        del index
        if rtype == HEAD:
            return [EnvVar(name="RAY_ADDRESS", value=f"127.0.0.1:{ports['gcs-server']}")]
        host = address.rsplit(":", 1)[0]
        return [EnvVar(name="RAY_IP", value=host), EnvVar(name="FQ_RAY_IP", value=host)]

    return Nodes(command=command, probe=probe, env=env)


def group_params(spec: RayClusterSpec) -> dict[str, Mapping[str, str]]:
    """Each replica type's ``rayStartParams``."""
    params: dict[str, Mapping[str, str]] = {HEAD: spec.head_group_spec.ray_start_params}
    for group in spec.worker_group_specs:
        params[group.group_name] = group.ray_start_params
    return params


def _template(
    template: PodTemplateSpec,
    cluster: str,
    rtype: str,
    argv: list[str],
    probe: dict[str, Any],
    ports: Mapping[str, int],
) -> PodTemplateSpec:
    """The group's template with its Ray container running ``argv``, KubeRay's labels,
    its ports declared and (unless the template has one) the readiness probe."""
    template = template.model_copy(deep=True)
    head = rtype == HEAD
    template.metadata.labels = {
        **template.metadata.labels,
        LABEL_CLUSTER: cluster,
        LABEL_NODE_TYPE: "head" if head else "worker",
        LABEL_GROUP: HEAD_GROUP if head else rtype,
        LABEL_IS_RAY_NODE: "yes",
    }
    container = template.spec.containers[0]
    container.command = argv
    container.args = None
    declared = {port.name for port in container.ports or []}
    container.ports = [
        *(container.ports or []),
        *(
            ContainerPort(name=name, container_port=port, protocol="TCP")
            for name, port in ports.items()
            if name not in declared
        ),
    ]
    if container.readiness_probe is None:
        container.readiness_probe = probe
    return template


def cluster_replicas(
    name: str,
    spec: RayClusterSpec,
    network: Network,
    nodes: Nodes,
    head_ports: Mapping[str, int] = HEAD_PORTS,
) -> tuple[ReplicaPlan, ...]:
    """The head (stage 0) with ``head_ports``, then each worker group's replicas (stage 1),
    by group order."""
    groups: list[tuple[str, int, PodTemplateSpec, Mapping[str, int]]] = [
        (HEAD, 1, spec.head_group_spec.template, head_ports)
    ]
    groups += [
        (group.group_name, group.count, group.template, WORKER_PORTS)
        for group in spec.worker_group_specs
    ]
    replicas = []
    for rtype, count, template, ports in groups:
        for index in range(count):
            container = template.spec.containers[0].name
            replicas.append(
                ReplicaPlan(
                    replica_type=rtype,
                    index=index,
                    name=replica_name(name, rtype, index),
                    template=_template(
                        template,
                        name,
                        rtype,
                        nodes.command(rtype, index),
                        nodes.probe(rtype, index),
                        ports,
                    ),
                    container=container,
                    env=(
                        EnvVar(name="RAY_CLUSTER_NAME", value=name),
                        EnvVar(
                            name="RAY_NODE_TYPE_NAME", value=HEAD_GROUP if rtype == HEAD else rtype
                        ),
                        EnvVar(name="RAY_PORT", value=str(head_ports["gcs-server"])),
                        *nodes.env(rtype, index),
                    ),
                    ports=dict(ports),
                    restart_policy=RayCluster.DEFAULT_RESTART_POLICY,
                    labels={
                        LABEL_JOB_NAME: name,
                        LABEL_REPLICA_TYPE: rtype.lower(),
                        LABEL_REPLICA_INDEX: str(index),
                        LABEL_JOB_ROLE: "head" if rtype == HEAD else "worker",
                    },
                    stage=0 if rtype == HEAD else 1,
                    host=network.replica_host(rtype, index),
                )
            )
    return tuple(replicas)


def ready_rule(spec: RayClusterSpec) -> ServicePolicy:
    """Ready while the head and every worker of every group are ready."""
    workers = tuple(
        (group.group_name, group.count) for group in spec.worker_group_specs if group.count
    )
    return ServicePolicy(HEAD, 1, also_ready=workers)


def status_extension(
    spec: RayClusterSpec,
    endpoints: Mapping[str, int],
    dashboard: str,
    head: HeadInfo,
    *,
    token_file: str | None = None,
    token_secret: str | None = None,
) -> StatusExtension:
    """KubeRay's status fields from the pass: ``endpoints`` (the head's ports), the
    dashboard's address while Ready, ``head``, the worker counts and ``HeadPodReady``; and
    kubemill's ``authTokenFile`` or ``authTokenSecret``, where the cluster's token is
    (``token_file``: locally; ``token_secret``: its Secret on Kubernetes)."""
    groups = {group.group_name for group in spec.worker_group_specs}
    bounds = (
        sum(group.min_replicas or 0 for group in spec.worker_group_specs),
        min(sum(group.max_replicas or 0 for group in spec.worker_group_specs), MAX_INT32),
    )

    def status(view: StatusView) -> Mapping[str, object]:
        ready = {HEAD: 0, **dict.fromkeys(groups, 0)}
        running = 0
        for pod in view.pods:
            if pod.owner or pod.phase != "Running" or pod.replica_type not in ready:
                continue
            running += pod.replica_type in groups
            ready[pod.replica_type] += pod.ready
        decided = view.status
        # A suspended cluster serves nothing, whatever its last Ready said.
        suspended = decided.is_true(ConditionType.SUSPENDED)
        serving = decided.is_true(ConditionType.READY) and not (decided.finished or suspended)
        state: str | None = None
        if decided.is_true(ConditionType.FAILED):
            state = "failed"
        elif suspended:
            state = "suspended"
        elif serving:
            state = "ready"
        return {
            "state": state,
            "desired_worker_replicas": spec.desired_workers,
            "ready_worker_replicas": sum(ready[group] for group in groups),
            "available_worker_replicas": running,
            "min_worker_replicas": bounds[0],
            "max_worker_replicas": bounds[1],
            "endpoints": {key: str(port) for key, port in endpoints.items()},
            "head": head,
            "head_pod_ready": ready[HEAD] > 0,
            "endpoint": dashboard if serving else None,
            "ready_replicas": ready,
            "auth_token_file": token_file,
            "auth_token_secret": token_secret,
        }

    return status


def cluster_plan(job: Job, spec: RayClusterSpec, network: Network) -> Plan:
    """The Plan of a Ray cluster named as ``job`` (a RayCluster), as KubeRay builds it."""
    name, namespace = job.name, job.namespace
    service = head_service_name(name)
    ports = kube_head_ports(spec)
    nodes = kube_nodes(name, namespace, spec)
    return Plan(
        kind=job.KIND,
        name=name,
        namespace=namespace,
        replicas=cluster_replicas(name, spec, network, nodes, ports),
        outcome=ready_rule(spec),
        services=False,
        exposed=(
            ExposedService(
                name=service,
                replica_type=HEAD,
                ports=tuple(
                    ServicePort(name=port_name, port=port, target_port=port)
                    for port_name, port in ports.items()
                ),
                type=spec.head_group_spec.service_type or "ClusterIP",
            ),
        ),
        start_gate="ready",
        status_extension=status_extension(
            spec,
            ports,
            f"http://{service}.{namespace}.svc.cluster.local:{ports['dashboard']}",
            HeadInfo(pod_name=replica_name(name, HEAD, 0), service_name=service),
            token_secret=token_secret_name(name) if spec.token_auth else None,
        ),
    )


def kube_token(spec: RayClusterSpec, plan: Plan) -> Plan:
    """``plan`` (of a Ray cluster, or a RayJob's, whole) with the cluster's token when its
    ``authOptions`` asks for one (:func:`with_token` with KubeRay's env); else as it is."""
    return with_token(plan, kube_auth_env(plan.name)) if spec.token_auth else plan


class Ray:
    """The RayCluster framework."""

    kind = RayCluster.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        assert isinstance(job, RayCluster)
        return kube_token(job.spec, cluster_plan(job, job.spec, network))


__all__ = [
    "AGENT_LISTEN_PORT",
    "AUTH_MODE_VAR",
    "BARE_FLAGS",
    "CLIENT_PORT",
    "DASHBOARD_PORT",
    "GCS_PORT",
    "HEAD_GROUP",
    "HEAD_PORTS",
    "LABEL_CLUSTER",
    "LABEL_GROUP",
    "LABEL_IS_RAY_NODE",
    "LABEL_NODE_TYPE",
    "METRICS_PORT",
    "PORT_OPTIONS",
    "TOKEN_MOUNT",
    "TOKEN_VAR",
    "WORKER_PORTS",
    "Nodes",
    "Ray",
    "cluster_plan",
    "cluster_replicas",
    "group_params",
    "head_address",
    "head_defaults",
    "head_service_name",
    "healthz_probe",
    "kube_auth_env",
    "kube_head_ports",
    "kube_nodes",
    "kube_token",
    "ray_start",
    "ready_rule",
    "status_extension",
    "token_files",
    "with_token",
    "worker_defaults",
]
