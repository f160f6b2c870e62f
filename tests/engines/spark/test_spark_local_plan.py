"""A SparkApplication's Plan on one machine (``kubemill.engines.spark.local``): the
driver runs pyspark's spark-submit with local[N] or a standalone Master and Workers, every
port and path from the Network, the UI's address in driverInfo; and what cannot run here
is refused at the field the user wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubemill.api import JobStatus, KindTable
from kubemill.api.loader import load_one
from kubemill.engines.spark.api.application import SPARKAPPLICATION, DriverInfo, SparkApplication
from kubemill.engines.spark.framework.driver import DRIVER
from kubemill.engines.spark.framework.planner import Spark
from kubemill.engines.spark.framework.wire import PROPERTIES, UI_PORT
from kubemill.engines.spark.local import (
    EXAMPLES_NOTE,
    LOCAL_MASTER_ANNOTATION,
    LOCAL_MODE_ANNOTATION,
    local_path,
    local_plan,
    refusals,
)
from kubemill.frameworks import Plan, ReplicaPlan, StatusView
from support.framework_networks import LoopbackNetwork

SEED = Path(__file__).parents[2] / "manifests" / "spark" / "sparkapplication-v1beta2.yaml"
KINDS = KindTable([SPARKAPPLICATION])


def app(annotations: dict[str, str] | None = None, **spec: Any) -> SparkApplication:
    job = load_one(
        {
            "apiVersion": "kubemill.dev/v1",
            "kind": "SparkApplication",
            "metadata": {"name": "pi", "annotations": annotations or {}},
            "spec": {
                "type": "Python",
                "sparkVersion": "4.0.0",
                "image": "spark:4.0.0",
                "mainApplicationFile": "local:///opt/apps/pi.py",
                "arguments": ["10"],
                "executor": {"instances": 3, "cores": 2, "memory": "512m"},
                **spec,
            },
        },
        kinds=KINDS,
    )
    assert isinstance(job, SparkApplication)
    return job


def planned(job: SparkApplication) -> tuple[Plan, LoopbackNetwork]:
    network = LoopbackNetwork()
    return local_plan(job, Spark().plan(job, network), network), network


def props(plan: Plan) -> dict[str, str]:
    (conf,) = plan.files
    text = next(f.content for f in conf.files if f.name == PROPERTIES)
    return dict(line.partition("=")[::2] for line in text.splitlines())


def driver(plan: Plan) -> ReplicaPlan:
    (rep,) = plan.of_type(DRIVER)
    return rep


def argv(rep: ReplicaPlan) -> list[str]:
    container = next(c for c in rep.template.spec.containers if c.name == rep.container)
    return [*(container.command or []), *(container.args or [])]


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_the_driver_runs_spark_submit_with_local_threads_for_every_executor_core() -> None:
    plan, _ = planned(app())
    words = argv(driver(plan))
    assert words[0] == "spark-submit"
    # 3 executors x 2 cores.
    assert option(words, "--master") == "local[6]"
    assert option(words, "--deploy-mode") == "client"
    assert option(words, "--properties-file") == f"/tmp/job/files/pi-spark-conf/{PROPERTIES}"
    # local:// is a path on this machine; the arguments follow the application file.
    assert words[-2:] == ["/opt/apps/pi.py", "10"]
    assert "--class" not in words  # Python: spark-submit knows its runner
    assert [r.name for r in plan.replicas] == ["pi-driver-0"]


def test_every_address_comes_from_the_network_and_no_kubernetes_conf_is_left() -> None:
    plan, network = planned(app(sparkConf={"spark.sql.shuffle.partitions": "4"}))
    conf = props(plan)
    ui = network.endpoint(DRIVER, 0, UI_PORT).port
    assert conf["spark.ui.port"] == str(ui) != str(UI_PORT)
    ports = {conf["spark.driver.port"], conf["spark.driver.blockManager.port"], str(ui)}
    assert len(ports) == 3
    assert ports <= {str(p) for p in network.ports.values()}
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.master"] == "local[6]"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.ui.showConsoleProgress"] == "false"
    assert conf["spark.log.level"] == "WARN"
    assert conf["spark.executor.memory"] == "512m"
    assert not [k for k in conf if k.startswith("spark.kubernetes.")]
    env = {e.name: e.value for e in driver(plan).env}
    assert env["SPARK_LOCAL_DIRS"].startswith("/tmp/job/files/")


def test_with_local_threads_the_driver_may_use_the_executors_memory_too() -> None:
    job = app(driver={"memory": "1g"})
    container = driver(planned(job)[0]).template.spec.containers[0]
    assert container.resources is not None
    expected = job.pod_memory_mib(job.spec.driver) + 3 * job.pod_memory_mib(job.spec.executor)
    assert container.resources["limits"]["memory"] == f"{expected}Mi"
    # The request stays the driver's own: it is what the scheduler would reserve.
    assert container.resources["requests"]["memory"] == f"{job.pod_memory_mib(job.spec.driver)}Mi"


def test_the_application_s_own_log_level_and_master_annotation_win() -> None:
    job = app({LOCAL_MASTER_ANNOTATION: "local[2]"}, sparkConf={"spark.log.level": "INFO"})
    plan, _ = planned(job)
    assert option(argv(driver(plan)), "--master") == "local[2]"
    assert props(plan)["spark.log.level"] == "INFO"


def test_deps_on_this_machine_are_paths() -> None:
    job = app(deps={"pyFiles": ["local:///opt/lib.zip", "rel/helpers.py"], "files": ["s3a://b/f"]})
    conf = props(planned(job)[0])
    assert conf["spark.submit.pyFiles"] == "/opt/lib.zip,rel/helpers.py"
    assert conf["spark.files"] == "s3a://b/f"


def test_the_ui_address_is_in_driver_info() -> None:
    plan, network = planned(app())
    assert plan.status_extension is not None
    view = StatusView(job=app(), plan=plan, status=JobStatus(), pods=())
    info = plan.status_extension(view)["driver_info"]
    assert isinstance(info, DriverInfo)
    port = network.endpoint(DRIVER, 0, UI_PORT).port
    assert (info.web_ui_address, info.web_ui_port) == (f"127.0.0.1:{port}", port)
    assert info.pod_name == "pi-driver-0"
    assert info.web_ui_service_name is None  # no services locally


def test_standalone_runs_a_master_then_a_worker_per_executor_then_the_driver() -> None:
    plan, network = planned(app({LOCAL_MODE_ANNOTATION: "standalone"}))
    assert [(r.name, r.stage) for r in plan.replicas] == [
        ("pi-master-0", 0),
        ("pi-worker-0", 1),
        ("pi-worker-1", 1),
        ("pi-worker-2", 1),
        ("pi-driver-0", 2),
    ]
    master = argv(plan.replicas[0])
    assert master[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    url = f"spark://127.0.0.1:{option(master, '--port')}"
    ports = {option(master, "--port"), option(master, "--webui-port")}
    for worker in plan.replicas[1:4]:
        words = argv(worker)
        assert words[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]
        assert (option(words, "--cores"), option(words, "--memory")) == ("2", "512m")
        assert words[-1] == url
        assert option(words, "--work-dir").startswith("/tmp/job/files/")
        ports |= {option(words, "--port"), option(words, "--webui-port")}
        # The worker's own memory is what its executor may use: no limit of its own.
        assert worker.template.spec.containers[0].resources is None
    assert len(ports) == 8  # every daemon port distinct, all from the network
    assert ports <= {str(p) for p in network.ports.values()}
    assert option(argv(plan.replicas[-1]), "--master") == url
    conf = props(plan)
    assert conf["spark.cores.max"] == "6"
    assert conf["spark.executor.cores"] == "2"


def test_the_seed_is_refused_at_its_main_application_file() -> None:
    seed = load_one(yaml.safe_load(SEED.read_text(encoding="utf-8")), kinds=KINDS)
    asked: list[str] = []

    def exists(path: str) -> bool:
        asked.append(path)
        return False

    (error,) = refusals(seed, exists)
    assert error.path == "spec.mainApplicationFile"
    assert EXAMPLES_NOTE in error.message
    assert "gcr.io/spark-operator/spark:v2.4.5" in error.message
    assert asked == ["/opt/spark/examples/jars/spark-examples_2.11-2.4.5.jar"]


def test_files_that_are_here_or_remote_are_not_refused() -> None:
    job = app(mainApplicationFile="apps/pi.py", deps={"files": ["https://example.org/x"]})
    asked: list[str] = []
    assert refusals(job, lambda path: asked.append(path) is None) == []
    assert asked == ["apps/pi.py"]  # relative: the substrate resolves it


def test_what_cannot_run_here_is_refused_at_the_fields_written() -> None:
    job = app(
        {LOCAL_MODE_ANNOTATION: "yarn", LOCAL_MASTER_ANNOTATION: "local[0]"},
        deps={"pyFiles": ["gone.zip"]},
        driver={"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
        executor={"envFrom": [{"configMapRef": {"name": "c"}}]},
    )
    paths = {e.path for e in refusals(job, lambda path: path != "gone.zip")}
    assert paths == {
        f"metadata.annotations[{LOCAL_MODE_ANNOTATION}]",
        f"metadata.annotations[{LOCAL_MASTER_ANNOTATION}]",
        "spec.deps.pyFiles[0]",
        "spec.driver.env[0].valueFrom.secretKeyRef",
        "spec.executor.envFrom",
    }


def test_local_paths() -> None:
    assert local_path("local:///opt/a.py") == "/opt/a.py"
    assert local_path("file:///opt/a.py") == "/opt/a.py"
    assert local_path("a.py") == "a.py"
    assert local_path("env.zip#env") == "env.zip"
    assert local_path("s3a://bucket/a.py") is None
