"""The errors every substrate raises, and the SDK with them: the message says what to do.

A module of their own, imported without the records of :mod:`kubemill.substrates.base`,
for the paths that must start fast (``kubemill get``'s store, spark-submit's fast path).
"""

from __future__ import annotations


class SubstrateError(RuntimeError):
    """A substrate could not do what was asked; the message says what to do."""


class JobNotFound(SubstrateError, LookupError):
    """No job of that name."""


class JobExists(SubstrateError):
    """A job of that name already exists (and has not been deleted)."""


__all__ = ["JobExists", "JobNotFound", "SubstrateError"]
