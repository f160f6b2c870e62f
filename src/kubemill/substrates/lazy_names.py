"""A package's names loaded on first use: the module ``__getattr__`` that imports a name
from the module holding it the first time it is asked for, and keeps it.

Used by the packages whose public names would otherwise import modules a hot command never
needs (``kubemill.sdk``, ``kubemill.substrates.local`` and its supervisor). The pure layers
(``api``, ``core``, ``frameworks``, ``engines``) may not import ``importlib`` and keep their
own.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def names_loaded_on_use(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name of ``where`` from the module it maps
    to, imported then and kept in the package; any other name is not there (asking for it
    loads nothing)."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
