"""Programs that run inside a job's containers, not in kubemill's own processes.

Each module here is delivered as a file (in the job's ConfigMap on Kubernetes, in the job's
file set locally) and run by the job's own Python, where kubemill is not installed. So a
module here imports only the standard library and the official ``kubernetes`` client, never
kubemill; and kubemill never imports them either: the substrates read their source text as a
resource (``importlib.resources.files("kubemill.agents")``). import-linter checks both
directions (``[tool.importlinter]`` in pyproject.toml).

- :mod:`kubemill.agents.mpi_exec` -- ``kubexec``, the remote-shell agent ``mpirun`` uses
  (``plm_rsh_agent``) to start ``orted`` in a worker pod.
"""
