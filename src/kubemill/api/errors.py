"""Validation errors that point at the offending field of a manifest.

Every problem found while loading a manifest becomes one :class:`FieldError` with a
dotted path (``spec.tfReplicaSpecs.Worker.replicas``), a message and, where we can
guess what the user meant, a hint. :class:`ManifestError` carries all of them at once
so a user fixes a manifest in one pass instead of one error per run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem in a manifest."""

    path: str
    """Dotted field path, list indices in brackets: ``spec.replicaSpecs[0].tfReplicaType``."""
    message: str
    """What is wrong, in words."""
    hint: str = ""
    """What to do about it, when we can tell."""
    source: str = ""
    """Where the manifest came from (file name and document number), if known."""

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        text = f"{where}{self.path or '<document>'}: {self.message}"
        text = f"{text} ({self.hint})" if self.hint else text
        # One problem, one line: tools (and `kubemill validate`) count lines.
        return text.replace("\r", "\\r").replace("\n", "\\n")


class ManifestError(ValueError):
    """A manifest could not be loaded; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return a "did you mean ..." hint for a misspelt word, or "" if nothing is close."""
    import difflib  # here: only a mistake needs it (spark-submit's fast path never does)

    options = list(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not close:
        lowered = {o.lower(): o for o in options}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    return f"did you mean {close[0]!r}?" if close else ""


def join_path(parts: Iterable[str | int]) -> str:
    """Render a location tuple as ``a.b[0].c`` (odd keys quoted: ``a['x.y']``)."""
    text = ""
    for part in parts:
        text = child_path(text, part)
    return text


def child_path(parent: str, part: str | int) -> str:
    """``parent`` extended by one key or list index."""
    if isinstance(part, int):
        return f"{parent}[{part}]"
    if not _PLAIN_KEY.match(part):
        # Keys with dots, spaces or control characters are quoted so the path stays
        # readable and unambiguous: labels['app.kubernetes.io/name'].
        return f"{parent}[{part!r}]"
    return f"{parent}.{part}" if parent else part


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_/-]+$")
