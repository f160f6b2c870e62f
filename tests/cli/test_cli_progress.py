"""``kubemill get`` (the real console script, quick path and full command) shows a job's
PROGRESS and ETA once its program reports, and ``-o json`` has its ``trainerStatus``."""

from __future__ import annotations

from pathlib import Path

from cli_support import Kubemill, lines, pytorch_job, write_manifest

from support.waiting import eventually

HALFWAY = (
    "import json, os, time\n"
    "path = os.environ['KUBEMILL_PROGRESS_FILE']\n"
    "for step, when in ((1, 1000.0), (2, 1010.0)):\n"
    "    line = {'step': step, 'total': 4, 'time': when, 'loss': 1 / step}\n"
    "    open(path, 'a').write(json.dumps(line) + '\\n')\n"
    "while not os.path.exists('finish'): time.sleep(0.02)\n"
)
"""Two of four steps, ten seconds apart (by the reports' own clock), then it waits."""


def row_of(table: str, name: str) -> list[str]:
    return next(line.split() for line in lines(table) if line.startswith(name))


def test_get_shows_progress_and_eta_while_a_job_reports(kubemill: Kubemill, tmp_path: Path) -> None:
    write_manifest(tmp_path, pytorch_job("quiet", master="pass"))
    kubemill("run", str(tmp_path / "quiet.yaml"), check=True)
    assert "PROGRESS" not in kubemill("get", check=True).stdout

    manifest = write_manifest(tmp_path, pytorch_job("halfway", master=HALFWAY))
    kubemill("run", "--detach", str(manifest), check=True)

    def reported() -> str:
        table = kubemill("get", check=True).stdout
        assert row_of(table, "halfway")[-2:] == ["50%", "20s"], table
        return table

    table = eventually(reported, "halfway at 50% with 20 s to go")
    assert lines(table)[0].split()[-2:] == ["PROGRESS", "ETA"]
    # A job that made no report has none to show.
    assert row_of(table, "quiet")[-2:] == ["-", "-"]
    # The full command (a name given) prints the same record.
    status = kubemill.job("halfway")["status"]
    assert isinstance(status, dict)
    assert status["trainerStatus"]["estimatedRemainingSeconds"] == 20

    described = kubemill("describe", "halfway", check=True).stdout
    assert "Progress:" in described and "50%, ETA 20s" in described
    assert "Metrics:" in described and "loss=0.5" in described

    (tmp_path / "finish").touch()
    eventually(lambda: row_of(kubemill("get", check=True).stdout, "halfway")[2] == "Succeeded")
