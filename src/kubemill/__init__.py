"""kubemill: run distributed training and big-data engines on Kubernetes or on one machine.

The package is layered (see docs/architecture.md), bottom up: ``api`` (what
job kinds share) -> ``frameworks`` (the Plan) -> ``core`` (pure reconciler) -> ``engines``
(one folder per engine: its kind's API, planner, local support, registry record and in-pod
programs) -> ``kinds`` (the registry) -> ``substrates`` (kubernetes, local) -> ``sdk`` ->
``deploy`` (engine clusters a program starts) -> ``dashboard`` -> ``cli``.
Importing ``kubemill`` itself stays cheap: engines and cluster clients load lazily.
"The seed", where code says it, means the two documents kubemill was built from (a survey of
big-data and machine-learning engines on Kubernetes, and Mars's guide to deploying on
Kubernetes); "the seed's form" is a manifest or call as they show it: ``examples/seed/``.
``kubemill.report`` is a job program's progress report (:mod:`kubemill.progress`, standard
library only).
"""

from kubemill.progress import report
from kubemill.version import __version__

__all__ = ["__version__", "report"]
