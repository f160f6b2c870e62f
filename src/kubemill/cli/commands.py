"""What every command of the ``kubemill`` tree shares: the handling of errors a user can act
on (:func:`user_errors`), the namespace option, the settings read from typer's context.

Only typer and the standard library are imported here (``kubemill --help`` loads this).
"""

# No `from __future__ import annotations`: typer reads the annotations (see app.py).
import functools
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, ParamSpec, TypeVar

import typer

from kubemill.cli.settings import Settings

P = ParamSpec("P")
R = TypeVar("R")


def user_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Report the errors a user can act on as one red line and exit 1 (no traceback).

    Applied to each command rather than around the whole app so that it also holds
    under typer's test runner, which calls commands without :func:`run_app`.
    """

    @functools.wraps(command)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except Exception as exc:
            from kubemill.cli.errors import report

            code = report(exc)
            if code is None:
                raise
            raise typer.Exit(code) from None

    return guarded


class GangScheduler(StrEnum):
    """``render --gang-scheduler``: the schedulers whose PodGroup kubemill writes."""

    VOLCANO = "volcano"
    SCHEDULER_PLUGINS = "scheduler-plugins"


NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", help="Namespace of the job (default: the job's own, else 'default')."
    ),
]

JobArgument = Annotated[
    str, typer.Argument(help="The job: NAME, or KIND/NAME (tfjob/NAME) as kubectl takes it.")
]


def settings_of(ctx: typer.Context, namespace: str | None = None) -> Settings:
    """The global options of the command line, with the command's own ``--namespace`` when
    it was given (replayed too in the commands kubemill prints)."""
    settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings()
    return settings.in_namespace(namespace)
