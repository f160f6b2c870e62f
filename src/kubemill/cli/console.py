"""The console ``kubemill`` prints its results on (rich's), for every command.

Apart from :mod:`kubemill.cli.views` (tables, panels, log prefixes), so that a command
that prints a line or two, as ``run --detach`` does, imports none of those.
"""

from __future__ import annotations

from rich.console import Console

from kubemill.cli.errors import plain_console
from kubemill.cli.table import PIPE_WIDTH


def stdout_console() -> Console:
    """The console for results; never wraps lines, so log lines and tables stay greppable."""
    console = plain_console()
    if not console.is_terminal:
        console.width = max(console.width, PIPE_WIDTH)
    return console
