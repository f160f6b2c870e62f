"""``kubemill env``: the Python environments kubemill builds for engines with pins of their own.

``list`` shows each one and its state, ``create NAME`` builds it (idempotent, resuming at a
step that failed), ``python NAME`` prints its interpreter for scripts::

    $(kubemill env python mars) my_mars_program.py

Only typer is imported at the top, as in :mod:`kubemill.cli.app`.
"""

# No `from __future__ import annotations`: typer reads the annotations (see app.py).
from typing import Annotated

import typer

env_app = typer.Typer(
    name="env",
    help="Python environments kubemill builds for engines with conflicting pins (Mars).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EnvsDirOption = Annotated[
    str | None,
    typer.Option(
        "--envs-dir",
        envvar="KUBEMILL_ENVS_DIR",
        help="Where environments live (default: $XDG_DATA_HOME/kubemill/envs).",
    ),
]


@env_app.command("list")
def list_command(envs_dir: EnvsDirOption = None) -> None:
    """List the environments kubemill builds: state, path and the images they stand for."""
    from kubemill.cli.commands import user_errors

    user_errors(_list)(envs_dir)


def _list(envs_dir: str | None) -> None:
    from rich.table import Table

    from kubemill.cli.console import stdout_console
    from kubemill.substrates.local.environments import list_environments

    table = Table(box=None, pad_edge=False)
    for column in ("NAME", "STATE", "PATH", "IMAGES", "WHAT"):
        table.add_column(column, overflow="fold")
    for found in list_environments(envs_dir):
        table.add_row(
            found.spec.name,
            found.state,
            str(found.prefix),
            ", ".join(found.spec.images),
            found.spec.summary,
        )
    stdout_console().print(table)


@env_app.command("create")
def create_command(
    name: Annotated[str, typer.Argument(help="The environment (`kubemill env list`).")],
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Delete the environment first and build it anew.")
    ] = False,
    envs_dir: EnvsDirOption = None,
) -> None:
    """Build an environment; a no-op check when it is ready, a resume when a step failed."""
    from kubemill.cli.commands import user_errors

    user_errors(_create)(name, fresh, envs_dir)


def _create(name: str, fresh: bool, envs_dir: str | None) -> None:
    from kubemill.substrates.local.environments import create

    create(name, envs_dir, fresh=fresh, progress=lambda line: typer.echo(line, err=True))


@env_app.command("python")
def python_command(
    name: Annotated[str, typer.Argument(help="The environment (`kubemill env list`).")],
    envs_dir: EnvsDirOption = None,
) -> None:
    """Print the interpreter of a ready environment (exit 1 if it is not created)."""
    from kubemill.cli.commands import user_errors

    user_errors(_python)(name, envs_dir)


def _python(name: str, envs_dir: str | None) -> None:
    from kubemill.substrates.local.environments import python_of

    typer.echo(str(python_of(name, envs_dir)))
