"""The Python SDK: ``JobClient(substrate=...)`` with the same methods on every substrate."""
