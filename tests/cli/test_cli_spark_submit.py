"""``kubemill spark-submit`` in-process: the SPEC S1 command line with --dry-run prints a
SparkApplication that loads, arguments reach the parser untouched, errors are one line,
and without a registered SparkApplication kind it says so; with one, the application
goes to the substrate the master names.

The kind's registration is another change's: these tests set it (and its absence)
themselves, so they hold before and after it lands.
"""

from __future__ import annotations

import re
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import kubemill.kinds
from kubemill.api import KindTable
from kubemill.api.loader import load_one
from kubemill.cli.app import app
from kubemill.cli.settings import Settings
from kubemill.engines.spark.api.application import SPARKAPPLICATION, SparkApplication
from kubemill.engines.spark.api.scheduled import SCHEDULEDSPARKAPPLICATION
from kubemill.kinds import UnknownKind
from support.kube_client_support import (
    ClientClusterThread,
    kmock_cluster,
    running,
    status_body,
    terminated,
)

KINDS = KindTable([SPARKAPPLICATION, SCHEDULEDSPARKAPPLICATION])
SEED_S1 = Path(__file__).resolve().parents[2] / "examples" / "seed" / "spark-submit-s1.txt"
SPEC_S1 = shlex.split(SEED_S1.read_text(encoding="utf-8"), comments=True)[1:]
"""The seed's spark-submit command line, after ``spark-submit``."""
SUBMITTED_NAME = re.compile(r"[a-z][-a-z0-9]*-[0-9a-f]{16}")
"""A submission's job name: the name given, then Spark's 16-hex unique id."""


def printed_app(stdout: str) -> SparkApplication:
    docs = [doc for doc in yaml.safe_load_all(stdout) if doc is not None]
    assert len(docs) == 1
    job = load_one(docs[0], kinds=KINDS)
    assert isinstance(job, SparkApplication)
    return job


def not_registered(kind: str) -> Any:
    raise UnknownKind(f"no engine runs {kind!r}")


def test_dry_run_of_the_spec_line_prints_a_spark_application(runner: CliRunner) -> None:
    result = runner.invoke(app, ["spark-submit", "--dry-run", "--operator", *SPEC_S1])
    assert result.exit_code == 0, result.output
    job = printed_app(result.stdout)
    assert job.name == "spark-pi"
    assert job.spec.main_class == "org.apache.spark.examples.SparkPi"
    assert job.spec.image == "IMG"
    assert job.spec.executor.instances == 5
    assert job.spec.main_application_file == "local:///path/to/examples.jar"


def test_application_arguments_pass_through_untouched(runner: CliRunner) -> None:
    argv = ["spark-submit", "--dry-run", "-v", "-c", "spark.x=1", "app.py"]
    app_args = ["--name", "other", "-v", "--", "--dry-run", "--help", "10", "--"]
    result = runner.invoke(app, [*argv, *app_args])
    assert result.exit_code == 0, result.output
    job = printed_app(result.stdout)
    assert job.spec.arguments == app_args
    assert job.spec.spark_conf == {"spark.x": "1"}
    assert "master: local (local[*])" in result.stderr  # -v among the options


def test_properties_file_is_read(runner: CliRunner, tmp_path: Path) -> None:
    props = tmp_path / "spark.conf"
    props.write_text("spark.executor.instances 3\nspark.eventLog.enabled=true\n")
    result = runner.invoke(
        app,
        ["spark-submit", "--dry-run", "--properties-file", str(props), "--name", "p", "p.py"],
    )
    assert result.exit_code == 0, result.output
    job = printed_app(result.stdout)
    assert job.spec.executor.instances == 3
    assert job.spec.spark_conf == {"spark.eventLog.enabled": "true"}


def test_a_missing_properties_file_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "nope.conf"
    result = runner.invoke(app, ["spark-submit", "--properties-file", str(missing), "p.py"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(f"error: --properties-file: cannot read {missing}")
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--master", "yarn", "a.py"], "error: --master: 'yarn' is not supported"),
        (["--supervise", "a.py"], "error: --supervise: not supported"),
        (["--kill", "sub-1"], "error: --master: --kill asks a Kubernetes API server"),
        (["local:///app.jar"], "error: --class: required for the jar"),
        (["--operator", "--master", "local[2]", "a.py"], "error: --operator: submits to"),
    ],
)
def test_argument_errors_are_one_line(runner: CliRunner, argv: list[str], line: str) -> None:
    result = runner.invoke(app, ["spark-submit", "--dry-run", *argv])
    assert result.exit_code == 1
    assert result.stderr.startswith(line)
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"], ["--master", "local", "--help"]])
def test_help(runner: CliRunner, argv: list[str]) -> None:
    result = runner.invoke(app, ["spark-submit", *argv])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: kubemill spark-submit")
    assert "--dry-run" in result.stdout


def test_without_the_kind_registered_it_says_so(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kubemill.kinds, "engine_for", not_registered)
    result = runner.invoke(app, ["spark-submit", "--operator", *SPEC_S1])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: the SparkApplication kind is not registered in this kubemill yet; "
        "--dry-run shows the manifest"
    )


class FakeClient:
    """Records what would be submitted, and where."""

    def __init__(self, log: list[tuple[str, SparkApplication]], substrate: str) -> None:
        self.log = log
        self.substrate = substrate

    def submit(self, job: SparkApplication, **_options: Any) -> Any:
        self.log.append((self.substrate, job))
        return SimpleNamespace(kind=job.KIND, name=job.name)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, SparkApplication]]:
    """The kind as if registered; the client records submissions instead of running them."""
    log: list[tuple[str, SparkApplication]] = []
    monkeypatch.setattr(kubemill.kinds, "engine_for", lambda kind: object())
    monkeypatch.setattr(kubemill.kinds, "load_one", lambda doc: load_one(doc, kinds=KINDS))

    def client(self: Settings, **_local: Any) -> FakeClient:
        return FakeClient(log, self.substrate.value)

    monkeypatch.setattr(Settings, "client", client)
    return log


def test_a_local_master_runs_here_in_the_foreground_with_that_master(
    runner: CliRunner,
    registered: list[tuple[str, SparkApplication]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from kubemill.cli.run import Follower

    def run(self: Follower, job: SparkApplication, *, base_dir: str) -> int:
        self.client.submit(job)
        ran.append(base_dir)
        return 3  # the application's verdict is the command's exit code

    ran: list[str] = []
    monkeypatch.setattr(Follower, "run", run)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["spark-submit", "--master", "local[2]", "--name", "pi", "p.py"])
    assert result.exit_code == 3, result.output
    [(where, job)] = registered
    assert where == "local"
    assert SUBMITTED_NAME.fullmatch(job.name) and job.name.startswith("pi-"), job.name
    assert job.spec.spark_conf["spark.app.name"] == "pi"  # what Spark calls it
    # The name is said before anything runs, for `kubemill get`, `logs` and `delete`.
    assert f"kubemill get {job.name}" in result.stderr
    assert job.metadata.annotations["kubemill.dev/spark-local-master"] == "local[2]"
    assert ran == [str(tmp_path)]  # the application file is from the current directory


def test_a_rerun_of_the_same_command_is_a_submission_of_its_own(
    runner: CliRunner,
    registered: list[tuple[str, SparkApplication]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spark-submit never refuses a re-run: each submission gets a fresh name, so an
    earlier application of that name (running or not) is never the one touched."""
    from kubemill.cli.run import Follower

    monkeypatch.setattr(Follower, "run", lambda self, job, base_dir: self.client.submit(job) and 0)
    argv = ["spark-submit", "--master", "local[2]", "--name", "pi", "p.py"]
    for _ in range(3):
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, result.output
    names = [job.name for _, job in registered]
    assert len(set(names)) == 3, names
    assert all(SUBMITTED_NAME.fullmatch(name) for name in names), names
    assert {job.spec.spark_conf["spark.app.name"] for _, job in registered} == {"pi"}


@pytest.mark.parametrize(
    ("given", "expected_base"),
    [
        ("pi", "pi"),
        ("Spark Pi!", "spark-pi"),
        ("x" * 60, "x" * (56 - 17)),
        ("ab-" + "c" * 35 + "-d", "ab-" + "c" * 35),  # cut after a dash: no "--" left
    ],
)
def test_a_submissions_name_fits_with_its_ui_service(given: str, expected_base: str) -> None:
    from kubemill.cli.spark_submit import per_submission
    from kubemill.engines.spark.api.submit import parse_spark_submit

    submission = parse_spark_submit(["--name", given, "app.py"])
    named = per_submission(submission, "0123456789abcdef")
    job = load_one(named.manifest, kinds=KINDS)
    assert job.name == f"{expected_base}-0123456789abcdef"
    assert len(job.name) + len("-ui-svc") <= 63
    assert job.spec.spark_conf["spark.app.name"] == given
    assert submission.manifest["metadata"]["name"] != job.name  # the original is untouched


def test_dry_run_of_a_local_master_keeps_it_in_an_annotation(runner: CliRunner) -> None:
    result = runner.invoke(app, ["spark-submit", "--dry-run", "--master", "local[*]", "p.py"])
    assert result.exit_code == 0, result.output
    job = printed_app(result.stdout)
    assert job.metadata.annotations["kubemill.dev/spark-local-master"] == "local[*]"


def test_with_operator_a_k8s_master_submits_a_spark_application_there(
    runner: CliRunner,
    registered: list[tuple[str, SparkApplication]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kubemill.substrates.kubernetes.client.connection as connection

    server = {"url": "https://HOST:6443"}
    monkeypatch.setattr(connection, "connect", lambda **_kw: SimpleNamespace(server=server["url"]))
    result = runner.invoke(app, ["spark-submit", "--operator", *SPEC_S1])
    assert result.exit_code == 0, result.output
    [(where, job)] = registered
    assert where == "kubernetes"
    assert SUBMITTED_NAME.fullmatch(job.name) and job.name.startswith("spark-pi-"), job.name
    assert f"SparkApplication {job.name} submitted" in result.stdout

    server["url"] = "https://elsewhere:6443"
    result = runner.invoke(app, ["spark-submit", "--operator", *SPEC_S1])
    assert result.exit_code == 1
    assert "the kubeconfig's cluster is https://elsewhere:6443" in result.stderr
    assert len(registered) == 1


# --- Spark's own cluster mode: k8s:// without --operator ---------------------------------------


def test_dry_run_with_a_k8s_master_prints_the_drivers_objects(runner: CliRunner) -> None:
    result = runner.invoke(app, ["spark-submit", "--dry-run", *SPEC_S1])
    assert result.exit_code == 0, result.output
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    assert [doc["kind"] for doc in docs] == ["Pod", "Service", "NetworkPolicy", "ConfigMap"]
    pod = docs[0]
    assert pod["metadata"]["labels"]["spark-role"] == "driver"
    assert pod["spec"]["containers"][0]["image"] == "IMG"
    # Owners are the created pod's uid: known only once it is created.
    assert all("ownerReferences" not in doc["metadata"] for doc in docs)


def test_kubemills_namespace_is_the_default_of_sparks(runner: CliRunner) -> None:
    result = runner.invoke(app, ["-n", "team-a", "spark-submit", "--dry-run", *SPEC_S1])
    assert result.exit_code == 0, result.output
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    assert docs[-1]["data"]["spark.kubernetes.namespace"] == "team-a"
    conf = ["--conf", "spark.kubernetes.namespace=team-b"]
    result = runner.invoke(app, ["-n", "team-a", "spark-submit", "--dry-run", *conf, *SPEC_S1])
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    assert docs[-1]["metadata"]["namespace"] == "team-b"


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ClientClusterThread]:
    """A fixture API server, and no kubeconfig: the master's URL is used as it is."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with ClientClusterThread() as thread:
        yield thread


NO_WAIT = ["--conf", "spark.kubernetes.submission.waitAppCompletion=false"]


def s1_at(url: str, *, wait: bool = False) -> list[str]:
    return ["--master", f"k8s://{url}", *([] if wait else NO_WAIT), *SPEC_S1[2:]]


def test_submit_then_status_then_kill(runner: CliRunner, kube: ClientClusterThread) -> None:
    result = runner.invoke(app, ["spark-submit", *s1_at(kube.url)])
    assert result.exit_code == 0, result.output
    (pod,) = kube.list("/api/v1/namespaces/default/pods")
    name = pod["metadata"]["name"]
    assert f"submission ID default:{name}" in result.stdout
    assert f"--status default:{name}" in result.stdout
    service = kube.get(f"/api/v1/namespaces/default/services/{name}-svc")
    assert service["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    writes = [(c.method, c.plural) for c in kube.client_calls() if c.is_write]
    assert writes == [
        ("POST", "pods"),
        ("PATCH", "services"),
        ("PATCH", "networkpolicies"),
        ("PATCH", "configmaps"),
    ]

    status = runner.invoke(
        app, ["spark-submit", "--master", f"k8s://{kube.url}", "--status", "spark-pi-*"]
    )
    assert status.exit_code == 0, status.output
    assert f"pod name: {name}" in status.stdout
    assert "pod phase: Pending" in status.stdout

    killed = runner.invoke(
        app, ["spark-submit", "--master", f"k8s://{kube.url}", "--kill", "default:spark-pi-*"]
    )
    assert killed.exit_code == 0, killed.output
    assert killed.stdout.strip() == f"Deleting driver pod: default:{name}"
    assert kube.list("/api/v1/namespaces/default/pods") == []

    again = runner.invoke(
        app, ["spark-submit", "--master", f"k8s://{kube.url}", "--status", "default:spark-pi-*"]
    )
    assert again.exit_code == 1
    assert again.stderr.strip() == "error: no driver pod matches default:spark-pi-*"


def test_a_refused_dependent_takes_the_driver_pod_back(
    runner: CliRunner, kube: ClientClusterThread
) -> None:
    kube.answer(
        "PATCH",
        r".*/configmaps/.*",
        403,
        status_body(403, "Forbidden", "configmaps is forbidden"),
    )
    result = runner.invoke(app, ["spark-submit", *s1_at(kube.url)])
    assert result.exit_code == 1
    assert "configmaps" in result.stderr
    assert "Traceback" not in result.output
    assert kube.list("/api/v1/namespaces/default/pods") == []


def test_a_kubeconfig_of_another_cluster_is_refused(
    runner: CliRunner, kube: ClientClusterThread, tmp_path: Path
) -> None:
    other = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    result = runner.invoke(app, ["--kubeconfig", str(other), "spark-submit", *s1_at(kube.url)])
    assert result.exit_code == 1
    assert "the kubeconfig's cluster is http://127.0.0.1:1" in result.stderr
    assert kube.client_calls() == []

    same = kmock_cluster.write_kubeconfig(tmp_path / "same", kube.url)
    result = runner.invoke(app, ["--kubeconfig", str(same), "spark-submit", *s1_at(kube.url)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("exit_code", "code", "phase"), [(0, 0, "Succeeded"), (3, 1, "Failed")])
def test_by_default_it_waits_for_the_driver_to_end(
    runner: CliRunner, kube: ClientClusterThread, exit_code: int, code: int, phase: str
) -> None:
    """As Spark's client: the phase as it changes, then the end; exit 1 if the driver failed."""
    pods = "/api/v1/namespaces/default/pods"

    def read_after(count: int, name: str) -> None:
        """Wait until the CLI has read the driver pod more than ``count`` times."""
        while sum(c.method == "GET" and c.name == name for c in kube.client_calls()) <= count:
            time.sleep(0.02)

    def kubelet() -> None:
        while not (found := kube.list(pods)):
            time.sleep(0.02)
        name = found[0]["metadata"]["name"]
        status = f"{pods}/{name}/status"
        read_after(0, name)  # seen Pending
        kube.patch(status, {"status": running("spark-kubernetes-driver", ip="10.0.0.5")})
        read_after(2, name)  # seen Running (the read after the patch, at the latest)
        kube.patch(status, {"status": terminated("spark-kubernetes-driver", exit_code=exit_code)})

    thread = threading.Thread(target=kubelet, daemon=True)
    thread.start()
    interval = ["--conf", "spark.kubernetes.report.interval=50ms"]
    result = runner.invoke(app, ["spark-submit", *interval, *s1_at(kube.url, wait=True)])
    thread.join(timeout=30)
    assert result.exit_code == code, result.output
    said = [line for line in result.stdout.splitlines() if line.startswith("Application")]
    assert [line.rpartition("phase: ")[2] for line in said[:-1]] == [
        "Pending)",
        "Running)",
        f"{phase})",
    ]
    assert said[-1].endswith(
        f"finished: {phase} (exit code {exit_code}, {'Completed' if exit_code == 0 else 'Error'})"
    )


def test_a_report_interval_that_is_no_time_is_refused(
    runner: CliRunner, kube: ClientClusterThread
) -> None:
    interval = ["--conf", "spark.kubernetes.report.interval=soon"]
    result = runner.invoke(app, ["spark-submit", *interval, *s1_at(kube.url, wait=True)])
    assert result.exit_code == 1
    assert "--conf spark.kubernetes.report.interval: 'soon' is not a time" in result.stderr
