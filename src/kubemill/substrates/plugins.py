"""Engines from outside kubemill: registered in every process that needs them.

``KUBEMILL_ENGINES`` names them as ``module:attribute`` entries, comma-separated; each
attribute is a :class:`kubemill.kinds.Engine` or a :class:`kubemill.kinds.Controller` (a
kind that creates jobs of a registered engine's kind), or a sequence of them. Every kubemill process
reads it when it starts (the CLI, the operator, a detached local supervisor) and the SDK
does when a client is made, so a kind registered this way is known wherever its jobs go:
a detached supervisor or the operator inherits the variable, not the registrations made
in the process that submitted the job.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence

from kubemill.kinds import Controller, Engine, Entry, entries, register
from kubemill.substrates.base import SubstrateError

ENGINES_ENV = "KUBEMILL_ENGINES"


class PluginError(SubstrateError):
    """An engine named in ``KUBEMILL_ENGINES`` cannot be loaded; the message says which."""


def load_plugins(environ: Mapping[str, str] | None = None) -> list[Entry]:
    """Register every engine and controller ``KUBEMILL_ENGINES`` names that is not
    registered yet, engines first (a controller's runs are of an engine's kind).

    Returns the entries registered now. Safe to call again: an entry already registered
    (the same object) is skipped; another entry of a registered kind is an error.
    """
    spec = (os.environ if environ is None else environ).get(ENGINES_ENV, "")
    named = [
        (entry, found)
        for entry in (part.strip() for part in spec.split(","))
        if entry
        for found in _resolve(entry)
    ]
    added: list[Entry] = []
    for entry, found in sorted(named, key=lambda pair: isinstance(pair[1], Controller)):
        current = {e.kind: e for e in entries()}.get(found.kind)
        if current is found:
            continue
        if current is not None:
            raise PluginError(
                f"{ENGINES_ENV}: {entry} registers {found.kind}, which kubemill already "
                "runs; give the plugin's kind another name"
            )
        try:
            register(found)
        except ValueError as exc:
            raise PluginError(f"{ENGINES_ENV}: {entry}: {exc}") from None
        added.append(found)
    return added


def _resolve(entry: str) -> list[Entry]:
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
    if isinstance(value, Engine | Controller):
        return [value]
    if (
        isinstance(value, Sequence)
        and value
        and all(isinstance(v, Engine | Controller) for v in value)
    ):
        return list(value)
    raise PluginError(
        f"{ENGINES_ENV}: {entry} is not an Engine or a list of Engines (nor a Controller, "
        f"or a list with some) (found {type(value).__name__})"
    )


__all__ = ["ENGINES_ENV", "PluginError", "load_plugins"]
