"""Estimate Pi with Spark (Monte Carlo), as Spark's own examples/src/main/python/pi.py.

Usage: pi.py [PARTITIONS]. Runs under any master: ``spark-submit --master local[2] pi.py 10``,
a SparkApplication (examples/spark-pi.yaml), or a standalone cluster.
"""

from __future__ import annotations

import random
import sys
from operator import add

from pyspark.sql import SparkSession

SAMPLES_PER_PARTITION = 100_000


def inside(_: int) -> int:
    """1 if a random point of the unit square falls in the quarter circle."""
    x, y = random.random(), random.random()
    return 1 if x * x + y * y <= 1 else 0


def main() -> None:
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    spark = SparkSession.builder.appName("PythonPi").getOrCreate()
    n = SAMPLES_PER_PARTITION * partitions
    count = spark.sparkContext.parallelize(range(n), partitions).map(inside).reduce(add)
    print(f"Pi is roughly {4.0 * count / n:f}")
    spark.stop()


if __name__ == "__main__":
    main()
