"""Spark's API: ``application`` (SparkApplication and its status), ``spec`` (its spec),
``pods`` (driver and executor pod fields), ``validation``, ``scheduled``
(ScheduledSparkApplication), ``argv`` and ``submit`` (``spark-submit``'s command line as a
SparkApplication), ``names`` (plain names the fast path reads without pydantic). Importing
this package loads none of them."""
