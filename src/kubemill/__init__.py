"""kubemill: run distributed training and big-data engines on Kubernetes or on one machine.

The package is layered (see DESIGN.md): ``api`` (job kinds) -> ``frameworks`` (Plans)
-> ``core`` (pure reconciler) -> ``substrates`` (kubernetes, local) -> ``sdk`` -> ``cli``.
Importing ``kubemill`` itself stays cheap: engines and cluster clients load lazily.
``kubemill.report`` is a job program's progress report (:mod:`kubemill.progress`, standard
library only).
"""

from kubemill.progress import report
from kubemill.version import __version__

__all__ = ["__version__", "report"]
