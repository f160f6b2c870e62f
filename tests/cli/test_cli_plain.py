"""The plain command lines the console script reads without typer (``kubemill.cli.plain``)
call the very command typer calls, with the very settings typer makes: each command line
here is read both ways, with the command's function replaced by one that records what it
was given. Any other command line is left to typer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubemill.cli.app import app
from kubemill.cli.listing import plain_get
from kubemill.cli.plain import plain_run

PLAIN_RUNS = [
    ["run", "-d", "job.yaml"],
    ["run", "job.yaml", "--detach"],
    ["run", "-d", "-nteam", "job.yaml"],
    ["--state-dir", "/s", "run", "-d", "-n", "team", "job.yaml"],
    ["-n", "a", "run", "--detach", "--namespace=b", "job.yaml"],
    ["--namespace", "my team", "run", "-d", "job.yaml"],
    ["--substrate=LOCAL", "run", "-d", "job.yaml"],
    ["--substrate", "kubernetes", "--state-dir=/s", "run", "-d", "job.yaml"],
    ["run", "-d", "run"],
    # In the foreground:
    ["run", "job.yaml"],
    ["-n", "team", "run", "job.yaml"],
    ["--state-dir=/s", "run", "--namespace", "b", "job.yaml"],
]
TYPERS_RUNS = [
    ["run", "-d"],
    ["run", "-d", "a.yaml", "b.yaml"],
    ["run", "-d", "--runtime", "r.yaml", "job.yaml"],
    ["run", "-d", "--help"],
    ["run", "--help"],
    ["run", "--runtime", "r.yaml", "job.yaml"],
    ["run", "-"],
    ["run", "-d", "-"],
    ["run", "-d", "--", "job.yaml"],
    ["run", "-dn", "team", "job.yaml"],
    ["run", "--detach=yes", "job.yaml"],
    ["run", "-d", "-n", "", "job.yaml"],
    ["--kubeconfig", "k", "run", "-d", "job.yaml"],
    ["--substrate", "moon", "run", "-d", "job.yaml"],
    ["--state-dir", "run", "-d", "job.yaml"],
    ["logs", "run"],
    ["run"],
]
PLAIN_GETS = [
    ["get"],
    ["get", "-o", "table"],
    ["get", "-otable", "-nteam"],
    ["--state-dir", "/s", "-n", "a", "get", "--namespace=b"],
    ["--substrate=LOCAL", "get"],
    ["--substrate", "kubernetes", "get"],
]
TYPERS_GETS = [
    ["get", "myjob"],
    ["get", "--help"],
    ["get", "-o"],
    ["get", "-o", "yaml"],
    ["--substrate", "moon", "get"],
    ["--kubeconfig", "k", "get"],
    ["describe", "x"],
    ["get", "get"],
    [],
]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``run_job`` and ``get_jobs`` were called with, in place of running them."""
    import kubemill.cli.listing
    import kubemill.cli.run

    made: list[dict[str, Any]] = []

    def run_job(settings: Any, file: Path, *, detach: bool, runtimes: Any = ()) -> int:
        made.append({"settings": settings, "file": file, "detach": detach})
        return 0

    def get_jobs(settings: Any, name: str | None, *, output: str, history: bool = False) -> None:
        made.append({"settings": settings, "name": name, "output": output, "history": history})

    monkeypatch.setattr(kubemill.cli.run, "run_job", run_job)
    monkeypatch.setattr(kubemill.cli.listing, "get_jobs", get_jobs)
    monkeypatch.delenv("KUBEMILL_SUBSTRATE", raising=False)
    monkeypatch.delenv("KUBEMILL_STATE_DIR", raising=False)
    return made


def typers_call(argv: list[str], calls: list[dict[str, Any]]) -> dict[str, Any]:
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 0, done.output
    assert len(calls) == 1
    return calls.pop()


@pytest.mark.parametrize("argv", PLAIN_RUNS)
def test_a_plain_run_is_the_command_typer_runs(
    argv: list[str], calls: list[dict[str, Any]]
) -> None:
    typers = typers_call(argv, calls)
    assert plain_run(argv) == 0
    assert calls == [typers]
    assert typers["detach"] is ("-d" in argv or "--detach" in argv)


@pytest.mark.parametrize("argv", PLAIN_GETS)
def test_a_plain_get_is_the_command_typer_runs(
    argv: list[str], calls: list[dict[str, Any]]
) -> None:
    typers = typers_call(argv, calls)
    assert plain_get(argv) == 0
    assert calls == [typers]


def test_the_environment_is_read_as_typer_reads_it(
    calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Options from their variables are not repeated in the commands printed; typed ones are.
    monkeypatch.setenv("KUBEMILL_STATE_DIR", "/from/env")
    monkeypatch.setenv("KUBEMILL_SUBSTRATE", "Kubernetes")
    for argv in (["run", "-d", "job.yaml"], ["--state-dir", "/typed", "run", "-d", "job.yaml"]):
        typers = typers_call(argv, calls)
        assert plain_run(argv) == 0
        assert calls == [typers]
        calls.clear()


@pytest.mark.parametrize("argv", TYPERS_RUNS)
def test_any_other_run_is_typers(argv: list[str], calls: list[dict[str, Any]]) -> None:
    assert plain_run(argv) is None
    assert calls == []


@pytest.mark.parametrize("argv", TYPERS_GETS)
def test_any_other_get_is_typers(argv: list[str], calls: list[dict[str, Any]]) -> None:
    assert plain_get(argv) is None
    assert calls == []


def test_a_plain_run_ends_as_typer_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The errors a user can act on are one red line and exit 1, as the commands'
    # user_errors reports them; Ctrl-C is 130.
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "state"))
    missing = tmp_path / "missing.yaml"
    assert plain_run(["run", "-d", str(missing)]) == 1
    assert "error: cannot read" in capsys.readouterr().err
    import kubemill.cli.run

    def interrupted(*args: Any, **kwargs: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(kubemill.cli.run, "run_job", interrupted)
    assert plain_run(["run", "-d", str(missing)]) == 130


def test_the_collector_rests_on_a_plain_command_that_ends_at_once(
    calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plain `run --detach` ends once it has printed: the cyclic collector does not run
    # on the way (kubemill.cli.main). A job followed in the foreground and any command
    # typer runs may run for long: it runs there, the foreground's start frozen out of its
    # walks.
    import gc
    import sys

    import kubemill.cli.app
    import kubemill.cli.ending
    import kubemill.cli.run
    from kubemill.cli import main

    collecting: dict[str, tuple[bool, int]] = {}

    def run_job(*args: Any, detach: bool, **kwargs: Any) -> int:
        collecting["detached" if detach else "foreground"] = (gc.isenabled(), gc.get_freeze_count())
        return 0

    def run_app(*, exit_at_once: bool) -> None:
        collecting["typer"] = (gc.isenabled(), gc.get_freeze_count())

    monkeypatch.setattr(kubemill.cli.run, "run_job", run_job)
    monkeypatch.setattr(kubemill.cli.ending, "end_at_once", lambda exit: None)
    monkeypatch.setattr(kubemill.cli.app, "run_app", run_app)
    try:
        for argv in (["run", "-d", "job.yaml"], ["run", "job.yaml"]):
            gc.unfreeze()
            monkeypatch.setattr(sys, "argv", ["kubemill", *argv])
            with pytest.raises(SystemExit) as ended:
                main()
            assert ended.value.code == 0
        gc.unfreeze()
        monkeypatch.setattr(sys, "argv", ["kubemill", "run", "--runtime", "r.yaml", "job.yaml"])
        main()
    finally:
        gc.unfreeze()
        gc.enable()
    assert collecting["detached"] == (False, 0)
    enabled, frozen = collecting["foreground"]
    assert enabled and frozen > 10_000
    assert collecting["typer"] == (True, 0)


@pytest.mark.parametrize("colour", [False, True], ids=["pipe", "terminal"])
def test_run_detach_prints_the_very_lines_rich_printed(
    colour: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `run --detach` draws its two lines as `get` draws its table (kubemill.cli.styling),
    # without rich: byte for byte what rich's console printed, styles and all.
    import io
    from types import SimpleNamespace

    from rich.console import Console
    from rich.text import Text

    from kubemill.cli.settings import Settings

    class Submitting:
        def submit(self, job: Any, **options: Any) -> Any:
            return SimpleNamespace(kind=job.KIND, name=job.name)

    monkeypatch.setattr(Settings, "client", lambda self, **local: Submitting())
    for variable in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "KUBEMILL_SUBSTRATE"):
        monkeypatch.delenv(variable, raising=False)
    if colour:
        monkeypatch.setenv("FORCE_COLOR", "1")
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: quick, namespace: team}\n"
        "spec:\n  pytorchReplicaSpecs:\n    Master:\n      template:\n        spec:\n"
        "          containers: [{name: pytorch, image: python}]\n"
    )
    state = tmp_path / "state"
    assert plain_run(["--state-dir", str(state), "-n", "team", "run", "-d", str(manifest)]) == 0
    printed = capsys.readouterr().out

    drawn = io.StringIO()
    console = Console(file=drawn, soft_wrap=True, highlight=False, force_terminal=colour)
    next_commands = "  |  ".join(
        f"kubemill --state-dir {state} --namespace team {verb}"
        for verb in ("get quick", "logs quick -f", "describe quick", "delete quick")
    )
    console.print(
        Text.assemble(("PyTorchJob quick", "bold"), " submitted; it runs in the background.")
    )
    console.print(Text.assemble(("Next: ", "dim"), next_commands))
    assert printed == drawn.getvalue()
    assert ("\x1b[1m" in printed) is colour
