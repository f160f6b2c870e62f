"""kubemill: run distributed training and big-data engines on Kubernetes or on one machine.

The package is layered (see DESIGN.md): ``api`` (job kinds) -> ``frameworks`` (Plans)
-> ``core`` (pure reconciler) -> ``substrates`` (kubernetes, local) -> ``sdk`` -> ``cli``.
Importing ``kubemill`` itself stays cheap: engines and cluster clients load lazily.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
