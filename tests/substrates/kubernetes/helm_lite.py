"""Just enough of Helm's template language to render the kubemill chart in tests.

No helm binary can be installed here, so the chart's templates are checked by rendering
them with this small evaluator: ``{{ expr }}`` with ``.``/``$``-rooted paths,
``if``/``else``/``range``/``end`` blocks and the ``{{-``/``-}}`` whitespace trimming. The
chart generator emits nothing else; anything else is an error here, not a silent pass.
"""

from __future__ import annotations

import re
from typing import Any

_ACTION = re.compile(r"{{(-?)\s*(.*?)\s*(-?)}}", re.DOTALL)


class TemplateError(ValueError):
    """A construct this evaluator does not know."""


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    trim_next = False
    for match in _ACTION.finditer(text):
        chunk = text[pos : match.start()]
        if trim_next:
            chunk = chunk.lstrip()
        if match.group(1):
            chunk = chunk.rstrip()
        tokens.append(("text", chunk))
        tokens.append(("action", match.group(2)))
        trim_next = bool(match.group(3))
        pos = match.end()
    tail = text[pos:]
    tokens.append(("text", tail.lstrip() if trim_next else tail))
    return tokens


def _lookup(expr: str, dot: Any, root: dict[str, Any]) -> Any:
    if expr in (".", "$"):
        return dot if expr == "." else root
    if expr.startswith("$."):
        value: Any = root
        parts = expr[2:].split(".")
    elif expr.startswith("."):
        value = dot
        parts = expr[1:].split(".")
    else:
        raise TemplateError(f"unknown expression {expr!r}")
    for part in parts:
        value = value[part]
    return value


def _render(
    tokens: list[tuple[str, str]], i: int, dot: Any, root: dict[str, Any], out: list[str]
) -> tuple[int, str]:
    """Render from token ``i`` until an ``else``/``end`` at this level; return where it stopped."""
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "text":
            out.append(value)
            i += 1
            continue
        word, _, rest = value.partition(" ")
        if word in ("else", "end"):
            return i, word
        if word == "if":
            i = _block(tokens, i + 1, dot, root, out, truthy=bool(_lookup(rest, dot, root)))
        elif word == "range":
            items = _lookup(rest, dot, root) or []
            start = i + 1
            end = _skip(tokens, start)
            for item in items:
                _render(tokens, start, item, root, out)
            i = end
        else:
            out.append(str(_lookup(value, dot, root)))
            i += 1
    return i, ""


def _block(
    tokens: list[tuple[str, str]],
    i: int,
    dot: Any,
    root: dict[str, Any],
    out: list[str],
    *,
    truthy: bool,
) -> int:
    sink: list[str] = []
    stop, word = _render(tokens, i, dot, root, out if truthy else sink)
    if word == "else":
        stop, word = _render(tokens, stop + 1, dot, root, sink if truthy else out)
    if word != "end":
        raise TemplateError("if without end")
    return stop + 1


def _skip(tokens: list[tuple[str, str]], i: int) -> int:
    """The index after the ``end`` matching the block that starts at ``i``."""
    depth = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "action":
            word = value.split(" ")[0]
            if word in ("if", "range"):
                depth += 1
            elif word == "end":
                if depth == 0:
                    return i + 1
                depth -= 1
        i += 1
    raise TemplateError("block without end")


def render(text: str, *, values: dict[str, Any], namespace: str) -> str:
    """Render one template with ``.Values`` and ``.Release.Namespace``."""
    root = {"Values": values, "Release": {"Namespace": namespace}}
    out: list[str] = []
    _, word = _render(_tokens(text), 0, root, root, out)
    if word:
        raise TemplateError(f"unexpected {word}")
    return "".join(out)
