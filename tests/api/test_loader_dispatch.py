"""Loading manifests: YAML documents, dispatch on apiVersion/kind, upstream and legacy forms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import API_VERSION, CleanPodPolicy, ManifestError, RestartPolicy
from kubemill.engines.pytorch.api import PyTorchJob
from kubemill.engines.tensorflow.api import TFJob
from kubemill.kinds import kind_table, load, load_one
from kubemill.sdk.manifests import load_path

MANIFESTS = Path(__file__).parents[1] / "manifests"
GOOD = MANIFESTS / "good"

TF_WORKER = """
apiVersion: {api}
kind: TFJob
metadata: {{name: {name}}}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{{name: tensorflow, image: local}}]
"""

PT_MASTER = """
apiVersion: {api}
kind: PyTorchJob
metadata: {{name: {name}}}
spec:
  pytorchReplicaSpecs:
    Master:
      template:
        spec:
          containers: [{{name: pytorch, image: local}}]
"""

MPI_LAUNCHER = """
apiVersion: {api}
kind: MPIJob
metadata: {{name: {name}}}
spec:
  mpiReplicaSpecs:
    Launcher:
      template:
        spec:
          containers: [{{name: launcher, image: local, command: [mpirun, hostname]}}]
"""

SPARK_APP = """
apiVersion: {api}
kind: SparkApplication
metadata: {{name: {name}}}
spec:
  type: Python
  sparkVersion: "4.0.0"
  image: spark:4.0.0
  mainApplicationFile: local:///opt/spark/examples/src/main/python/pi.py
"""

SCHEDULED_SPARK_APP = """
apiVersion: {api}
kind: ScheduledSparkApplication
metadata: {{name: {name}}}
spec:
  schedule: "@every 5m"
  template:
    type: Python
    sparkVersion: "4.0.0"
    image: spark:4.0.0
    mainApplicationFile: local:///opt/spark/examples/src/main/python/pi.py
"""

JAX_WORKERS = """
apiVersion: {api}
kind: JAXJob
metadata: {{name: {name}}}
spec:
  jaxReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{{name: jax, image: local}}]
"""

XGBOOST_MASTER = """
apiVersion: {api}
kind: XGBoostJob
metadata: {{name: {name}}}
spec:
  xgbReplicaSpecs:
    Master:
      template:
        spec:
          containers: [{{name: xgboost, image: local}}]
"""

PADDLE_WORKERS = """
apiVersion: {api}
kind: PaddleJob
metadata: {{name: {name}}}
spec:
  paddleReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{{name: paddle, image: local}}]
"""

MARS_CLUSTER = """
apiVersion: {api}
kind: MarsCluster
metadata: {{name: {name}}}
spec:
  workerCpu: 1
  workerMem: 1g
"""

TRAIN_JOB = """
apiVersion: {api}
kind: TrainJob
metadata: {{name: {name}}}
spec:
  runtimeRef: {{name: torch-distributed}}
  trainer: {{image: pytorch/pytorch, command: [torchrun, train.py]}}
"""

RAY_CLUSTER = """
apiVersion: {api}
kind: RayCluster
metadata: {{name: {name}}}
spec:
  headGroupSpec:
    template:
      spec:
        containers: [{{name: ray-head, image: rayproject/ray}}]
  workerGroupSpecs:
    - groupName: workers
      replicas: 1
      template:
        spec:
          containers: [{{name: ray-worker, image: rayproject/ray}}]
"""

RAY_JOB = """
apiVersion: {api}
kind: RayJob
metadata: {{name: {name}}}
spec:
  entrypoint: python -c 'import ray; ray.init()'
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers: [{{name: ray-head, image: rayproject/ray}}]
"""

TEMPLATES = {
    "TFJob": TF_WORKER,
    "PyTorchJob": PT_MASTER,
    "MPIJob": MPI_LAUNCHER,
    "SparkApplication": SPARK_APP,
    "ScheduledSparkApplication": SCHEDULED_SPARK_APP,
    "MarsCluster": MARS_CLUSTER,
    "JAXJob": JAX_WORKERS,
    "XGBoostJob": XGBOOST_MASTER,
    "PaddleJob": PADDLE_WORKERS,
    "TrainJob": TRAIN_JOB,
    "RayCluster": RAY_CLUSTER,
    "RayJob": RAY_JOB,
}
SUSPENDABLE = {kind: TEMPLATES[kind] for kind in TEMPLATES if kind != "MarsCluster"}
"""A MarsCluster is a service kept running until deleted: it has no suspend (yet)."""


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        pytest.param(TF_WORKER.format(api=API_VERSION, name="a"), TFJob, id="kubemill-tfjob"),
        pytest.param(TF_WORKER.format(api="kubeflow.org/v1", name="a"), TFJob, id="kubeflow-tfjob"),
        pytest.param(
            PT_MASTER.format(api=API_VERSION, name="a"), PyTorchJob, id="kubemill-pytorchjob"
        ),
        pytest.param(
            PT_MASTER.format(api="kubeflow.org/v1", name="a"), PyTorchJob, id="kubeflow-pytorchjob"
        ),
        pytest.param((GOOD / "seed-tfjob-v1alpha1.yaml").read_text(), TFJob, id="seed-v1alpha1"),
    ],
)
def test_dispatch_on_api_version_and_kind(text: str, kind: type) -> None:
    job = load_one(text)
    assert type(job) is kind
    # Whatever group it came in, the loaded job is ours.
    assert job.api_version == API_VERSION
    assert job.to_wire()["apiVersion"] == API_VERSION


def test_every_registered_kind_loads() -> None:
    templates = TEMPLATES
    table = kind_table()
    for kind in table.kind_names():
        for api_version in table.versions_of(kind):
            if api_version.endswith("v1alpha1"):
                continue  # a different shape; covered by the seed
            loaded = load_one(templates[kind].format(api=api_version, name="k"))
            assert kind == type(loaded).KIND


def _merged(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(target)
    for key, value in patch.items():
        out[key] = _merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


@pytest.mark.parametrize("suspend", [True, False])
def test_every_kinds_suspend_patch_sets_what_its_run_policy_reads(suspend: bool) -> None:
    # `kubemill suspend` merge-patches this; the Spark kinds' field is spec.suspend.
    for kind, template in SUSPENDABLE.items():
        manifest = yaml.safe_load(template.format(api=API_VERSION, name="k"))
        job = load_one(manifest)
        patched = load_one(_merged(manifest, type(job).suspend_patch(suspend)))
        assert patched.run_policy.suspend is suspend, kind


def test_multi_document_yaml_keeps_order_and_skips_empty_documents() -> None:
    text = "\n---\n".join(
        [
            TF_WORKER.format(api="kubeflow.org/v1", name="one"),
            "",  # an empty document between separators
            PT_MASTER.format(api=API_VERSION, name="two"),
            TF_WORKER.format(api=API_VERSION, name="three"),
        ]
    )
    jobs = load(text)
    assert [(type(j).__name__, j.name) for j in jobs] == [
        ("TFJob", "one"),
        ("PyTorchJob", "two"),
        ("TFJob", "three"),
    ]


def test_dicts_and_lists_of_dicts_load_like_yaml() -> None:
    import yaml

    doc = yaml.safe_load(TF_WORKER.format(api="kubeflow.org/v1", name="d"))
    assert load(doc) == load([doc]) == load(yaml.safe_dump(doc))


def test_load_one_refuses_several_jobs() -> None:
    with pytest.raises(ManifestError, match="expected one job, found 2"):
        load_one((GOOD / "multi-document.yaml").read_text())


@pytest.mark.parametrize(
    "text",
    [pytest.param("", id="empty"), pytest.param("---\n---\n", id="only-separators")],
)
def test_a_manifest_without_jobs_is_an_error(text: str) -> None:
    with pytest.raises(ManifestError, match="no job in this manifest"):
        load(text)


def test_kubeflow_v1_manifest_loads_unchanged() -> None:
    job = load_path(GOOD / "tfjob-v1-ps-workers.yaml")[0]
    assert isinstance(job, TFJob)
    assert (job.name, job.namespace, job.metadata.labels) == (
        "dist-mnist",
        "ml",
        {"team": "vision"},
    )
    policy = job.run_policy
    assert policy.clean_pod_policy is CleanPodPolicy.RUNNING
    assert (policy.backoff_limit, policy.ttl_seconds_after_finished) == (3, 600)
    worker = job.replica_specs["Worker"]
    assert worker.restart_policy is RestartPolicy.EXIT_CODE
    assert worker.template.metadata.annotations == {"sidecar.istio.io/inject": "false"}
    container = worker.template.spec.containers[0]
    assert container.args == ["--train_steps=100"]
    assert container.resources == {"limits": {"cpu": "1", "memory": "1Gi"}}
    assert container.env is not None and container.env[0].value_from is not None
    assert container.env[0].value_from.field_ref is not None
    assert container.env[0].value_from.field_ref.field_path == "metadata.name"
    # Fields the user wrote come back on the wire exactly as written.
    wire = job.to_wire()["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert wire["spec"]["containers"][0]["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]


def test_seed_v1alpha1_converts_master_to_chief() -> None:
    job = load_path(GOOD / "seed-tfjob-v1alpha1.yaml")[0]
    assert isinstance(job, TFJob)
    assert job.name == "example-job"
    assert {t: job.replica_count(t) for t in job.replica_specs} == {
        "Chief": 1,
        "Worker": 1,
        "PS": 2,
    }
    for spec in job.replica_specs.values():
        # The pod-level restartPolicy of v1alpha1 becomes the replica's; the pod's is cleared.
        assert spec.restart_policy is RestartPolicy.ON_FAILURE
        assert spec.template.spec.restart_policy is None
        (container,) = spec.template.spec.containers
        assert container.image == "gcr.io/tf-on-k8s-dogfood/tf_sample:dc944ff"
        assert container.command is None  # the seed has none; running locally says so


def test_loaded_jobs_map_their_field_paths_back_to_the_manifest_as_written() -> None:
    seed = load_path(GOOD / "seed-tfjob-v1alpha1.yaml")[0]
    # The seed lists MASTER, WORKER, PS: errors found later point at those list items.
    assert seed.source_path("spec.tfReplicaSpecs.PS.template.spec.containers[0].command") == (
        "spec.replicaSpecs[2].template.spec.containers[0].command"
    )
    assert seed.source_path("spec.tfReplicaSpecs.Chief.replicas") == "spec.replicaSpecs[0].replicas"
    current = load_one(seed.to_wire())
    path = "spec.tfReplicaSpecs.PS.template.spec.containers[0].command"
    assert current.source_path(path) == path


def test_v1alpha1_tf_port_becomes_the_tfjob_port() -> None:
    job = load_one(
        """
apiVersion: kubeflow.org/v1alpha1
kind: TFJob
metadata: {name: ported}
spec:
  replicaSpecs:
    - replicas: 2
      tfReplicaType: WORKER
      tfPort: 3333
      template:
        spec:
          containers: [{name: tensorflow, image: local}]
"""
    )
    ports = job.replica_specs["Worker"].template.spec.containers[0].ports
    assert ports is not None
    assert [(p.name, p.container_port) for p in ports] == [("tfjob-port", 3333)]
