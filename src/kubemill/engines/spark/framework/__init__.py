"""Spark's planner: ``planner`` (a SparkApplication's Plan), ``driver`` (its driver pod),
``cluster_mode`` (the driver pod of ``spark-submit --master k8s://``), ``wire`` (the
confs, ports and env both build with, without pydantic). Importing this package loads none
of them."""
