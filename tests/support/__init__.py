"""What tests share across folders: the test API server, its schema checks, the real
operator's harness, the engine gates and the one ``eventually``.

Found through pytest's ``pythonpath`` (pyproject.toml puts ``tests/`` on it), so a test
imports ``from support.kmock_cluster import ...`` wherever it lives; a helper used by one
folder's tests only stays in that folder.

- :mod:`support.kmock_cluster`: kmock's API server, made strict where a real one is;
- :mod:`support.kube_schema`: the validation and pruning it applies on every write;
- :mod:`support.operator_support`: the real operator in a subprocess, a test kubelet;
- :mod:`support.operator_jobs`: the job manifests the operator tests create;
- :mod:`support.kube_client_support`: the cluster of the Kubernetes client tests (logs,
  strict CRDs, canned errors) and the test that plays the operator;
- :mod:`support.manifest_checks`: kubernetes-validate and CRD schemas, strict;
- :mod:`support.e2e_support`: the real ``kubemill`` CLI with a private state directory,
  and the processes a test's jobs left.
- :mod:`support.engines`: whether a real engine (OpenMPI, Spark's JVM, Mars) can run here:
  the marks that skip a test, saying what to install, where one is missing;
- :mod:`support.waiting`: :func:`~support.waiting.eventually`, how every test waits for
  another thread or process.
"""
