"""Kubernetes ``$(VAR)`` expansion, as the kubelet applies it to command, args and env.

The rules (Kubernetes' ``expansion`` package):

- ``$(NAME)`` becomes the value of ``NAME`` when it is defined; an undefined reference
  is left exactly as written, ``$(NAME)``;
- ``$$`` is an escaped ``$``, so ``$$(NAME)`` yields the literal text ``$(NAME)``;
- a ``$`` followed by anything else, or a ``$(`` that is never closed, is kept as is.

There is no shell involved anywhere: the result is one argv element, spaces and all.
"""

from __future__ import annotations

from collections.abc import Mapping


def expand(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with every ``$(NAME)`` defined in ``variables`` replaced by its value."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "$" or i + 1 >= n:
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                # An unterminated reference is literal text; keep scanning after "$(".
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            out.append(variables.get(name, f"$({name})"))
            i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)
