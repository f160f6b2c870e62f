"""``kubemill spark-submit --master k8s://...`` from the console script sends what the full
command sends.

The console script's way in (:func:`kubemill.cli.spark_fast.quick_spark_submit`, tried
before typer loads) and the full typer command submit the same command lines to two
fixture API servers; with Spark's per-submission values fixed, the requests each server
received (method, path, query, user agent, body) and what each printed are the same, with
or without a kubeconfig, a proxy, a server that answers an error or none at all. What it
leaves to typer returns ``None`` with nothing sent. Its modules load without typer, rich,
pydantic, PyYAML or the ``kubernetes`` package.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubemill.cli.app import app
from kubemill.cli.spark_fast import quick_spark_submit
from kubemill.engines.spark.framework.cluster_mode import Generated
from kubemill.substrates.kubernetes.client import spark_submit as client
from support.kube_client_support import ClientClusterThread, closed_port, kmock_cluster, status_body

SEED_S1 = Path(__file__).resolve().parents[2] / "examples" / "seed" / "spark-submit-s1.txt"
S1 = shlex.split(SEED_S1.read_text(encoding="utf-8"), comments=True)[1:][2:]
"""The seed's spark-submit command line after ``--master``."""
NO_WAIT = ["--conf", "spark.kubernetes.submission.waitAppCompletion=false"]
PYTHON_APP = [
    "--name",
    "A Very_Long.Application-Name That Goes On And On And On For Ever 42",
    "--driver-memory",
    "500m",
    "--num-executors",
    "3",
    "--py-files",
    "local:///opt/x.py",
    "--conf",
    "spark.kubernetes.driver.label.team=ml",
    "--conf",
    "spark.kubernetes.driverEnv.FOO=bar",
    "--conf",
    "spark.kubernetes.driver.annotation.note=a b",
    "--conf",
    "spark.kubernetes.container.image=IMG",
    "local:///opt/app.py",
    "--",
    "x y",
]
FIXED = Generated(
    app_id="spark-" + "a" * 32,
    prefix_id="0123456789abcdef",
    conf_map_id="fedcba9876543210",
    service_id="00000000000000ff",
    local_dir_id="12345678-1234-1234-1234-123456789abc",
    submit_time_ms=1_764_610_226_000,
    user="someone",
    spark_version="4.3.0",
)


@pytest.fixture
def no_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No kubeconfig and no proxy: the master's URL is used as it is."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBEMILL_ENGINES"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's per-submission values, the same for both paths."""
    monkeypatch.setattr(client, "generated", lambda **_: FIXED)


@pytest.fixture
def servers(no_kubeconfig: None) -> Iterator[tuple[ClientClusterThread, ClientClusterThread]]:
    with ClientClusterThread() as fast, ClientClusterThread() as full:
        yield fast, full


def seen(kube: ClientClusterThread) -> list[dict[str, Any]]:
    """The requests the server received from kubemill, its own URL and uids made neutral."""
    out = []
    uids = {
        str(pod["metadata"]["uid"]): "POD-UID"
        for namespace in ("default", "team-a")
        for pod in kube.list(f"/api/v1/namespaces/{namespace}/pods")
    }
    for call in kube.client_calls():
        text = json.dumps(
            {
                "method": call.method,
                "path": call.path,
                "params": dict(call.params),
                "user_agent": call.user_agent,
                "body": call.body,
            },
            sort_keys=True,
        )
        for uid, neutral in uids.items():
            text = text.replace(uid, neutral)
        out.append(json.loads(text.replace(kube.url, "URL")))
    return out


def fast_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | None, str, str]:
    try:
        code = quick_spark_submit(argv)
    except SystemExit as exited:
        code = int(exited.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def both_run(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
) -> list[tuple[int | None, str, str]]:
    """``argv`` (``k8s://URL`` standing for each server's) through the console script's way
    in, then through the typer command: (exit code, stdout, stderr) of each, URL neutral."""
    fast, full = servers
    code, out, err = fast_run([w.replace("URL", fast.url) for w in argv], capsys)
    result = CliRunner().invoke(app, [w.replace("URL", full.url) for w in argv])
    return [
        (code, out.replace(fast.url, "URL"), err.replace(fast.url, "URL")),
        (
            result.exit_code,
            result.stdout.replace(full.url, "URL"),
            result.stderr.replace(full.url, "URL"),
        ),
    ]


@pytest.mark.parametrize(
    ("global_options", "spark_args"),
    [
        pytest.param([], S1, id="spec-s1"),
        pytest.param([], PYTHON_APP, id="python-with-options"),
        pytest.param(["-n", "team-a"], S1, id="kubemill-namespace"),
        pytest.param(["--namespace=team-a"], S1, id="kubemill-namespace-inline"),
    ],
)
def test_the_fast_path_sends_and_prints_what_the_full_command_does(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    fixed_ids: None,
    capsys: pytest.CaptureFixture[str],
    global_options: list[str],
    spark_args: list[str],
) -> None:
    fast, full = servers
    for kube in servers:
        kube.create_namespaces("team-a")

    def argv(kube: ClientClusterThread) -> list[str]:
        return [*global_options, "spark-submit", "--master", f"k8s://{kube.url}", *NO_WAIT]

    code, out, err = fast_run([*argv(fast), *spark_args], capsys)
    result = CliRunner().invoke(app, [*argv(full), *spark_args])

    assert (code, err) == (0, "")
    assert result.exit_code == 0, result.output
    assert out.replace(fast.url, "URL") == result.stdout.replace(full.url, "URL")
    assert "Deployed Spark application" in out
    assert [(c.method, c.plural) for c in fast.client_calls()] == [
        ("POST", "pods"),
        ("PATCH", "services"),
        ("PATCH", "networkpolicies"),
        ("PATCH", "configmaps"),
    ]
    assert seen(fast) == seen(full)


def test_it_waits_for_the_driver_with_the_full_commands_code(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    fixed_ids: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without waitAppCompletion=false the driver is followed after the submission."""
    fast, _ = servers
    followed: list[tuple[Any, ...]] = []

    def follow(*args: Any) -> int:
        followed.append(args)
        return 7

    monkeypatch.setattr("kubemill.cli.spark_cluster.follow_driver", follow)
    code, out, _ = fast_run(
        ["-n", "default", "spark-submit", "--master", f"k8s://{fast.url}", *S1], capsys
    )
    assert code == 7
    (pod,) = fast.list("/api/v1/namespaces/default/pods")
    ((settings, server, conf, submitted),) = followed
    assert settings.namespace == "default"
    assert server == fast.url
    assert conf["spark.app.name"] == "spark-pi"
    assert submitted.pod_name == pod["metadata"]["name"]
    assert f"--status {submitted.submission_id}" in out


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["spark-submit"], id="no-arguments"),
        pytest.param(["spark-submit", "--help"], id="help"),
        pytest.param(["spark-submit", "--dry-run", "--master", "k8s://URL", *S1], id="dry-run"),
        pytest.param(["spark-submit", "--operator", "--master", "k8s://URL", *S1], id="operator"),
        pytest.param(["spark-submit", "--master", "local[2]", "p.py"], id="local-master"),
        pytest.param(["spark-submit", "p.py"], id="no-master"),
        pytest.param(["spark-submit", "--bogus", "--master", "k8s://URL", *S1], id="bad-option"),
        pytest.param(
            ["spark-submit", "--master", "k8s://URL", "--properties-file", "/nonexistent", *S1],
            id="unreadable-properties-file",
        ),
        pytest.param(["--context", "c", "spark-submit", "--master", "k8s://URL", *S1], id="ctx"),
        pytest.param(["-n", "Not_A_Name", "spark-submit", "--master", "k8s://URL", *S1], id="ns"),
        pytest.param(["-n=team-a", "spark-submit", "--master", "k8s://URL", *S1], id="n-equals"),
        pytest.param(["get"], id="another-verb"),
    ],
)
def test_what_it_does_not_handle_goes_to_the_full_command_unsent(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    fast, _ = servers
    given = [word.replace("k8s://URL", f"k8s://{fast.url}") for word in argv]
    assert fast_run(given, capsys) == (None, "", "")
    assert fast.client_calls() == []


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["spark-submit", "--verbose", "--master", "k8s://URL", *S1], id="verbose"),
        pytest.param(
            ["spark-submit", "--master", "k8s://URL", "--kill", "x", "--status", "x"],
            id="kill-and-status",
        ),
        pytest.param(["spark-submit", "--kill", "x"], id="kill-without-master"),
        pytest.param(["spark-submit", "--master", "k8s://URL", "--kill", ":x"], id="kill-bad-id"),
        pytest.param(
            [
                "spark-submit",
                *["--master", "k8s://URL", "--kill", "x"],
                *["--conf", "spark.kubernetes.appKillPodDeletionGracePeriod=soon"],
            ],
            id="kill-bad-grace",
        ),
        pytest.param(
            ["spark-submit", "--master", "k8s://URL", "--deploy-mode", "client", *S1[2:]],
            id="client-mode",
        ),
        pytest.param(
            ["spark-submit", "--master", "k8s://URL", "--conf", "other.key=1", *S1],
            id="a-warning-to-print",
        ),
        pytest.param(
            ["spark-submit", "--master", "k8s://URL", "--conf", "spark.local.dir=/x", *S1],
            id="a-conf-not-built",
        ),
    ],
)
def test_what_it_handles_it_answers_as_the_full_command_does(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    fixed_ids: None,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """Warnings, --verbose and argument errors included: one code says them."""
    fast, full = servers
    argv = [argv[0], *NO_WAIT, *argv[1:]]
    by_fast, by_full = both_run(servers, argv, capsys)
    assert by_fast[0] is not None  # answered here, not left to typer
    assert by_fast == by_full
    assert seen(fast) == seen(full)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("KUBEMILL_ENGINES", "somepkg.engine:ENGINE"),
        ("KUBEMILL_SUBSTRATE", "mars"),
    ],
)
def test_an_environment_it_does_not_handle_goes_to_the_full_command(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
) -> None:
    fast, _ = servers
    monkeypatch.setenv(variable, value)
    argv = ["spark-submit", "--master", f"k8s://{fast.url}", *NO_WAIT, *S1]
    assert fast_run(argv, capsys) == (None, "", "")
    assert fast.client_calls() == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HTTPS_PROXY", "http://127.0.0.1:1"),
        ("http_proxy", "http://127.0.0.1:1"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
    ],
)
def test_a_proxy_or_a_pod_is_answered_as_the_full_command_does(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    fixed_ids: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
) -> None:
    """An https proxy is not for an http server; an http one that refuses is said; in a
    pod without its service account's files, that is said."""
    monkeypatch.setenv(variable, value)
    fast, full = servers
    by_fast, by_full = both_run(
        servers, ["spark-submit", "--master", "k8s://URL", *NO_WAIT, *S1], capsys
    )
    assert by_fast == by_full
    assert seen(fast) == seen(full)
    assert by_fast[0] == (0 if variable == "HTTPS_PROXY" else 1)


def test_with_a_kubeconfig_it_sends_what_the_full_command_sends(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    fixed_ids: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kubeconfig's cluster must be the master: each server gets a kubeconfig of its own."""
    fast, full = servers

    def argv(kube: ClientClusterThread) -> list[str]:
        config = kmock_cluster.write_kubeconfig(tmp_path / f"{id(kube)}.kubeconfig", kube.url)
        monkeypatch.setenv("KUBECONFIG", str(config))
        return ["spark-submit", "--master", f"k8s://{kube.url}", *NO_WAIT, *S1]

    code, out, err = fast_run(argv(fast), capsys)
    result = CliRunner().invoke(app, argv(full))
    assert (code, err) == (0, "")
    assert result.exit_code == 0, result.output
    assert out.replace(fast.url, "URL") == result.stdout.replace(full.url, "URL")
    assert seen(fast) == seen(full)
    assert [c.method for c in fast.client_calls()] == ["POST", "PATCH", "PATCH", "PATCH"]


def test_a_server_that_cannot_be_reached_is_said_as_the_full_command_says_it(
    no_kubeconfig: None, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    argv = ["spark-submit", "--master", f"k8s://{url}", *NO_WAIT, *S1]
    code, out, err = fast_run(argv, capsys)
    result = CliRunner().invoke(app, argv)
    assert (code, out, err) == (result.exit_code, result.stdout, result.stderr)
    assert code == 1
    assert "Connection refused" in err


def test_an_answered_error_is_said_as_the_full_command_says_it(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A refused dependent: the driver pod is taken back, one red line, exit 1."""
    for kube in servers:
        kube.answer(
            "PATCH", r".*/configmaps/.*", 403, status_body(403, "Forbidden", "configmaps is no")
        )
    fast, full = servers
    with pytest.raises(SystemExit) as exited:
        quick_spark_submit(["spark-submit", "--master", f"k8s://{fast.url}", *NO_WAIT, *S1])
    out, err = capsys.readouterr()
    result = CliRunner().invoke(
        app, ["spark-submit", "--master", f"k8s://{full.url}", *NO_WAIT, *S1]
    )
    assert (exited.value.code, result.exit_code) == (1, 1)
    assert out == result.stdout == ""
    assert err.startswith("error: ")
    assert "configmaps" in err
    assert err.replace(fast.url, "URL") == result.stderr.replace(full.url, "URL")
    for kube in servers:
        assert kube.list("/api/v1/namespaces/default/pods") == []
        methods = [c.method for c in kube.client_calls()]
        assert methods == ["POST", "PATCH", "PATCH", "PATCH", "DELETE"]


def test_status_and_kill_say_what_the_full_command_says(
    servers: tuple[ClientClusterThread, ClientClusterThread],
    fixed_ids: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fast, full = servers
    for kube in servers:
        argv = ["spark-submit", "--master", f"k8s://{kube.url}", *NO_WAIT, *S1]
        assert CliRunner().invoke(app, argv).exit_code == 0
        kube.cluster.calls.clear()

    # --status reads only: both paths ask the same server.
    status = ["spark-submit", "--master", f"k8s://{fast.url}", "--status", "spark-pi-*"]
    code, out, err = fast_run(status, capsys)
    result = CliRunner().invoke(app, status)
    assert (code, err, result.exit_code) == (0, "", 0)
    assert out == result.stdout
    assert "pod phase: Pending" in out
    calls = fast.client_calls()
    assert len(calls) == 2
    assert [(c.method, c.params) for c in calls[:1]] == [(c.method, c.params) for c in calls[1:]]
    fast.cluster.calls.clear()

    def kill(kube: ClientClusterThread) -> list[str]:
        return [
            *["spark-submit", "--master", f"k8s://{kube.url}", "--kill", "default:spark-pi-*"],
            *["--conf", "spark.kubernetes.appKillPodDeletionGracePeriod=3"],
        ]

    code, out, err = fast_run(kill(fast), capsys)
    result = CliRunner().invoke(app, kill(full))
    assert (code, err, result.exit_code) == (0, "", 0)
    assert out == result.stdout
    assert out.startswith("Deleting driver pod: default:spark-pi-")
    assert seen(fast) == seen(full)
    assert [c.method for c in fast.client_calls()] == ["GET", "DELETE"]

    # Nothing left to match: the same red line, exit 1.
    with pytest.raises(SystemExit) as exited:
        quick_spark_submit(kill(fast))
    _, err = capsys.readouterr()
    result = CliRunner().invoke(app, kill(full))
    assert (exited.value.code, result.exit_code) == (1, 1)
    assert err == result.stderr == "error: no driver pod matches default:spark-pi-*\n"


def test_the_console_script_takes_the_fast_path(
    servers: tuple[ClientClusterThread, ClientClusterThread], tmp_path: Path
) -> None:
    """``kubemill.cli.main``, as the console script runs it, submits without typer."""
    fast, _ = servers
    code = (
        "import sys\n"
        "from kubemill.cli import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    sys.stderr.write(' '.join(m for m in ('typer', 'kubernetes') if m in sys.modules))\n"
    )
    argv = ["spark-submit", "--master", f"k8s://{fast.url}", *NO_WAIT, *S1]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    (pod,) = fast.list("/api/v1/namespaces/default/pods")
    assert f"submission ID default:{pod['metadata']['name']}" in done.stdout


def test_its_modules_load_without_the_heavy_libraries() -> None:
    """What makes it fast: none of typer, rich, pydantic, PyYAML, kubernetes, urllib3, in the
    way in or in the code it runs."""
    heavy = ("typer", "rich", "pydantic", "yaml", "kubernetes", "urllib3", "click")
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kubemill.cli.spark_fast, kubemill.cli.spark_cluster; "
            "print('\\n'.join(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    ).stdout.split()
    assert "kubemill.engines.spark.framework.cluster_mode" in loaded
    assert [m for m in loaded if m.split(".")[0] in heavy] == []
