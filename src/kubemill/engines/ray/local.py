"""Ray on one machine: a RayCluster's Plan as the local substrate runs it.

On Kubernetes every Ray node has a pod of its own, so every node uses Ray's fixed ports and
reaches the head through its Service. Here every node is a process on this machine, so
:func:`local_plan` (the engine's ``LocalSupport.replan``) gives each one what a pod gave it:

- **Ports.** Every port a Ray node opens is one the local :class:`Network` reserved for
  that replica: the head's GCS, dashboard, Ray client and metrics ports, and on every node
  its node manager, object manager, dashboard agent (HTTP and gRPC), runtime-env agent and
  :data:`WORKER_PORTS` ports for its worker processes (``--worker-port-list``). Workers join
  the head at ``127.0.0.1:<the head's GCS port>``.
- **Loopback, as far as Ray allows.** ``--node-ip-address=127.0.0.1`` and
  ``--dashboard-host=127.0.0.1`` (whatever ``rayStartParams`` says), and no usage report
  leaves the machine (``--disable-usage-stats``; the engine's local env sets
  ``RAY_USAGE_STATS_ENABLED=0`` too). The dashboard listens on 127.0.0.1 only and every
  address a node is given is 127.0.0.1; but Ray 2.60's ``ray start`` resolves a loopback
  node address to the machine's own (``resolve_ip_for_localhost``) unless multi-node
  clusters are disabled altogether, so its GCS, raylets and agents listen on the machine's
  address (or every interface) as ``ray start`` by hand does. Their traffic stays on this
  machine: every peer is on it.
- **Token authentication, always.** Since its nodes listen on the machine's address,
  anyone who can reach the machine could otherwise run code in the cluster: every node
  starts with Ray's token authentication on (``RAY_AUTH_MODE=token``) whatever
  ``authOptions`` says (on Kubernetes a cluster without it has none, as KubeRay's: its
  pods are reached through the cluster's network only), with the job's own token, the
  same secret file set as on Kubernetes
  (:func:`~kubemill.engines.ray.framework.raycluster.token_files`), which the substrate
  generates (mode 0600 in the job's files directory; the planner only names it) and every
  node reads (``RAY_AUTH_TOKEN_PATH``: there is no Secret to take ``RAY_AUTH_TOKEN``
  from here, and ``RAY_AUTH_TOKEN``, which Ray would prefer, is emptied so a token in the
  user's own environment does not replace it). A RayJob's submitter reads
  it too, and the substrate sends it to the head's job API
  (:attr:`~kubemill.frameworks.RemoteRun.bearer_token`). A client does as the nodes do:
  the file's path is ``status.authTokenFile`` (kubemill's), which ``kubemill cluster
  create`` prints with the variables to set. Ray's health endpoints, which the probes
  ask, need no token.
- **Temp dir.** Each node its own ``--temp-dir``, short (:func:`temp_dir`), and ``TMPDIR``
  too: Ray puts unix sockets under both (its dashboard's forkserver under ``TMPDIR``), and
  a socket's path must fit in 107 bytes, which the replica's own temporary directory
  under the job's directory may not. Ray leaves its session logs there after a stop, as
  it does in ``/tmp/ray``.
- **Readiness.** The same health endpoints as KubeRay's probes, on the node's own ports,
  with ``curl`` (the local kubelet runs exec probes): the head once its dashboard says the
  GCS is healthy, a worker once its raylet (which has registered with the GCS) answers.
  Workers start once the head is ready (stage 1, ``start_gate`` ready).
- **Status.** ``endpoints`` are the head's ports here, and ``endpoint`` the dashboard's
  ``http://127.0.0.1:<port>`` while Ready; ``head.podIP`` is 127.0.0.1, so
  :func:`~kubemill.engines.ray.api.raycluster.client_addresses` gives the ``ray.init``
  address here.

A RayJob on an existing cluster (``clusterSelector``, :func:`local_selected_plan`) has no
node of its own: its submitter and the substrate reach the selected cluster's head on its
loopback port, with that cluster's token file (its ``status.authTokenFile``).

Pure: ports and paths come from the :class:`Network`; the token's value never passes here.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from kubemill.api import EnvVar, Job
from kubemill.engines.ray.api.auth import TOKEN_KEY, token_secret_name
from kubemill.engines.ray.api.raycluster import HEAD, HeadInfo, RayCluster, RayClusterSpec
from kubemill.engines.ray.api.rayjob import RayJob
from kubemill.engines.ray.framework.raycluster import (
    AGENT_LISTEN_PORT,
    AUTH_MODE_VAR,
    CLIENT_PORT,
    DASHBOARD_PORT,
    GCS_PORT,
    HEAD_PORTS,
    METRICS_PORT,
    TOKEN_MOUNT,
    TOKEN_VAR,
    Nodes,
    cluster_replicas,
    group_params,
    head_defaults,
    ray_start,
    ready_rule,
    status_extension,
    with_token,
    worker_defaults,
)
from kubemill.engines.ray.framework.rayjob import job_plan
from kubemill.engines.ray.framework.selected import selected_of, selected_plan
from kubemill.frameworks.plan import Network, Plan, replica_name
from kubemill.frameworks.remote import SecretFile

LOCAL_HOST = "127.0.0.1"

NODE_PORTS: dict[str, int] = {
    "node-manager-port": 8077,
    "object-manager-port": 8076,
    "dashboard-agent-grpc-port": 52366,
    "runtime-env-agent-port": 52367,
    "dashboard-agent-listen-port": AGENT_LISTEN_PORT,
    "metrics-export-port": METRICS_PORT,
}
"""The ports every node opens, by ``ray start`` option, and the container port each is
reserved as (a key of the Network's: in a pod Ray picks them itself)."""
HEAD_ONLY_PORTS: dict[str, int] = {
    "port": GCS_PORT,
    "dashboard-port": DASHBOARD_PORT,
    "ray-client-server-port": CLIENT_PORT,
}
WORKER_PORTS = 16
"""Ports reserved per node for its worker processes (one each, while it runs)."""
FIRST_WORKER_PORT = 10002
"""Ray's own ``--min-worker-port``: the keys of a node's worker ports start there."""

TEMP_ROOT = "/tmp/kubemill-ray"  # noqa: S108 - short on purpose: Ray's sockets live under it
USAGE_STATS_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
"""Every local replica's environment: Ray reports no usage from here."""
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"  # noqa: S105 - a variable's name


def token_path(network: Network, name: str) -> str:
    """Where the token of the Ray cluster named ``name`` is on this machine."""
    return f"{network.files_path(token_secret_name(name), TOKEN_MOUNT)}/{TOKEN_KEY}"


def auth_env(network: Network, name: str) -> tuple[EnvVar, ...]:
    """What makes a Ray process (a node, the submitter, a client) use the job's token."""
    return (
        EnvVar(name=AUTH_MODE_VAR, value="token"),
        EnvVar(name=TOKEN_PATH_VAR, value=token_path(network, name)),
        EnvVar(name=TOKEN_VAR, value=""),
    )


def temp_dir(network: Network, replica: str) -> str:
    """A node's ``--temp-dir``: short (Ray's socket paths under it must fit in 107 bytes)
    and the job's own (a digest of the job's files directory and the replica's name)."""
    job_dir = network.files_path("ray", "/tmp/ray")  # noqa: S108 - only digested
    digest = hashlib.sha256(f"{job_dir}\0{replica}".encode()).hexdigest()[:16]
    return f"{TEMP_ROOT}/{digest}"


def _port(network: Network, rtype: str, index: int, key: int) -> int:
    return network.endpoint(rtype, index, key).port


def node_overrides(network: Network, name: str, rtype: str, index: int) -> dict[str, str]:
    """The ``ray start`` flags this machine imposes on one node: its reserved ports, the
    loopback address, its temp dir, no usage stats."""
    ports = {**NODE_PORTS, **(HEAD_ONLY_PORTS if rtype == HEAD else {})}
    flags = {option: str(_port(network, rtype, index, key)) for option, key in ports.items()}
    workers = [
        str(_port(network, rtype, index, FIRST_WORKER_PORT + i)) for i in range(WORKER_PORTS)
    ]
    flags["worker-port-list"] = ",".join(workers)
    flags["node-ip-address"] = LOCAL_HOST
    if rtype == HEAD:
        flags["dashboard-host"] = LOCAL_HOST
    flags["temp-dir"] = temp_dir(network, replica_name(name, rtype, index))
    flags["disable-usage-stats"] = ""
    return flags


def _curl(url: str) -> dict[str, Any]:
    return {
        "exec": {"command": ["curl", "-sf", "--max-time", "2", "-o", "/dev/null", url]},
        "periodSeconds": 1,
        "timeoutSeconds": 3,
        "failureThreshold": 3,
    }


def local_nodes(name: str, spec: RayClusterSpec, network: Network) -> Nodes:
    """Nodes as processes of this machine (see the module)."""
    params = group_params(spec)
    gcs = f"{LOCAL_HOST}:{_port(network, HEAD, 0, GCS_PORT)}"

    def command(rtype: str, index: int) -> list[str]:
        overrides = node_overrides(network, name, rtype, index)
        if rtype == HEAD:
            return ray_start(["--head", "--block"], head_defaults(), params[rtype], overrides)
        role = ["--block", f"--address={gcs}"]
        return ray_start(role, worker_defaults(), params[rtype], overrides)

    def probe(rtype: str, index: int) -> dict[str, Any]:
        if rtype == HEAD:
            port = _port(network, HEAD, 0, DASHBOARD_PORT)
            return _curl(f"http://{LOCAL_HOST}:{port}/api/gcs_healthz")
        port = _port(network, rtype, index, AGENT_LISTEN_PORT)
        return _curl(f"http://{LOCAL_HOST}:{port}/api/local_raylet_healthz")

    def env(rtype: str, index: int) -> list[EnvVar]:
        # Ray's own processes make unix sockets under TMPDIR too (its dashboard's
        # multiprocessing forkserver): the node's short temp dir, not the replica's.
        own = [EnvVar(name="TMPDIR", value=temp_dir(network, replica_name(name, rtype, index)))]
        if rtype == HEAD:
            return [*own, EnvVar(name="RAY_ADDRESS", value=gcs)]
        return [
            *own,
            EnvVar(name="RAY_IP", value=LOCAL_HOST),
            EnvVar(name="FQ_RAY_IP", value=LOCAL_HOST),
        ]

    return Nodes(command=command, probe=probe, env=env)


def head_ports(network: Network) -> dict[str, int]:
    """The head's ports on this machine, by KubeRay's names."""
    return {key: _port(network, HEAD, 0, port) for key, port in HEAD_PORTS.items()}


def local_plan(job: Job, plan: Plan, network: Network) -> Plan:
    """The RayCluster's Plan as this machine runs it (``LocalSupport.replan``)."""
    if not isinstance(job, RayCluster):
        return plan
    planned = local_cluster_plan(job.name, job.spec, plan, network)
    return with_token(planned, auth_env(network, job.name))


def local_cluster_plan(name: str, spec: RayClusterSpec, plan: Plan, network: Network) -> Plan:
    """``plan`` (a Ray cluster's, named ``name``) with its nodes as local processes."""
    ports = head_ports(network)
    return replace(
        plan,
        replicas=cluster_replicas(name, spec, network, local_nodes(name, spec, network)),
        outcome=ready_rule(spec),
        start_gate="ready",
        status_extension=status_extension(
            spec,
            ports,
            f"http://{LOCAL_HOST}:{ports['dashboard']}",
            HeadInfo(pod_ip=LOCAL_HOST, pod_name=replica_name(name, HEAD, 0)),
            token_file=token_path(network, name),
        ),
    )


def local_job_plan(job: Job, plan: Plan, network: Network) -> Plan:
    """A RayJob's Plan as this machine runs it: its cluster as a RayCluster's here, then the
    submitter and the Ray job on the head's dashboard at its loopback port, every one of
    them and the substrate's requests with the job's token."""
    if not isinstance(job, RayJob):
        return plan
    if job.selects:
        return local_selected_plan(job)
    cluster = local_cluster_plan(job.name, job.cluster.spec, plan, network)
    port = head_ports(network)["dashboard"]
    planned = job_plan(job, cluster, f"http://{LOCAL_HOST}:{port}", port)
    return with_token(planned, auth_env(network, job.name))


def local_selected_plan(job: RayJob) -> Plan:
    """A RayJob's Plan on the RayCluster it selects, a local job of its namespace: the
    submitter and the Ray job on that head's dashboard at its loopback port, with that
    cluster's token (its ``status.authTokenFile``, as a client uses it)."""
    selected = selected_of(job)
    planned = selected_plan(job, f"http://{LOCAL_HOST}:{selected.dashboard_port}")
    token = selected.token_file
    if token is None or planned.remote is None:
        return planned
    env = (
        EnvVar(name=AUTH_MODE_VAR, value="token"),
        EnvVar(name=TOKEN_PATH_VAR, value=token),
        EnvVar(name=TOKEN_VAR, value=""),
    )
    directory, _, file = token.rpartition("/")
    return replace(
        planned,
        replicas=tuple(replace(rep, env=(*rep.env, *env)) for rep in planned.replicas),
        remote=replace(planned.remote, bearer_token=SecretFile(directory, file)),
    )


__all__ = [
    "FIRST_WORKER_PORT",
    "HEAD_ONLY_PORTS",
    "LOCAL_HOST",
    "NODE_PORTS",
    "TEMP_ROOT",
    "TOKEN_PATH_VAR",
    "USAGE_STATS_ENV",
    "WORKER_PORTS",
    "auth_env",
    "head_ports",
    "local_cluster_plan",
    "local_job_plan",
    "local_nodes",
    "local_plan",
    "local_selected_plan",
    "node_overrides",
    "temp_dir",
    "token_path",
]
