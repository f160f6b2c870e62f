"""KubeRay's API (``ray.io/v1``) as kubemill serves it: ``raycluster`` (the RayCluster's
spec, status and ``KindApi``) and ``rayjob`` (the RayJob's: a Ray job on a cluster of its
own). Importing this package loads none of them."""
