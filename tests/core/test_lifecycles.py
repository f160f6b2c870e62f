"""The core's extension points are protocols, chosen by the registry, naming no kind.

``reconcile`` runs whatever lifecycle it is given (the engine's); the built-in lifecycles
refuse a Plan whose data belongs to another one (a wiring mistake, said at once); every
engine names its lifecycle and every controller its rules; and no lifecycle or controller
module of the core imports a kind's API.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

import kubemill.core
from kubemill.api import Job
from kubemill.core import (
    REPLICA_SET,
    RERUN,
    SERVICE_CLUSTER,
    Observed,
    ReconcileOptions,
    ReconcileResult,
    reconcile,
)
from kubemill.frameworks import Attempts, Plan, RunRetry
from kubemill.kinds import controllers, engines, lifecycle_for, load_one, plan_for
from kubemill.substrates.kubernetes.network import KubernetesNetwork

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CORE = Path(kubemill.core.__file__).resolve().parent
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROTOCOL_MODULES = (
    "lifecycle.py",
    "jobpass.py",
    "replicaset.py",
    "rerun.py",
    "application.py",
    "service.py",
    "controller.py",
    "reconcile.py",
)
KIND_API_MODULES = {
    "kubemill.engines.spark.api.application",
    "kubemill.engines.spark.api.scheduled",
    "kubemill.engines.spark.api.spec",
    "kubemill.engines.spark.api.pods",
    "kubemill.engines.spark.api.validation",
    "kubemill.engines.mars.api",
    "kubemill.engines.tensorflow.api",
    "kubemill.engines.pytorch.api",
    "kubemill.engines.mpi.api",
}
KIND_NAMES = {"SparkApplication", "ScheduledSparkApplication", "MarsCluster", "MarsClusterStatus"}


def tfjob() -> Job:
    container = {"name": "tensorflow", "image": "tf", "command": ["python"]}
    return load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "t"},
            "spec": {
                "tfReplicaSpecs": {
                    "Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
                }
            },
        }
    )


def mars() -> Job:
    return load_one(
        {"apiVersion": "kubemill.dev/v1", "kind": "MarsCluster", "metadata": {"name": "m"}}
        | {"spec": {"workerNum": 1, "workerCpu": 1, "workerMem": "1g"}}
    )


def k8s_plan(job: Job) -> Plan:
    return plan_for(job, KubernetesNetwork(job.name, job.namespace))


@dataclass(frozen=True)
class Recording:
    """A lifecycle of a test's own: it decides nothing, and says it was asked."""

    name: str = "recording"
    pods_by_label: bool = False
    judges_refusals: bool = False

    def reconcile(
        self, job: Job, plan: Plan, observed: Observed, now: datetime, options: ReconcileOptions
    ) -> ReconcileResult:
        return ReconcileResult(actions=(), status=job.status, requeue_after=None)


def test_reconcile_runs_the_lifecycle_it_is_given() -> None:
    job = tfjob()
    plan = k8s_plan(job)
    assert reconcile(job, plan, Observed(), NOW, lifecycle=Recording()).actions == ()
    assert reconcile(job, plan, Observed(), NOW).actions  # the replica set's: create, events


@pytest.mark.parametrize(
    ("lifecycle", "why"),
    [
        pytest.param(REPLICA_SET, "sets service_cluster", id="replica-set-given-a-service"),
        pytest.param(RERUN, "needs the Plan's reruns", id="rerun-given-no-policy"),
    ],
)
def test_a_lifecycle_refuses_another_lifecycles_plan(lifecycle: object, why: str) -> None:
    job = mars()
    with pytest.raises(ValueError, match=why):
        reconcile(job, k8s_plan(job), Observed(), NOW, lifecycle=lifecycle)  # type: ignore[arg-type]


def test_the_service_lifecycle_needs_a_service_plan() -> None:
    job = tfjob()
    with pytest.raises(ValueError, match="needs the Plan's service_cluster"):
        reconcile(job, replace(k8s_plan(job)), Observed(), NOW, lifecycle=SERVICE_CLUSTER)


def spark() -> Job:
    document = yaml.safe_load((EXAMPLES / "spark-pi.yaml").read_text())
    return load_one(document)


@pytest.mark.parametrize(
    ("make", "lifecycle"),
    [
        pytest.param(mars, SERVICE_CLUSTER, id="service-cluster"),
        pytest.param(spark, RERUN, id="rerun"),
    ],
)
def test_a_whole_run_retry_is_refused_where_no_lifecycle_honours_it(
    make: Callable[[], Job], lifecycle: object
) -> None:
    """Only the replica set retries a whole run: any other lifecycle given a Plan with
    ``retry`` says so, rather than fail for good a job whose kind promised retries."""
    job = make()
    plan = replace(k8s_plan(job), retry=RunRetry(limit=1, recorded=lambda _: Attempts()))
    reconcile(job, k8s_plan(job), Observed(), NOW, lifecycle=lifecycle)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"sets retry, which the .* lifecycle does not run"):
        reconcile(job, plan, Observed(), NOW, lifecycle=lifecycle)  # type: ignore[arg-type]


def test_the_registry_names_every_lifecycle_and_rules() -> None:
    chosen = {engine.kind: lifecycle_for(engine.kind).name for engine in engines()}
    assert chosen["TFJob"] == chosen["PyTorchJob"] == chosen["MPIJob"] == "replica-set"
    assert chosen["SparkApplication"] == "rerun"
    assert chosen["MarsCluster"] == "service-cluster"
    # Locally a Mars cluster is replanned into replicas: the replica-set rules judge it.
    assert lifecycle_for("MarsCluster", local=True).name == "replica-set"
    assert lifecycle_for("MarsCluster").pods_by_label
    assert lifecycle_for("SparkApplication").judges_refusals
    assert all(c.rules.run_label for c in controllers())


@pytest.mark.parametrize("module", PROTOCOL_MODULES)
def test_no_protocol_module_imports_a_kinds_api(module: str) -> None:
    tree = ast.parse((CORE / module).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not imported & KIND_API_MODULES, module
    assert not imported & KIND_NAMES, module
