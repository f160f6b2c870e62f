"""Time zones by name: shared with the local substrate, in :mod:`kubemill.substrates.zones`."""

from kubemill.substrates.zones import local_zone, resolve_zone

__all__ = ["local_zone", "resolve_zone"]
