"""Substrates realise Plans: ``kubernetes`` (a real cluster) and ``local`` (processes here).

Both implement :class:`kubemill.substrates.base.Backend`, which the SDK wraps.
"""
