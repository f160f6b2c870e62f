"""The registry: one Engine per kind, and everything that derives from it follows.

A kind registered at run time appears in the loader's table, the CRDs, the operator's RBAC
and watched resources, and the Kubernetes client's names, with no edit anywhere else.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import ClassVar

import pytest
from pydantic import Field

from kubemill.api import Job, KindApi, ReplicaSpec, RunPolicy
from kubemill.api.base import KubeModel
from kubemill.engines.jax.framework import Jax
from kubemill.engines.mars.framework import Mars
from kubemill.engines.mpi.framework import MPI
from kubemill.engines.paddle.framework import Paddle
from kubemill.engines.pytorch.framework import PyTorch
from kubemill.engines.ray.framework.raycluster import Ray
from kubemill.engines.ray.framework.rayjob import RayJobs
from kubemill.engines.spark.framework.planner import Spark
from kubemill.engines.tensorflow.framework import TensorFlow
from kubemill.engines.trainer.framework import Trainer
from kubemill.engines.xgboost.framework import XGBoost
from kubemill.frameworks import Network, Plan, PlanError
from kubemill.kinds import (
    BUILTIN,
    CONTROLLER_LINES,
    CONTROLLERS,
    ENGINE_LINES,
    Controller,
    Engine,
    Entry,
    OperatorGrant,
    UnknownKind,
    controllers,
    crds,
    engine_for,
    engines,
    entries,
    entry_for,
    is_builtin,
    is_controller,
    is_service,
    kind_table,
    load_document,
    load_one,
    plan_for,
    registered,
    unregister,
)
from kubemill.substrates.kubernetes.client.kinds import job_kinds
from kubemill.substrates.kubernetes.install import all_rules, operator_rules
from kubemill.substrates.kubernetes.operator.settings import OperatorSettings


class ProbeSpec(KubeModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    probe_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class ProbeJob(Job):
    KIND: ClassVar[str] = "ProbeJob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = ("Probe",)
    DEFAULT_CONTAINER: ClassVar[str] = "probe"
    REPLICA_SPECS_FIELD: ClassVar[str] = "probeReplicaSpecs"
    kind: str = "ProbeJob"
    spec: ProbeSpec = Field(default_factory=ProbeSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.probe_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


class ProbeFramework:
    kind = "ProbeJob"

    def plan(self, job: Job, network: Network) -> Plan:
        raise PlanError("not needed here")


PROBE = Engine(
    KindApi(model=ProbeJob, plural="probejobs", short_names=("prb",), upstream=("probes.io/v2",)),
    ProbeFramework(),
    "a kind registered by a test",
    grants=(
        OperatorGrant(("",), ("persistentvolumeclaims",), ("create", "update"), "probe volumes"),
        OperatorGrant(("",), ("pods",), ("get",), "probes read pods"),
    ),
)

MANIFEST = """
apiVersion: {api}
kind: ProbeJob
metadata: {{name: p}}
spec:
  probeReplicaSpecs:
    Probe:
      template: {{spec: {{containers: [{{name: probe, image: x, command: [x]}}]}}}}
"""


@pytest.fixture
def probe() -> Iterator[Engine]:
    with registered(PROBE) as engine:
        yield engine
    assert "ProbeJob" not in kind_table().kind_names()


def test_the_builtins_are_one_entry_each() -> None:
    kinds = [
        "TFJob",
        "PyTorchJob",
        "MPIJob",
        "SparkApplication",
        "MarsCluster",
        "JAXJob",
        "XGBoostJob",
        "PaddleJob",
        "TrainJob",
        "RayCluster",
        "RayJob",
    ]
    assert [e.kind for e in BUILTIN] == kinds
    assert engines()[: len(BUILTIN)] == BUILTIN
    assert isinstance(engine_for("TFJob").framework, TensorFlow)
    assert isinstance(engine_for("PyTorchJob").framework, PyTorch)
    assert isinstance(engine_for("MPIJob").framework, MPI)
    assert isinstance(engine_for("SparkApplication").framework, Spark)
    assert isinstance(engine_for("MarsCluster").framework, Mars)
    assert isinstance(engine_for("JAXJob").framework, Jax)
    assert isinstance(engine_for("XGBoostJob").framework, XGBoost)
    assert isinstance(engine_for("PaddleJob").framework, Paddle)
    assert isinstance(engine_for("TrainJob").framework, Trainer)
    assert isinstance(engine_for("RayCluster").framework, Ray)
    assert isinstance(engine_for("RayJob").framework, RayJobs)
    assert [c["spec"]["names"]["kind"] for c in crds()] == [*kinds, "ScheduledSparkApplication"]


def test_a_controller_is_an_entry_of_its_own_after_the_engines() -> None:
    # A ScheduledSparkApplication runs no pods: it creates SparkApplications.
    assert [c.kind for c in CONTROLLERS] == ["ScheduledSparkApplication"]
    assert controllers() == CONTROLLERS
    assert [e.kind for e in entries()] == [
        *(e.kind for e in engines()),
        "ScheduledSparkApplication",
    ]
    scheduled = entry_for("ScheduledSparkApplication")
    assert isinstance(scheduled, Controller)
    assert scheduled.controls == "SparkApplication"
    assert entry_for(scheduled.controls) is engine_for("SparkApplication")
    assert scheduled.local.runs  # a local loop asks the same core
    assert "ScheduledSparkApplication" in kind_table().kind_names()
    with pytest.raises(ValueError, match="built in"):
        unregister("ScheduledSparkApplication")
    # No plan: asking for its engine says what it is instead.
    with pytest.raises(UnknownKind, match="runs no pods of its own: it creates SparkApplications"):
        engine_for("ScheduledSparkApplication")


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(
        UnknownKind, match=r"no engine runs 'SparkJob'.*MPIJob, MarsCluster, PaddleJob, PyTorchJob"
    ):
        engine_for("SparkJob")
    job = ProbeJob(metadata={"name": "x"})
    with pytest.raises(UnknownKind, match="ProbeJob"):
        plan_for(job, network=None)  # type: ignore[arg-type]
    assert issubclass(UnknownKind, PlanError) and issubclass(UnknownKind, LookupError)


def test_each_line_names_its_kind_in_lower_case_and_where_its_record_is() -> None:
    lines = (*ENGINE_LINES, *CONTROLLER_LINES)
    builtins: list[Entry] = [*BUILTIN, *CONTROLLERS]
    assert [line.record() for line in lines] == builtins
    assert [line.singular for line in lines] == [e.kind.lower() for e in builtins]
    # Each line points at its engine folder's registry record, and nowhere else.
    for line, record in zip(lines, builtins, strict=True):
        module, _, attribute = line.entry.partition(":")
        assert re.fullmatch(r"kubemill\.engines\.[a-z]+\.entry", module), line
        assert record.api.model.__module__.startswith(module.removesuffix("entry")), line
        assert attribute.isupper(), line


def test_a_kind_is_found_by_its_exact_name_only() -> None:
    # The line is found in lower case, the record must then be of that very kind.
    with pytest.raises(UnknownKind, match="no engine runs 'pytorchjob'"):
        engine_for("pytorchjob")
    assert not is_controller("scheduledsparkapplication") and is_controller(
        "ScheduledSparkApplication"
    )
    assert not is_builtin("tfjob") and is_builtin("TFJob") and not is_builtin("ProbeJob")
    assert is_service("MarsCluster") and not is_service("marscluster")
    errors = load_document({"apiVersion": "kubeflow.org/v1", "kind": "pytorchjob"})[1]
    assert [(e.path, e.message, e.hint) for e in errors] == [
        ("kind", "unknown kind 'pytorchjob'", "did you mean 'PyTorchJob'?")
    ]


PYTORCH_MANIFEST = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: p}
spec:
  pytorchReplicaSpecs:
    Master:
      template: {spec: {containers: [{name: pytorch, image: x, command: [x]}]}}
"""

FIRST_USE = """
import json, sys
from kubemill.kinds import engine_for, is_controller, load_one
before = sorted(m for m in sys.modules if m.startswith("kubemill.engines."))
load_one(sys.argv[1])
engine_for("PyTorchJob")
is_controller("PyTorchJob")
after = sorted(m for m in sys.modules if m.startswith("kubemill.engines."))
from kubemill.kinds import BUILTIN
every = sorted(m for m in sys.modules if m.startswith("kubemill.engines."))
print(json.dumps([before, after, every]))
"""


def test_an_engine_is_imported_the_first_time_its_kind_is_asked_about() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FIRST_USE, PYTORCH_MANIFEST],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    before, after, every = (set(modules) for modules in json.loads(done.stdout))
    assert before == {"kubemill.engines.base"}
    assert {m.split(".")[2] for m in after} == {"base", "pytorch"}
    # Reading BUILTIN imports every engine's record.
    assert {f"kubemill.engines.{e}.entry" for e in ("tensorflow", "spark", "ray")} <= every


def test_an_engine_whose_framework_plans_another_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="plans 'TFJob'"):
        Engine(PROBE.api, TensorFlow(), "mismatched")


def test_builtins_cannot_be_unregistered_and_kinds_not_registered_twice(probe: Engine) -> None:
    with pytest.raises(ValueError, match="built in"):
        unregister("TFJob")
    with pytest.raises(ValueError, match="already"), registered(PROBE):
        pass


def test_a_registered_kind_loads_in_every_accepted_version(probe: Engine) -> None:
    assert kind_table().versions_of("ProbeJob") == ["kubemill.dev/v1", "probes.io/v2"]
    for api in ("kubemill.dev/v1", "probes.io/v2"):
        job = load_one(MANIFEST.format(api=api))
        assert isinstance(job, ProbeJob) and job.api_version == "kubemill.dev/v1"


def test_a_registered_kind_gets_a_crd_rbac_and_watches(probe: Engine) -> None:
    crd = {c["spec"]["names"]["kind"]: c for c in crds()}["ProbeJob"]
    assert crd["metadata"]["name"] == "probejobs.kubemill.dev"
    assert crd["spec"]["names"]["shortNames"] == ["prb"]
    rules = {(r.api_groups, r.resources): r for r in all_rules()}
    assert (
        "probejobs"
        in rules[
            (
                ("kubemill.dev",),
                (
                    "tfjobs",
                    "pytorchjobs",
                    "mpijobs",
                    "sparkapplications",
                    "jaxjobs",
                    "xgboostjobs",
                    "paddlejobs",
                    "probejobs",
                ),
            )
        ].resources
    )
    upstream = rules[(("probes.io",), ("probejobs",))]
    assert upstream.when == "upstream"
    # A grant for a new resource is a rule of its own; one for a resource every kind has
    # widens that rule (one rule per resource), with the reason kept.
    assert rules[(("",), ("persistentvolumeclaims",))].verbs == ("create", "update")
    pods = rules[(("",), ("pods",))]
    assert "get" in pods.verbs and "probes read pods" in pods.why
    assert not any(r.resources == ("probejobs",) for r in operator_rules())  # upstream off
    settings = OperatorSettings(serve_upstream_groups=True)
    served = [(r.group, r.plural) for r in settings.job_resources()]
    assert ("kubemill.dev", "probejobs") in served and ("probes.io", "probejobs") in served
    assert "prb" in {n for k in job_kinds() for n in k.names}
