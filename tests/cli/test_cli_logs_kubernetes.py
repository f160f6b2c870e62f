"""``kubemill --substrate kubernetes logs`` passes ``--tail``, ``--since`` and
``--limit-bytes`` to the pod log API (``tailLines``, ``sinceSeconds``/``sinceTime``,
``limitBytes``), always with ``timestamps``, against the emulated cluster over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import pytorch_job, write_manifest
from typer.testing import CliRunner

from kubemill.cli.app import app
from support.kube_client_support import ClientClusterThread, Operator, kmock_cluster, running


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    with ClientClusterThread() as thread:
        thread.install_crds()
        yield thread


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--tail", "3"], {"tailLines": "3"}, id="tail"),
        pytest.param(["--since", "90s"], {"sinceSeconds": "90"}, id="since-duration"),
        pytest.param(["--since", "1.5s"], {"sinceSeconds": "2"}, id="since-rounds-up"),
        pytest.param(
            ["--since", "2026-01-02T03:04:05+01:00"],
            {"sinceTime": "2026-01-02T02:04:05Z"},
            id="since-time",
        ),
        pytest.param(["--limit-bytes", "64"], {"limitBytes": "64"}, id="limit-bytes"),
    ],
)
def test_log_options_reach_the_pod_log_api(
    runner: CliRunner,
    tmp_path: Path,
    cluster: ClientClusterThread,
    args: list[str],
    expected: dict[str, str],
) -> None:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    cli = ["--substrate", "kubernetes", "--kubeconfig", str(kubeconfig)]
    manifest = write_manifest(tmp_path, pytorch_job("ddp", master="print('m')"))
    submitted = runner.invoke(app, [*cli, "run", "--detach", str(manifest)])
    assert submitted.exit_code == 0, submitted.output
    operator = Operator(cluster)
    operator.create_pods("pytorchjobs", "default", "ddp")
    operator.pod_status("default", "ddp-master-0", running("pytorch", ip="10.1.0.7"))
    operator.start_log("default", "ddp-master-0", "pytorch").write("one", "two")

    logged = runner.invoke(app, [*cli, "logs", "ddp", "--timestamps", *args])

    assert logged.exit_code == 0, logged.output
    (call,) = [c for c in cluster.client_calls() if c.path.endswith("/log")]
    assert {k: call.params[k] for k in expected} == expected
    assert call.params["timestamps"] == "true"
    others = {"tailLines", "sinceSeconds", "sinceTime", "limitBytes"} - set(expected)
    assert not others & set(call.params)
