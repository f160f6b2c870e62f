"""SparkApplications on the local substrate through the real CLI, with pyspark's real
spark-submit and JVM.

``examples/spark-pi.yaml`` completes and prints Pi, with the driver's UI on a port of its
own; an application that raises fails with its exception in ``errorMessage``; with the
standalone annotation the executors are JVMs of their own under the job's workers; the
wordcount example writes its counts; the seed's SparkPi is refused before anything starts
(the pyspark wheel has no examples jar); ``kubemill spark-submit --master local[2]``
prints Pi, and the same command again is a submission of its own. No test leaves a
process behind.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.e2e_support import EXAMPLES, Cli, processes_with_token
from support.engines import needs_java, needs_spark_submit

pytestmark = [pytest.mark.e2e, pytest.mark.engine, needs_java, needs_spark_submit]

PI = re.compile(r"Pi is roughly (\d\.\d+)")
WEB_UI = re.compile(r"Web UI: (http://127\.0\.0\.1:(\d+))")
SUBMITTED = re.compile(r"SparkApplication (pi-[0-9a-f]{16}): this submission's name")


def explain(done: Any) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"


def status(cli: Cli, name: str) -> dict[str, Any]:
    done = cli("get", name, "-o", "json")
    assert done.returncode == 0, explain(done)
    found: dict[str, Any] = json.loads(done.stdout)["status"]
    return found


def assert_nothing_left_running(cli: Cli) -> None:
    left = processes_with_token(cli.token)
    assert not left, f"processes still alive after the application ended: {left}"


def manifest_in(cli: Cli, example: str, **changes: Any) -> Path:
    """A copy of an example manifest in the test's directory, its scripts beside it."""
    doc = yaml.safe_load((EXAMPLES / example).read_text(encoding="utf-8"))
    for key, value in changes.items():
        doc[key].update(value)
    shutil.copytree(EXAMPLES / "spark", cli.cwd / "spark", dirs_exist_ok=True)
    path = cli.cwd / example
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_spark_pi_completes_prints_pi_and_its_ui_address(cli: Cli) -> None:
    # Another application at the same time, in the background: no port is shared.
    other = manifest_in(cli, "spark-pi.yaml", metadata={"name": "other-pi"})
    started = cli("run", "--detach", str(other))
    assert started.returncode == 0, explain(started)
    done = cli.run(EXAMPLES / "spark-pi.yaml")
    assert done.returncode == 0, explain(done)
    pi = PI.search(done.stdout)
    assert pi is not None, explain(done)
    assert abs(float(pi.group(1)) - 3.14159) < 0.05
    ui = WEB_UI.search(done.stdout)
    assert ui is not None, explain(done)
    state = status(cli, "spark-pi")
    assert state["applicationState"]["state"] == "COMPLETED"
    assert state["driverInfo"]["webUIAddress"] == ui.group(1).removeprefix("http://")
    assert state["driverInfo"]["webUIPort"] == int(ui.group(2)) != 4040
    followed = cli("logs", "-f", "other-pi", timeout=300)  # until it ends
    assert PI.search(followed.stdout), explain(followed)
    theirs = status(cli, "other-pi")
    assert theirs["applicationState"]["state"] == "COMPLETED"
    assert theirs["driverInfo"]["webUIPort"] not in (state["driverInfo"]["webUIPort"], 4040)
    described = cli("describe", "spark-pi")
    assert re.search(rf"Web UI:\s+{re.escape(ui.group(1))}\s", described.stdout), described.stdout
    assert_nothing_left_running(cli)


RAISES = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.sparkContext.parallelize(range(10), 2).count()
raise RuntimeError("the input is missing")
"""


def failing_app(cli: Cli, name: str, **spec: Any) -> Path:
    (cli.cwd / "raises.py").write_text(RAISES, encoding="utf-8")
    manifest = {
        "apiVersion": "kubemill.dev/v1",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Python",
            "image": "spark:4.0.0",
            "sparkVersion": "4.0.0",
            "mainApplicationFile": "raises.py",
            "driver": {"cores": 1, "memory": "512m"},
            "executor": {"cores": 1, "instances": 1, "memory": "512m"},
            **spec,
        },
    }
    path = cli.cwd / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return path


def test_an_application_that_raises_fails_with_its_exception(cli: Cli) -> None:
    done = cli.run(failing_app(cli, "raises"))
    assert done.returncode == 1, explain(done)
    state = status(cli, "raises")
    assert state["applicationState"]["state"] == "FAILED"
    # The driver's last log lines: the Python exception's last line among them.
    message = state["applicationState"]["errorMessage"]
    assert "RuntimeError: the input is missing" in message, message
    assert message.startswith("driver container failed with ExitCode: 1"), message
    assert_nothing_left_running(cli)


COUNT_RUNS = """\
import os
runs = int(open("runs").read()) + 1 if os.path.exists("runs") else 1
open("runs", "w").write(str(runs))
"""


def test_on_failure_with_one_retry_runs_the_application_exactly_twice(cli: Cli) -> None:
    path = failing_app(
        cli,
        "retried",
        restartPolicy={
            "type": "OnFailure",
            "onFailureRetries": 1,
            "onFailureRetryInterval": 1,
            "onSubmissionFailureRetries": 0,
        },
    )
    (cli.cwd / "raises.py").write_text(COUNT_RUNS + RAISES, encoding="utf-8")
    done = cli.run(path)
    assert done.returncode == 1, explain(done)
    assert (cli.cwd / "runs").read_text() == "2"
    assert status(cli, "retried")["applicationState"]["state"] == "FAILED"
    assert_nothing_left_running(cli)


EXECUTOR_JVMS = """\
import os, time
from pyspark.sql import SparkSession

def jvm_of_task(_):
    # A Python worker's parent is pyspark's daemon, whose parent is the executor's JVM.
    with open(f"/proc/{os.getppid()}/stat") as stat:
        jvm = int(stat.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{jvm}/cmdline", "rb") as cmdline:
        main = [w for w in cmdline.read().split(b"\\0") if w.startswith(b"org.apache.spark")]
    time.sleep(0.2)
    return jvm, main[0].decode() if main else ""

spark = SparkSession.builder.getOrCreate()
sc = spark.sparkContext
deadline = time.monotonic() + 120
while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
    time.sleep(0.2)  # the driver and both executors registered
jvms = sorted(set(sc.parallelize(range(8), 8).map(jvm_of_task).collect()))
print("master", sc.master)
print("driver-jvm", os.getppid())
for pid, main in jvms:
    print("executor-jvm", pid, main)
spark.stop()
"""


def test_standalone_mode_runs_executors_as_jvms_of_their_own(cli: Cli) -> None:
    (cli.cwd / "jvms.py").write_text(EXECUTOR_JVMS, encoding="utf-8")
    path = manifest_in(
        cli,
        "spark-pi.yaml",
        metadata={"name": "jvms", "annotations": {"kubemill.dev/spark-local-mode": "standalone"}},
        spec={"mainApplicationFile": "jvms.py", "arguments": []},
    )
    done = cli.run(path)
    assert done.returncode == 0, explain(done)
    master = re.search(r"master (spark://127\.0\.0\.1:\d+)", done.stdout)
    assert master is not None, explain(done)
    driver_jvm = re.search(r"driver-jvm (\d+)", done.stdout)
    assert driver_jvm is not None
    executors = re.findall(r"executor-jvm (\d+) (\S+)", done.stdout)
    assert len({pid for pid, _ in executors}) == 2, done.stdout
    assert driver_jvm.group(1) not in {pid for pid, _ in executors}
    assert {main for _, main in executors} == {
        "org.apache.spark.executor.CoarseGrainedExecutorBackend"
    }
    # The master and the workers were replicas of the job, stopped with it.
    got = cli("get", "jvms", "-o", "json")
    assert got.returncode == 0, explain(got)
    assert status(cli, "jvms")["applicationState"]["state"] == "COMPLETED"
    described = cli("describe", "jvms").stdout
    for replica in ("jvms-master-0", "jvms-worker-0", "jvms-worker-1"):
        assert re.search(rf"{replica}\s+Stopped", described), described
    assert master.group(1).rpartition(":")[2] in described
    assert_nothing_left_running(cli)


def test_the_wordcount_example_writes_the_counts(cli: Cli) -> None:
    path = manifest_in(cli, "spark-wordcount.yaml")
    done = cli.run(path)
    assert done.returncode == 0, explain(done)
    text_file, out_dir = yaml.safe_load(path.read_text())["spec"]["arguments"]
    words = re.findall(r"[a-z']+", (cli.cwd / text_file).read_text(encoding="utf-8").lower())
    written: Counter[str] = Counter()
    for part in sorted((cli.cwd / out_dir).glob("part-*.csv")):
        with part.open(encoding="utf-8") as rows:
            for word, count in csv.reader(rows):
                written[word] += int(count)
    assert written == Counter(words)
    assert_nothing_left_running(cli)


def test_the_seed_sparkpi_is_refused_before_anything_starts(cli: Cli) -> None:
    done = cli.run(EXAMPLES / "seed" / "sparkapplication-v1beta2.yaml")
    assert done.returncode != 0, explain(done)
    said = done.stdout + done.stderr
    assert "spec.mainApplicationFile" in said, said
    assert "no Scala examples jar" in said and "spark-pi.yaml" in said, said
    assert cli.job_names() == []
    assert_nothing_left_running(cli)


def test_spark_submit_with_a_local_master_prints_pi_and_runs_again(cli: Cli) -> None:
    """The same command twice: each run is a submission of its own, with the name it printed
    for `kubemill get`; the first is still there after the second (nothing was replaced)."""
    (cli.cwd / "examples" / "spark").mkdir(parents=True)
    shutil.copy(EXAMPLES / "spark" / "pi.py", cli.cwd / "examples" / "spark" / "pi.py")
    argv = ("spark-submit", "--master", "local[2]", "--name", "pi", "examples/spark/pi.py", "10")
    names = []
    for _ in range(2):
        done = cli(*argv, timeout=300)
        assert done.returncode == 0, explain(done)
        assert PI.search(done.stdout), explain(done)
        said = SUBMITTED.search(done.stderr)
        assert said, explain(done)
        names.append(said.group(1))
    assert len(set(names)) == 2, names
    assert sorted(cli.job_names()) == sorted(names)
    for name in names:
        job = json.loads(cli("get", name, "-o", "json").stdout)
        assert job["metadata"]["annotations"]["kubemill.dev/spark-local-master"] == "local[2]"
        assert job["spec"]["sparkConf"]["spark.app.name"] == "pi"
        assert job["status"]["applicationState"]["state"] == "COMPLETED"
    done = cli("logs", names[0])
    assert done.returncode == 0 and PI.search(done.stdout), explain(done)
    done = cli("delete", names[0])
    assert done.returncode == 0, explain(done)
    assert cli.job_names() == [names[1]]
    assert_nothing_left_running(cli)
