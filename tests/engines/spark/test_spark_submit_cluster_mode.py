"""spark-submit's argv read as Spark's cluster mode reads it (``cluster_mode_of``): options
folded into the driver's confs as SparkSubmit folds them, the application's type and
class, and every refusal naming the argument at fault and what to do."""

from __future__ import annotations

import pytest

from kubemill.engines.spark.api.argv import SparkSubmitError, parse_submit_arguments
from kubemill.engines.spark.api.submit import ClusterMode, cluster_mode_of

MASTER = ["--master", "k8s://h:6443"]
IMAGE = ["--conf", "spark.kubernetes.container.image=spark:4.0.0"]
PI_PY = "local:///opt/spark/examples/src/main/python/pi.py"


def mode(*argv: str, properties: dict[str, str] | None = None) -> ClusterMode:
    return cluster_mode_of(parse_submit_arguments(list(argv)), properties=properties)


def refusal(*argv: str) -> SparkSubmitError:
    with pytest.raises(SparkSubmitError) as caught:
        mode(*argv)
    return caught.value


def test_options_become_the_drivers_confs() -> None:
    found = mode(
        *MASTER,
        *IMAGE,
        "--name",
        "pi",
        "--driver-memory",
        "2g",
        "--driver-cores",
        "2",
        "--executor-memory",
        "3g",
        "--executor-cores",
        "4",
        "--num-executors",
        "5",
        "--files",
        "local:///f",
        "--archives",
        "local:///a.zip",
        "--packages",
        "g:a:1",
        "--exclude-packages",
        "g:b",
        "--repositories",
        "https://repo",
        "--driver-java-options",
        "-Dx=1",
        PI_PY,
        "10",
    )
    assert found.server == "https://h:6443"
    assert found.app_type == "Python"
    assert found.main_class is None
    assert found.app_args == ("10",)
    assert dict(found.conf) == {
        "spark.master": "k8s://https://h:6443",
        "spark.submit.deployMode": "cluster",
        "spark.kubernetes.container.image": "spark:4.0.0",
        "spark.app.name": "pi",
        "spark.driver.memory": "2g",
        "spark.driver.cores": "2",
        "spark.executor.memory": "3g",
        "spark.executor.cores": "4",
        "spark.executor.instances": "5",
        "spark.files": "local:///f",
        "spark.archives": "local:///a.zip",
        "spark.jars.packages": "g:a:1",
        "spark.jars.excludes": "g:b",
        "spark.jars.repositories": "https://repo",
        "spark.driver.extraJavaOptions": "-Dx=1",
        "spark.submit.pyFiles": "",
    }


def test_an_option_wins_over_conf_over_the_properties_file() -> None:
    found = mode(
        *MASTER,
        *IMAGE,
        "--conf",
        "spark.driver.memory=2g",
        "--driver-memory",
        "3g",
        PI_PY,
        properties={"spark.driver.memory": "1g", "spark.driver.cores": "2"},
    )
    assert found.conf["spark.driver.memory"] == "3g"
    assert found.conf["spark.driver.cores"] == "2"


def test_a_jvm_application_is_the_last_of_its_jars_and_named_by_its_class() -> None:
    found = mode(
        *MASTER,
        *IMAGE,
        "--class",
        "org.example.Main",
        "--jars",
        "local:///a.jar",
        "local:///app.jar",
    )
    assert (found.app_type, found.main_class) == ("Scala", "org.example.Main")
    assert found.conf["spark.jars"] == "local:///a.jar,local:///app.jar"
    assert found.conf["spark.app.name"] == "org.example.Main"


def test_no_deploy_mode_is_cluster_and_spark_master_may_come_from_conf() -> None:
    found = mode("--conf", "spark.master=k8s://https://h:1", *IMAGE, PI_PY)
    assert found.server == "https://h:1"
    assert found.conf["spark.submit.deployMode"] == "cluster"


@pytest.mark.parametrize(
    ("argv", "argument", "words"),
    [
        ([*IMAGE, PI_PY], "--master", "not a Kubernetes API server"),
        ([*MASTER, "--deploy-mode", "client", *IMAGE, PI_PY], "--deploy-mode", "client mode"),
        ([*MASTER, PI_PY], "--conf spark.kubernetes.container.image", "required"),
        ([*MASTER, *IMAGE, "--proxy-user", "bob", PI_PY], "--proxy-user", "not supported"),
        ([*MASTER, *IMAGE, "/home/me/pi.py"], "the application file", "a file on this machine"),
        (
            [*MASTER, *IMAGE, "--py-files", "file:///x.py", PI_PY],
            "--conf spark.submit.pyFiles",
            "a file on this machine",
        ),
        ([*MASTER, *IMAGE, "--jars", "lib.jar", PI_PY], "--conf spark.jars", "upload"),
        (
            [
                *MASTER,
                *IMAGE,
                "--conf",
                "spark.kubernetes.authenticate.submission.oauthToken=t",
                PI_PY,
            ],
            "--conf spark.kubernetes.authenticate.submission.oauthToken",
            "kubeconfig",
        ),
        (
            [*MASTER, *IMAGE, "--num-executors", "two", PI_PY],
            "--conf spark.executor.instances",
            "whole",
        ),
        ([*MASTER, *IMAGE, "--kill", "default:pi-*"], "--kill", "submits nothing"),
        ([*MASTER, *IMAGE], "", "no application file"),
    ],
)
def test_each_refusal_names_the_argument_and_what_to_do(
    argv: list[str], argument: str, words: str
) -> None:
    error = refusal(*argv)
    assert error.argument == argument
    assert words in str(error)
    assert error.hint


def test_remote_files_are_taken_as_they_are() -> None:
    found = mode(*MASTER, *IMAGE, "--files", "https://x/f.txt,s3a://b/g", "https://x/app.py")
    assert found.resource == "https://x/app.py"
    assert found.conf["spark.files"] == "https://x/f.txt,s3a://b/g"
