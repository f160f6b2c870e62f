"""Engines from outside kubemill: registered in every process that needs them.

``KUBEMILL_ENGINES`` names them as ``module:attribute`` entries, comma-separated; each
attribute is a :class:`kubemill.kinds.Engine` or a sequence of them. Every kubemill process
reads it when it starts (the CLI, the operator, a detached local supervisor) and the SDK
does when a client is made, so a kind registered this way is known wherever its jobs go:
a detached supervisor or the operator inherits the variable, not the registrations made
in the process that submitted the job.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence

from kubemill.kinds import Engine, engines, register
from kubemill.substrates.base import SubstrateError

ENGINES_ENV = "KUBEMILL_ENGINES"


class PluginError(SubstrateError):
    """An engine named in ``KUBEMILL_ENGINES`` cannot be loaded; the message says which."""


def load_plugins(environ: Mapping[str, str] | None = None) -> list[Engine]:
    """Register every engine ``KUBEMILL_ENGINES`` names that is not registered yet.

    Returns the engines registered now. Safe to call again: an engine already registered
    (the same object) is skipped; another engine of a registered kind is an error.
    """
    spec = (os.environ if environ is None else environ).get(ENGINES_ENV, "")
    added: list[Engine] = []
    for entry in (part.strip() for part in spec.split(",")):
        if not entry:
            continue
        for engine in _resolve(entry):
            current = {e.kind: e for e in engines()}.get(engine.kind)
            if current is engine:
                continue
            if current is not None:
                raise PluginError(
                    f"{ENGINES_ENV}: {entry} registers {engine.kind}, which kubemill already "
                    "runs; give the plugin's kind another name"
                )
            register(engine)
            added.append(engine)
    return added


def _resolve(entry: str) -> list[Engine]:
    module_name, _, attribute = entry.partition(":")
    if not module_name or not attribute:
        raise PluginError(f"{ENGINES_ENV}: {entry!r} is not module:attribute")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(
            f"{ENGINES_ENV}: cannot import {module_name!r} ({exc}); make it importable "
            f"(install it, or add its directory to PYTHONPATH) or unset {ENGINES_ENV}"
        ) from exc
    value = getattr(module, attribute, None)
    if isinstance(value, Engine):
        return [value]
    if isinstance(value, Sequence) and value and all(isinstance(v, Engine) for v in value):
        return list(value)
    raise PluginError(
        f"{ENGINES_ENV}: {entry} is not an Engine or a list of Engines "
        f"(found {type(value).__name__})"
    )


__all__ = ["ENGINES_ENV", "PluginError", "load_plugins"]
