"""The Spark engine, one folder: ``api`` (SparkApplication and ScheduledSparkApplication, and
what ``spark-submit`` takes), ``framework`` (the planner, the driver pod as Spark's cluster
mode builds it, and the wire names both share), ``local`` (pyspark's ``spark-submit`` on one
machine), ``schedule`` (the ScheduledSparkApplication controller's decisions) and ``entry``
(the registry records). Importing the package, or ``api``/``framework``, loads none of
their modules: ``kubemill spark-submit``'s fast path imports single modules."""
