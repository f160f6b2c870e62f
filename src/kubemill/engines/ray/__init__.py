"""The Ray engine, one folder: ``api`` (KubeRay's RayCluster, ``ray.io/v1``), ``framework``
(its planner: the head pod running ``ray start --head``, the head Service, the worker
groups' pods joining it), ``local`` (its replicas on one machine: every Ray node on its own
loopback ports and temp dir) and ``entry`` (its registry record). Importing the package
loads none of them."""
