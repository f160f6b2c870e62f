"""Engine clusters a program starts for itself, as Mars's ``new_cluster`` does.

Unlike a job, a cluster is a service the caller then uses (a Mars supervisor, its workers)
and stops when done. ``kubemill.deploy.kubernetes.new_cluster`` creates one on a
Kubernetes cluster with no operator (the engine's own, from its folder, given the
substrate's reading of pods); ``kubemill.deploy.local.new_cluster`` runs one on this
machine as a job of the local substrate, through the SDK; both return a
:class:`~kubemill.deploy.client.ClusterClient`. ``serving`` is the one wait until a
service cluster serves, which ``kubemill cluster create`` uses too.

This package is a layer of its own, above the SDK: it may use the SDK, the substrates and
the engines' folders; only the CLI imports it.
"""
