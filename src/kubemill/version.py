"""kubemill's version, in a module of its own so that the pure layers can name it
without importing the package's top level (which carries ``kubemill.report``)."""

__version__ = "0.1.0"
