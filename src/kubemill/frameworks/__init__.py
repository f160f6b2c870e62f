"""Frameworks: one module per engine, each turning a job into a :class:`Plan`."""
