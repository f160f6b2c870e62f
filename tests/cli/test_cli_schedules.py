"""The CLI and ScheduledSparkApplications: ``kubemill get scheduledsparkapplications`` (or
its short name) lists them with their schedule, last run and state; ``kubemill run`` of one
on the local substrate starts its loop and returns; ``render`` shows its next run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cli_support import lines
from typer.testing import CliRunner

from kubemill.cli.app import app
from support.kube_client_support import ClientClusterThread, kmock_cluster
from support.waiting import eventually

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduled-spark-pi.yaml"


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    with ClientClusterThread() as thread:
        thread.install_crds()
        yield thread


def test_a_schedule_runs_locally_in_the_background_until_deleted(
    runner: CliRunner, state_dir: Path
) -> None:
    result = runner.invoke(app, ["run", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "ScheduledSparkApplication scheduled-spark-pi submitted" in result.stdout
    assert "kubemill get scheduledsparkapplications" in result.stdout
    assert "kubemill get sparkapplications" in result.stdout

    def listed() -> dict[str, str]:
        listing = runner.invoke(app, ["get", "scheduledsparkapplications"])
        assert listing.exit_code == 0, listing.output
        (row,) = columns(listing.stdout)
        return row

    row = eventually(
        lambda: (r := listed())["STATE"] == "Scheduled" and r, what="scheduled", timeout=60.0
    )
    assert row["NAME"] == "scheduled-spark-pi"
    assert row["SCHEDULE"].startswith("*/10 * * * *")
    suspended = runner.invoke(app, ["suspend", "scheduled-spark-pi"])
    assert suspended.exit_code == 0, suspended.output
    # What a suspend of a schedule does: no replicas of its own are stopped.
    assert suspended.stdout.splitlines()[0] == (
        "schedule scheduled-spark-pi suspended: no new run starts; runs already started go on"
        " (SparkApplications of their own: `kubemill get sparkapplications`)"
    )
    assert listed()["SUSPEND"] == "true"
    resumed = runner.invoke(app, ["resume", "scheduled-spark-pi"])
    assert resumed.exit_code == 0, resumed.output
    assert "resumed: its next run starts at its next due time" in resumed.stdout
    assert "replicas" not in resumed.stdout and "logs" not in resumed.stdout
    assert listed()["SUSPEND"] == "false"
    deleted = runner.invoke(app, ["delete", "scheduled-spark-pi"])
    assert deleted.exit_code == 0, deleted.output
    assert "No jobs found" in runner.invoke(app, ["get"]).stdout


def test_render_shows_the_next_run(runner: CliRunner) -> None:
    result = runner.invoke(app, ["render", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    objects = list(yaml.safe_load_all(result.stdout))
    assert objects[0]["kind"] == "SparkApplication"
    assert objects[0]["metadata"]["name"].startswith("scheduled-spark-pi-")
    assert any(o["kind"] == "Pod" for o in objects)


def columns(text: str) -> list[dict[str, str]]:
    """A rich table's rows as {header: cell}, cut at the headers' offsets (cells and headers
    hold spaces)."""
    header, *rows = lines(text)
    names = [n for n in header.split("   ") if n.strip()]
    starts = [header.index(n.strip()) for n in names]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [
        {n.strip(): row[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)}
        for row in rows
    ]


SPARK_APP = {
    "apiVersion": "kubemill.dev/v1",
    "kind": "SparkApplication",
    "metadata": {"name": "one-off", "namespace": "default"},
    "spec": {
        "type": "Python",
        "sparkVersion": "4.0.0",
        "image": "spark:4.0.0",
        "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
    },
}


@pytest.mark.parametrize("asked", ["scheduledsparkapplications", "scheduledsparkapp"])
def test_get_lists_schedules_with_their_last_run(
    runner: CliRunner, tmp_path: Path, cluster: ClientClusterThread, asked: str
) -> None:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    cli = ["--substrate", "kubernetes", "--kubeconfig", str(kubeconfig)]
    # In the foreground too, `run` submits and returns: a schedule never ends.
    submitted = runner.invoke(app, [*cli, "run", str(EXAMPLE)])
    assert submitted.exit_code == 0, submitted.output
    assert "ScheduledSparkApplication scheduled-spark-pi submitted" in submitted.stdout
    assert "get scheduledsparkapplications" in submitted.stdout
    assert "get sparkapplications" in submitted.stdout
    cluster.create("/apis/kubemill.dev/v1/namespaces/default/sparkapplications", SPARK_APP)
    # The operator's first passes: scheduled, and a run started.
    path = "/apis/kubemill.dev/v1/namespaces/default/scheduledsparkapplications"
    cluster.patch(
        f"{path}/scheduled-spark-pi/status",
        {
            "status": {
                "scheduleState": "Scheduled",
                "lastRun": "2026-12-01T10:00:00Z",
                "lastRunName": "scheduled-spark-pi-1796119200000000000",
                "nextRun": "2026-12-01T10:10:00Z",
            }
        },
    )

    listed = runner.invoke(app, [*cli, "get", asked])
    assert listed.exit_code == 0, listed.output
    (row,) = columns(listed.stdout)
    assert row["NAME"] == "scheduled-spark-pi"
    assert row["SCHEDULE"] == "*/10 * * * * (UTC)"
    assert row["SUSPEND"] == "false"
    assert row["LAST RUN NAME"] == "scheduled-spark-pi-1796119200000000000"
    assert row["LAST RUN"] not in ("", "-")  # an age, as kubectl shows it
    assert row["STATE"] == "Scheduled"

    # Every job: the schedule among them, in the jobs' table.
    everything = columns(runner.invoke(app, [*cli, "get"]).stdout)
    assert {(r["NAME"], r["KIND"]) for r in everything} == {
        ("scheduled-spark-pi", "ScheduledSparkApplication"),
        ("one-off", "SparkApplication"),
    }
    # A kind with nothing of it says so.
    none = runner.invoke(app, [*cli, "get", "tfjobs"])
    assert none.exit_code == 0 and "No TFJobs found." in none.stdout
    described = runner.invoke(app, [*cli, "describe", "scheduled-spark-pi"])
    assert described.exit_code == 0, described.output
    assert "ScheduledSparkApplication" in described.stdout
    # It has no logs of its own: its runs do.
    logged = runner.invoke(app, [*cli, "logs", "scheduled-spark-pi"])
    assert logged.exit_code == 1
    assert "runs no pods of its own" in logged.stderr
    assert "kubemill get sparkapplications" in logged.stderr
    as_yaml = runner.invoke(app, [*cli, "get", asked, "-o", "yaml"])
    items = yaml.safe_load(as_yaml.stdout)["items"]
    assert [i["status"]["lastRunName"] for i in items] == [row["LAST RUN NAME"]]
