"""KubeRay's API (``ray.io/v1``) as kubemill serves it: ``raycluster`` (the RayCluster's
spec, status and ``KindApi``). Importing this package loads none of them."""
