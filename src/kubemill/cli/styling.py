"""Text for a terminal or a pipe, drawn without rich: a style as the ANSI codes rich prints
for it, whether to colour a stream (as rich decides), and a write that a closed pipe does
not break. ``kubemill get``'s table (:mod:`.table`) and ``run --detach``'s two lines are
drawn with these; only the standard library is imported, so that ``run --detach`` makes
none of a job list's records.
"""

from __future__ import annotations

import os
from typing import TextIO

ANSI = {
    "bold": "1",
    "dim": "2",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
    "magenta": "35",
    "bold red": "1;31",
}
"""The ANSI codes of the styles drawn here (rich's names)."""


def styled(text: str, style: str, colour: bool) -> str:
    """``text`` in ``style`` (a key of :data:`ANSI`) when colouring, else as it is."""
    code = ANSI.get(style) if colour else None
    return f"\x1b[{code}m{text}\x1b[0m" if code else text


def colour_wanted(stream: TextIO) -> bool:
    """Whether to colour what goes to ``stream``, as rich decides it for its console:
    ``NO_COLOR`` never, ``FORCE_COLOR`` (or rich's ``TTY_COMPATIBLE=1``) always, else on a
    terminal that is not ``dumb``."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR") or os.environ.get("TTY_COMPATIBLE") == "1":
        return True
    if os.environ.get("TTY_COMPATIBLE") == "0":
        return False
    try:
        terminal = os.isatty(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return False
    return terminal and os.environ.get("TERM", "") not in ("dumb", "unknown")


def write(text: str, stream: TextIO) -> None:
    """Print ``text``; a reader that has had enough (``kubemill get | head``) is no error."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        # Later flushes (at exit) go nowhere instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
