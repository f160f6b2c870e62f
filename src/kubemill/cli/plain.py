"""The plain command lines of the hot commands, read without typer.

typer runs every option of a command through a pydantic TypeAdapter, and importing typer
and its command tree costs more than ``kubemill get`` of a thousand jobs or ``kubemill run
--detach`` of a job takes otherwise. So the console script reads the plain forms of these
two command lines here, with the standard library only, and calls the very function the
typer command calls, with the same :class:`~kubemill.cli.settings.Settings`:

    kubemill [GLOBAL] get [-n NS] [-o table]
    kubemill [GLOBAL] run [-d | --detach] [-n NS] FILE

where GLOBAL is any of ``--state-dir DIR``, ``--substrate S`` and ``-n/--namespace NS``
(each also as ``--option=value``, a short one also as ``-nNS``), read as typer reads them
(an option left out is its environment variable's). Any other command line (another
option or verb, ``--help``, a value typer would refuse) is typer's, which reports it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kubemill.cli.settings import Settings, Substrate, global_settings

GLOBAL_OPTIONS = {
    "--state-dir": "state_dir",
    "--substrate": "substrate",
    "--namespace": "namespace",
}
"""The global options a plain command line may give (flag -> the setting it sets)."""
SHORT = {"-n": "--namespace", "-o": "--output", "-d": "--detach"}


@dataclass(frozen=True)
class PlainCommand:
    """A plain command line, read: its settings (the command's own ``--namespace`` in),
    the command's other options and its arguments."""

    settings: Settings
    options: Mapping[str, str] = field(default_factory=dict)
    """Each option given (its long flag without dashes) -> its value; a flag's is ""."""
    arguments: tuple[str, ...] = ()


def read_plain(
    argv: Sequence[str],
    verb: str,
    *,
    options: Sequence[str] = (),
    flags: Sequence[str] = (),
    arguments: int = 0,
) -> PlainCommand | None:
    """``argv`` (the console script's, without the program) read as ``[GLOBAL] VERB
    [OPTIONS] [ARGUMENTS]``: ``options`` are the command's long options that take a value
    (``--namespace`` always may), ``flags`` those that take none, and up to ``arguments``
    arguments that do not start with ``-``. ``None`` for any other command line."""
    taking = {"--namespace", *options}
    found: dict[str, str] = {}
    given: dict[str, str] = {}
    positional: list[str] = []
    args = list(argv)
    seen_verb = False
    while args:
        arg = args.pop(0)
        if not arg.startswith("-"):
            if not seen_verb and arg == verb:
                seen_verb = True
            elif seen_verb and len(positional) < arguments and arg:
                positional.append(arg)
            else:
                return None
            continue
        name, eq, value = arg.partition("=")
        if not eq and not arg.startswith("--") and len(arg) > 2:
            name, value, eq = arg[:2], arg[2:], "="  # -nNS, -otable
        name = SHORT.get(name, name)
        if seen_verb and name in flags and not eq:
            found[name[2:]] = ""
            continue
        allowed = taking if seen_verb else GLOBAL_OPTIONS
        if name not in allowed:
            return None
        if not eq:
            if not args:
                return None
            value = args.pop(0)
        if not value:
            return None  # typer takes "" as it is; kept for typer to judge
        if seen_verb:
            found[name[2:]] = value
        else:
            given[GLOBAL_OPTIONS[name]] = value
    if not seen_verb:
        return None
    substrate = given.get("substrate") or os.environ.get("KUBEMILL_SUBSTRATE") or "local"
    if substrate.lower() not in {s.value for s in Substrate}:
        return None
    settings = global_settings(
        substrate=Substrate(substrate.lower()),
        kubeconfig=None,
        context=None,
        namespace=given.get("namespace"),
        state_dir=given.get("state_dir") or os.environ.get("KUBEMILL_STATE_DIR") or None,
        typed=given,
    )
    settings.in_namespace(found.pop("namespace", None))
    return PlainCommand(settings, found, tuple(positional))


def plain_run(argv: Sequence[str]) -> int | None:
    """``kubemill run [--detach] FILE`` of a plain command line (see the module): its exit
    code; ``None`` for any other command line, which typer runs."""
    command = read_plain(argv, "run", flags=("--detach",), arguments=1)
    if command is None or not command.arguments:
        return None
    detach = "detach" in command.options

    def run() -> int:
        from pathlib import Path

        from kubemill.cli.run import run_job

        if not detach:
            collect_from_now_on()
        return run_job(command.settings, Path(command.arguments[0]), detach=detach)

    return end_as_typer(run)


def collect_from_now_on() -> None:
    """Turn the cyclic collector back on (the console script turns it off for a plain
    command, :func:`kubemill.cli.main`) for a command that runs for as long as its job:
    a job followed in the foreground, whose supervisor is this process. What the start
    made (modules, classes, the models' schemas: ~37,000 objects that live as long as the
    process) is moved out of the collector's reach first, so its collections walk only
    what the job's run makes."""
    import gc

    gc.freeze()
    gc.enable()


def end_as_typer(command: Callable[[], int]) -> int:
    """Run ``command`` and return its exit code, ending as a command under typer does: an
    error the user can act on is one red line and exit 1 (what the commands'
    ``user_errors`` reports), Ctrl-C is 130, a reader gone from the pipe is 1; a bug keeps
    its traceback."""
    try:
        return command()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Later flushes (at exit) go nowhere instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        from kubemill.cli.errors import report

        code = report(exc)
        if code is None:
            raise
        return code
