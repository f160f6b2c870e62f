"""Engine clusters a program starts for itself, as Mars's ``new_cluster`` does.

Unlike a job, a cluster is a service the caller then uses (a Mars supervisor, its workers)
and stops when done. ``kubemill.deploy.kubernetes.new_cluster`` creates one on a
Kubernetes cluster with no operator, ``kubemill.deploy.local.new_cluster`` on this
machine; both return a :class:`~kubemill.deploy.client.ClusterClient`.

This package is a layer of its own, above the SDK: it may use the SDK, the substrates'
pure builders and the registry; only the CLI imports it.
"""
