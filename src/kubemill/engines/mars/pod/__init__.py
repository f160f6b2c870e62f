"""Mars's in-pod programs: ``python -m kubemill.engines.mars.pod.entrypoint
supervisor|worker`` in every pod of a MarsCluster (:mod:`~kubemill.engines.mars.pod.entrypoint`
says what it does), in layers: ``entrypoint`` (the command), ``service`` (Mars's runner),
``discovery`` (finding the supervisors), ``settings`` (the pod's environment). They run in
the pod, where kubemill is installed with Mars; the engine's other layers never import them
(the local ``new_cluster``, :mod:`kubemill.deploy.local`, asks supervisors with
:func:`~kubemill.engines.mars.pod.discovery.ready_nodes`)."""
