"""A toy service-cluster engine, written as a plugin would be: its API, its framework, one
Engine with the service-cluster lifecycle and a ``kubemill cluster create toyserve`` entry.

``ToyServe`` is a set of web servers that serve until deleted: Ready while ``minServers`` of
them answer, never Succeeded, with the address they serve at in ``status.endpoint``. On
Kubernetes it is what a Mars cluster is: a Deployment of servers and a NodePort Service,
built whole by the framework and kept running by the Deployment controller
(:data:`kubemill.core.SERVICE_CLUSTER`). On one machine it is replanned into replicas the
local substrate starts (``python -m http.server`` on a port of the job's own), each ready
once an exec probe fetches its page, judged by the replica-set lifecycle with a
``ServicePolicy``. Nothing in kubemill names the kind: tests register it through
``KUBEMILL_ENGINES=toy_service_engine:ENGINE``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from pydantic import Field

from kubemill.api import (
    ClusterOptions,
    ConditionType,
    Container,
    Job,
    JobStatus,
    KindApi,
    PodSpec,
    PodTemplateSpec,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
)
from kubemill.api.base import KubeModel
from kubemill.api.common import CleanPodPolicy
from kubemill.core import REPLICA_SET, SERVICE_CLUSTER
from kubemill.frameworks import (
    Network,
    Plan,
    PlanError,
    ReplicaPlan,
    ServiceCluster,
    ServicePolicy,
    StatusView,
    service_fields,
)
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    replica_name,
)
from kubemill.kinds import Engine, LocalSupport, OperatorGrant, ServiceEngine

KIND = "ToyServe"
SERVER = "Server"
CONTAINER = "server"
PORT = 8000
IMAGE = "python"


class ToyServeSpec(KubeModel):
    servers: int = Field(default=1, ge=1, le=8)
    min_servers: int | None = Field(default=None, ge=1)
    image: str = IMAGE

    @property
    def needed(self) -> int:
        return self.min_servers or self.servers


class ToyServeStatus(JobStatus):
    endpoint: str | None = None
    ready_replicas: dict[str, int] = Field(default_factory=dict)


class ToyServe(Job):
    KIND: ClassVar[str] = KIND
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = (SERVER,)
    DEFAULT_CONTAINER: ClassVar[str] = CONTAINER
    DEFAULT_RESTART_POLICY: ClassVar[RestartPolicy] = RestartPolicy.ALWAYS
    DERIVED_REPLICA_SPECS: ClassVar[bool] = True

    kind: str = KIND
    spec: ToyServeSpec = Field(default_factory=ToyServeSpec)
    status: ToyServeStatus = Field(default_factory=ToyServeStatus)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        template = PodTemplateSpec(
            spec=PodSpec(containers=[Container(name=CONTAINER, image=self.spec.image)])
        )
        return {
            SERVER: ReplicaSpec(
                replicas=self.spec.servers, restart_policy=RestartPolicy.ALWAYS, template=template
            )
        }

    @property
    def run_policy(self) -> RunPolicy:
        return RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)


def server_labels(name: str) -> dict[str, str]:
    return {LABEL_JOB_NAME: name, LABEL_REPLICA_TYPE: SERVER.lower()}


def server_command(port: int | str) -> list[str]:
    return ["python", "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def probe_command(port: int) -> list[str]:
    """Ready once the server answers a request for its page."""
    fetch = f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=2)"
    return ["python", "-c", fetch]


def build_objects(job: ToyServe) -> tuple[dict[str, Any], ...]:
    """The Deployment of servers and the NodePort Service in front of them."""
    labels = server_labels(job.name)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{job.name}-server", "namespace": job.namespace, "labels": labels},
        "spec": {
            "replicas": job.spec.servers,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": CONTAINER,
                            "image": job.spec.image,
                            "command": ["python", "-m", "http.server", str(PORT)],
                            "ports": [{"name": "http", "containerPort": PORT}],
                            "readinessProbe": {"httpGet": {"path": "/", "port": PORT}},
                        }
                    ]
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{job.name}-web", "namespace": job.namespace, "labels": labels},
        "spec": {
            "type": "NodePort",
            "selector": labels,
            "ports": [{"name": "http", "port": PORT, "targetPort": PORT}],
        },
    }
    return deployment, service


class ToyServeFramework:
    kind = KIND

    def plan(self, job: Job, network: Network) -> Plan:
        if not isinstance(job, ToyServe):
            raise PlanError(f"the toy service framework plans ToyServes, not {job.KIND}")
        del network  # the servers are found through their Service, not addresses
        return Plan(
            kind=KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=(),
            outcome=ServicePolicy(SERVER, job.spec.needed),
            services=False,
            service_cluster=ServiceCluster(
                objects=build_objects(job),
                ready_needed={SERVER: job.spec.needed},
                web_service=f"{job.name}-web",
                web_type=SERVER,
            ),
            status_extension=service_fields,
        )


def _served_at(address: str) -> Any:
    """Locally: the first server's address while the cluster is Ready."""

    def status(view: StatusView) -> Mapping[str, object]:
        ready = sum(
            1 for p in view.pods if p.replica_type == SERVER and p.phase == "Running" and p.ready
        )
        condition = view.status.condition(ConditionType.READY)
        up = condition is not None and condition.status == "True" and not view.status.finished
        return {"endpoint": address if up else None, "ready_replicas": {SERVER: ready}}

    return status


def local_plan(job: Job, plan: Plan, network: Network) -> Plan:
    """The servers as local replicas: each on a port of its own, ready once it answers."""
    if not isinstance(job, ToyServe):
        return plan
    replicas = []
    for index in range(job.spec.servers):
        port = network.endpoint(SERVER, index, PORT).port
        container = Container(
            name=CONTAINER,
            image=job.spec.image,
            command=server_command(port),
            readiness_probe={"exec": {"command": probe_command(port)}, "periodSeconds": 1},
        )
        replicas.append(
            ReplicaPlan(
                replica_type=SERVER,
                index=index,
                name=replica_name(job.name, SERVER, index),
                template=PodTemplateSpec(spec=PodSpec(containers=[container])),
                container=CONTAINER,
                env=(),
                ports={"http": PORT},
                restart_policy=RestartPolicy.ALWAYS,
                labels={**server_labels(job.name), LABEL_REPLICA_INDEX: str(index)},
                host="127.0.0.1",
            )
        )
    first = network.endpoint(SERVER, 0, PORT)
    return replace(
        plan,
        replicas=tuple(replicas),
        service_cluster=None,
        status_extension=_served_at(f"http://{first}"),
    )


def cluster_manifest(name: str, options: ClusterOptions) -> dict[str, object]:
    """``kubemill cluster create toyserve --workers N``: N servers."""
    spec: dict[str, object] = {"servers": options.workers}
    if options.min_workers is not None:
        spec["minServers"] = options.min_workers
    if options.image is not None:
        spec["image"] = options.image
    return {"apiVersion": "kubemill.dev/v1", "kind": KIND, "metadata": {"name": name}, "spec": spec}


ENGINE = Engine(
    KindApi(model=ToyServe, plural="toyserves", short_names=("tserve",)),
    ToyServeFramework(),
    "a toy service cluster registered by a plugin (tests): web servers, Ready while they serve",
    grants=(
        OperatorGrant(
            ("apps",),
            ("deployments",),
            ("list", "watch", "create", "update"),
            "a toy service's servers are a Deployment",
        ),
    ),
    lifecycle=SERVICE_CLUSTER,
    restarts=False,
    finishes=False,
    local=LocalSupport(replan=local_plan, lifecycle=REPLICA_SET),
    cluster=ServiceEngine("toyserve", cluster_manifest),
)
