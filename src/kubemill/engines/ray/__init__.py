"""The Ray engine, one folder: ``api`` (KubeRay's RayCluster and RayJob, ``ray.io/v1``),
``framework`` (their planners: the head pod running ``ray start --head``, the head Service,
the worker groups' pods joining it; a RayJob's submitter and its Ray job as a remote run),
``local`` (their replicas on one machine: every Ray node on its own loopback ports and temp
dir) and ``entry`` (their registry records). Importing the package loads none of them."""
