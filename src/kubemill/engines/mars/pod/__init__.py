"""Mars's in-pod programs: ``python -m kubemill.engines.mars.pod.entrypoint
supervisor|worker`` in every pod of a MarsCluster (:mod:`~kubemill.engines.mars.pod.entrypoint`
says what it does), in layers: ``entrypoint`` (the command), ``service`` (Mars's runner),
``discovery`` (finding the supervisors), ``settings`` (the pod's environment). They run in
the pod (or, locally, in a replica's process in the Mars environment), where kubemill is
installed with Mars; nothing else in kubemill imports them."""
