"""spark-submit's argv -> a SparkApplication manifest and the master: the SPEC S1 command
line, each option, the precedence of options over --conf over the properties file, and
every refusal, naming the argument at fault.

The Spark kinds load through a kind table of their own (as in test_spark.py): every
manifest the parser builds must load as a SparkApplication.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from kubemill.api import API_VERSION, KindTable
from kubemill.api.loader import load_one
from kubemill.engines.spark.api.application import SPARKAPPLICATION, SparkApplication
from kubemill.engines.spark.api.argv import (
    SparkMaster,
    SparkSubmitError,
    parse_spark_master,
    parse_spark_properties,
    parse_submit_arguments,
)
from kubemill.engines.spark.api.scheduled import SCHEDULEDSPARKAPPLICATION
from kubemill.engines.spark.api.spec import SparkApplicationType
from kubemill.engines.spark.api.submit import SparkSubmit, parse_spark_submit

KINDS = KindTable([SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION])
IMAGE = "--conf=spark.kubernetes.container.image=spark:4.0.0"
PI_PY = "local:///opt/spark/examples/src/main/python/pi.py"

SEED_S1 = Path(__file__).resolve().parents[3] / "examples" / "seed" / "spark-submit-s1.txt"
SPEC_S1 = shlex.split(SEED_S1.read_text(encoding="utf-8"), comments=True)[1:]
"""The seed's spark-submit command line (SEED_S1's file), after ``spark-submit``."""


def submit(*argv: str, **options: Any) -> SparkSubmit:
    return parse_spark_submit(list(argv), **options)


def loaded(result: SparkSubmit) -> SparkApplication:
    job = load_one(result.manifest, kinds=KINDS)
    assert isinstance(job, SparkApplication)
    return job


def refusal(*argv: str, **options: Any) -> SparkSubmitError:
    with pytest.raises(SparkSubmitError) as caught:
        parse_spark_submit(list(argv), **options)
    return caught.value


# --- the SPEC S1 command line ------------------------------------------------------------------


def test_spec_s1_command_line_becomes_a_loadable_spark_application() -> None:
    result = submit(*SPEC_S1)
    assert result.master == SparkMaster(
        "kubernetes", server="https://HOST:6443", text="k8s://https://HOST:6443"
    )
    assert result.manifest["apiVersion"] == API_VERSION
    assert result.manifest["kind"] == "SparkApplication"
    app = loaded(result)
    assert app.name == "spark-pi"
    assert app.spec.type is SparkApplicationType.SCALA
    assert app.spec.main_class == "org.apache.spark.examples.SparkPi"
    assert app.spec.main_application_file == "local:///path/to/examples.jar"
    assert app.spec.image == "IMG"
    assert app.spec.executor.instances == 5
    assert app.executor_instances == 5
    # Both confs became fields: sparkConf may not hold the image, and holds nothing else.
    assert app.spec.spark_conf is None
    assert app.spec.arguments is None


# --- the master --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("k8s://https://api.example:6443", SparkMaster("kubernetes", "https://api.example:6443")),
        ("k8s://api.example:6443", SparkMaster("kubernetes", "https://api.example:6443")),
        ("k8s://http://127.0.0.1:8080/", SparkMaster("kubernetes", "http://127.0.0.1:8080")),
        ("local", SparkMaster("local", threads=1)),
        ("local[4]", SparkMaster("local", threads=4)),
        ("local[*]", SparkMaster("local", threads=None)),
        ("local[2,3]", SparkMaster("local", threads=2)),
    ],
)
def test_masters_kubemill_runs(text: str, expected: SparkMaster) -> None:
    master = parse_spark_master(text)
    assert (master.substrate, master.server, master.threads) == (
        expected.substrate,
        expected.server,
        expected.threads,
    )
    assert master.text == text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("yarn", "'yarn' is not supported: kubemill runs k8s:// and local"),
        ("spark://host:7077", "is not supported"),
        ("mesos://host:5050", "is not supported"),
        ("local-cluster[2,1,1024]", "is not supported"),
        ("k8s://", "names no API server"),
        ("local[0]", "runs no threads"),
    ],
)
def test_masters_kubemill_refuses(text: str, words: str) -> None:
    error = refusal("--master", text, "app.py")
    assert error.argument == "--master"
    assert words in error.message
    assert error.hint
    assert str(error).startswith("--master: ")


def test_no_master_is_local_with_every_core_and_the_spark_master_conf_counts() -> None:
    assert submit("app.py").master.substrate == "local"
    assert submit("app.py").master.threads is None
    by_conf = submit("--conf", "spark.master=k8s://h:443", IMAGE, "app.py")
    assert by_conf.master.server == "https://h:443"
    assert "spark.master" not in (by_conf.manifest["spec"].get("sparkConf") or {})
    # The option wins over the conf, as in Spark.
    both = submit("--master", "local[3]", "--conf", "spark.master=k8s://h:443", "app.py")
    assert both.master.threads == 3


# --- the application ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "kind", "main_class"),
    [
        (["--class", "org.example.Main", "local:///app.jar"], "Scala", "org.example.Main"),
        (["local:///opt/app/main.py"], "Python", None),
        (["local:///opt/app/main.R"], "R", None),
        (["/home/me/job.r"], "R", None),
    ],
)
def test_the_type_follows_the_application_file(
    argv: list[str], kind: str, main_class: str | None
) -> None:
    app = loaded(submit(IMAGE, *argv))
    assert app.spec.type == SparkApplicationType(kind)
    assert app.spec.main_class == main_class
    assert app.spec.main_application_file == argv[-1]


def test_everything_after_the_application_file_is_the_applications() -> None:
    app = loaded(submit(IMAGE, PI_PY, "10", "--name", "x", "--dry-run", "-v"))
    assert app.spec.arguments == ["10", "--name", "x", "--dry-run", "-v"]
    assert app.name == "pi"  # the file's name: "--name x" was the application's


def test_double_dash_ends_the_options() -> None:
    app = loaded(submit(IMAGE, "--", "-odd-name.py", "1"))
    assert app.spec.main_application_file == "-odd-name.py"
    assert app.spec.arguments == ["1"]


def test_option_equals_value_form() -> None:
    app = loaded(submit("--name=wordcount", "--num-executors=3", IMAGE, PI_PY))
    assert app.name == "wordcount"
    assert app.spec.executor.instances == 3


def test_resources_from_options_and_confs() -> None:
    app = loaded(
        submit(
            IMAGE,
            "--driver-memory",
            "2g",
            "--driver-cores",
            "2",
            "--executor-memory",
            "3g",
            "--executor-cores",
            "4",
            "--num-executors",
            "6",
            PI_PY,
        )
    )
    assert (app.spec.driver.memory, app.spec.driver.cores) == ("2g", 2)
    assert (app.spec.executor.memory, app.spec.executor.cores) == ("3g", 4)
    assert app.spec.executor.instances == 6
    by_conf = loaded(
        submit(
            IMAGE,
            "-c",
            "spark.driver.memory=512m",
            "-c",
            "spark.executor.cores=3",
            "-c",
            "spark.driver.cores=2",
            "-c",
            "spark.executor.memory=1536m",
            PI_PY,
        )
    )
    assert (by_conf.spec.driver.memory, by_conf.spec.driver.cores) == ("512m", 2)
    assert (by_conf.spec.executor.memory, by_conf.spec.executor.cores) == ("1536m", 3)
    assert by_conf.spec.spark_conf is None


def test_an_option_wins_over_conf_which_wins_over_the_properties_file() -> None:
    properties = {
        "spark.executor.memory": "1g",
        "spark.executor.instances": "2",
        "spark.sql.shuffle.partitions": "10",
        "spark.eventLog.enabled": "true",
    }
    app = loaded(
        submit(
            IMAGE,
            "--conf",
            "spark.executor.memory=2g",
            "--conf",
            "spark.sql.shuffle.partitions=20",
            "--executor-memory",
            "4g",
            PI_PY,
            properties=properties,
        )
    )
    assert app.spec.executor.memory == "4g"
    assert app.spec.executor.instances == 2
    assert app.spec.spark_conf == {
        "spark.eventLog.enabled": "true",
        "spark.sql.shuffle.partitions": "20",
    }


def test_the_last_conf_of_a_key_wins_and_values_keep_their_equals_signs() -> None:
    app = loaded(
        submit(
            IMAGE,
            "--conf",
            "spark.driver.extraJavaOptions=-Da=1",
            "--conf",
            "spark.driver.extraJavaOptions=-Dx=y -Dz=w",
            PI_PY,
        )
    )
    assert app.spec.spark_conf == {"spark.driver.extraJavaOptions": "-Dx=y -Dz=w"}


def test_non_spark_properties_are_ignored_with_a_warning() -> None:
    result = submit(IMAGE, "--conf", "hello=world", PI_PY, properties={"other.key": "1"})
    assert "sparkConf" not in result.manifest["spec"]
    assert len(result.warnings) == 2
    assert any("'hello'" in w and w.startswith("--conf") for w in result.warnings)
    assert any("'other.key'" in w and w.startswith("--properties-file") for w in result.warnings)


def test_image_confs_become_fields() -> None:
    app = loaded(
        submit(
            "--master",
            "k8s://h:443",
            "--conf",
            "spark.kubernetes.driver.container.image=drv:1",
            "--conf",
            "spark.kubernetes.executor.container.image=exe:1",
            "--conf",
            "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
            "--conf",
            "spark.kubernetes.authenticate.executor.serviceAccountName=spark-exec",
            "--conf",
            "spark.kubernetes.container.image.pullPolicy=Always",
            "--conf",
            "spark.kubernetes.namespace=analytics",
            PI_PY,
        )
    )
    assert app.spec.image is None
    assert (app.spec.driver.image, app.spec.executor.image) == ("drv:1", "exe:1")
    assert app.spec.driver.service_account == "spark"
    assert app.spec.executor.service_account == "spark-exec"
    assert app.spec.image_pull_policy == "Always"
    assert app.namespace == "analytics"
    assert app.spec.spark_conf is None


def test_dependencies_are_comma_separated_lists() -> None:
    app = loaded(
        submit(
            IMAGE,
            "--jars",
            "local:///a.jar, local:///b.jar",
            "--files",
            "s3a://bucket/f.txt",
            "--py-files",
            "deps.zip,util.py",
            "--archives",
            "env.tar.gz#env",
            "--packages",
            "org.apache.spark:spark-avro_2.13:4.0.0",
            "--exclude-packages",
            "org.slf4j:slf4j-api",
            "--repositories",
            "https://repo.example/maven",
            PI_PY,
        )
    )
    deps = app.spec.deps
    assert deps is not None
    assert deps.jars == ["local:///a.jar", "local:///b.jar"]
    assert deps.files == ["s3a://bucket/f.txt"]
    assert deps.py_files == ["deps.zip", "util.py"]
    assert deps.archives == ["env.tar.gz#env"]
    assert deps.packages == ["org.apache.spark:spark-avro_2.13:4.0.0"]
    assert deps.exclude_packages == ["org.slf4j:slf4j-api"]
    assert deps.repositories == ["https://repo.example/maven"]


def test_options_spark_turns_into_confs() -> None:
    app = loaded(
        submit(
            IMAGE,
            "--proxy-user",
            "alice",
            "--driver-java-options",
            "-Dlog=debug",
            "--driver-class-path",
            "/opt/extra/*",
            "--driver-library-path",
            "/opt/native",
            "--principal",
            "alice@EXAMPLE.COM",
            "--keytab",
            "/etc/alice.keytab",
            PI_PY,
        )
    )
    assert app.spec.proxy_user == "alice"
    assert app.spec.spark_conf == {
        "spark.driver.extraClassPath": "/opt/extra/*",
        "spark.driver.extraJavaOptions": "-Dlog=debug",
        "spark.driver.extraLibraryPath": "/opt/native",
        "spark.kerberos.keytab": "/etc/alice.keytab",
        "spark.kerberos.principal": "alice@EXAMPLE.COM",
    }


@pytest.mark.parametrize(
    ("argv", "name", "app_name"),
    [
        (["--name", "Spark Pi!"], "spark-pi", "Spark Pi!"),
        (["--conf", "spark.app.name=from-conf"], "from-conf", None),
        (["--class", "org.example.WordCount", "local:///w.jar"], "wordcount", "WordCount"),
        ([], "pi", None),
        (["--name", "42"], "spark-42", "42"),
        (["--name", "x" * 80], "x" * 56, "x" * 80),
    ],
)
def test_the_kubernetes_name_is_a_cleaned_copy_of_spark_s(
    argv: list[str], name: str, app_name: str | None
) -> None:
    resource = [] if argv and argv[-1].endswith(".jar") else [PI_PY]
    app = loaded(submit(IMAGE, *argv, *resource))
    assert app.name == name
    assert (app.spec.spark_conf or {}).get("spark.app.name") == app_name


def test_spark_version_from_the_image_tag_else_the_default() -> None:
    assert loaded(submit(IMAGE, PI_PY)).spec.spark_version == "4.0.0"
    tagged = submit("--conf", "spark.kubernetes.container.image=apache/spark:v3.5.1", PI_PY)
    assert loaded(tagged).spec.spark_version == "3.5.1"
    given = submit(IMAGE, PI_PY, spark_version="4.1.0")
    assert loaded(given).spec.spark_version == "4.1.0"


def test_locally_no_image_is_needed() -> None:
    app = loaded(submit("--master", "local[2]", "--name", "pi", "examples/spark/pi.py", "10"))
    assert app.spec.image == f"spark:{app.spec.spark_version}"
    assert app.spec.arguments == ["10"]


def test_deploy_modes() -> None:
    assert loaded(submit("--master", "k8s://h:1", IMAGE, PI_PY)).spec.mode.value == "cluster"
    local_client = submit("--master", "local", "--deploy-mode", "client", PI_PY)
    assert local_client.master.substrate == "local"


def test_verbose_is_recorded() -> None:
    assert submit("-v", PI_PY).verbose
    assert submit("--verbose", PI_PY).verbose
    assert not submit(PI_PY).verbose


def test_own_flags_only_among_the_options() -> None:
    args = parse_submit_arguments(
        ["--dry-run", "--name", "x", "a.py", "--dry-run"], own_flags=["--dry-run"]
    )
    assert args.own_flags == {"--dry-run"}
    assert args.app_args == ["--dry-run"]
    after = parse_submit_arguments(["a.py", "--dry-run"], own_flags=["--dry-run"])
    assert after.own_flags == set()


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "argument", "words"),
    [
        (
            ["--deploy-mode", "client", "--master", "k8s://h:1", IMAGE, PI_PY],
            "--deploy-mode",
            "client mode",
        ),
        (["--deploy-mode", "clutser", PI_PY], "--deploy-mode", "'clutser' is not a deploy mode"),
        (["--master", "k8s://h:1", PI_PY], "--conf spark.kubernetes.container.image", "required"),
        (["--total-executor-cores", "8", PI_PY], "--total-executor-cores", "standalone"),
        (["--supervise", PI_PY], "--supervise", "not supported"),
        (["--kill", "driver-1"], "--kill", "submits nothing"),
        (["--status", "driver-1"], "--status", "submits nothing"),
        (["--queue", "q", PI_PY], "--queue", "YARN"),
        (["--version"], "--version", "kubemill is not Spark"),
        (["--conf", "spark.executor.instances", "5", PI_PY], "--conf", "is not KEY=VALUE"),
        (["--conf", "=5", PI_PY], "--conf", "is not KEY=VALUE"),
        (["--name"], "--name", "needs a value"),
        (["--mastr", "local", PI_PY], "--mastr", "unknown option"),
        (["--num-executors", "two", PI_PY], "--num-executors", "not a whole number of executors"),
        (["--executor-cores", "0", PI_PY], "--executor-cores", "not a whole number of cores"),
        (["--driver-memory", "lots", PI_PY], "--driver-memory", "not a memory size"),
        (
            ["-c", "spark.executor.instances=x", PI_PY],
            "--conf spark.executor.instances",
            "whole number",
        ),
        (["--class", "org.example.Main", PI_PY], "--class", "no main class"),
        (["local:///app.jar"], "--class", "required for the jar"),
        (["--name", "x"], "", "no application file"),
        (
            ["--conf", "spark.kubernetes.authenticate.driver.oauthToken=abc", PI_PY],
            "--conf spark.kubernetes.authenticate.driver.oauthToken",
            "credentials",
        ),
    ],
)
def test_each_refusal_names_the_argument_and_what_to_do(
    argv: list[str], argument: str, words: str
) -> None:
    error = refusal(*argv)
    assert error.argument == argument
    assert words in str(error)
    assert error.hint, "every refusal says what to do"


def test_an_unknown_option_suggests_the_close_one() -> None:
    assert "did you mean '--master'?" in refusal("--mastr", "local", PI_PY).hint


# --- properties files --------------------------------------------------------------------------


def test_properties_file_syntax() -> None:
    text = "\n".join(
        [
            "# a comment",
            "! another comment",
            "",
            "spark.a=1",
            "spark.b : two words",
            "spark.c\t  3",
            "spark.d   =  spaced  ",
            "spark.e = first \\",
            "    second",
            r"spark.f = C:\\dir",
            "spark.empty",
        ]
    )
    assert parse_spark_properties(text) == {
        "spark.a": "1",
        "spark.b": "two words",
        "spark.c": "3",
        "spark.d": "spaced",
        "spark.e": "first second",
        "spark.f": "C:\\dir",
        "spark.empty": "",
    }
