"""The Ray engine's planners: ``raycluster`` (a RayCluster's Plan, as KubeRay builds it)
and ``rayjob`` (a RayJob's: its cluster, the submitter, the Ray job as a remote run).
Importing this package loads neither."""
