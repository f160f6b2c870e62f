"""Count the words of a text file with Spark and write the counts as CSV.

Usage: wordcount.py INPUT OUTPUT. OUTPUT is a directory Spark writes (``part-*.csv``,
one ``word,count`` line per word, most frequent first); it is replaced if it exists.
"""

from __future__ import annotations

import re
import sys

from pyspark.sql import SparkSession

WORD = re.compile(r"[a-z']+")


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: wordcount.py INPUT OUTPUT")
    source, target = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.appName("WordCount").getOrCreate()
    lines = spark.sparkContext.textFile(source)
    counts = (
        lines.flatMap(lambda line: WORD.findall(line.lower()))
        .map(lambda word: (word, 1))
        .reduceByKey(lambda a, b: a + b)
    )
    frame = spark.createDataFrame(counts, ["word", "count"]).orderBy(
        "count", "word", ascending=[False, True]
    )
    frame.coalesce(1).write.mode("overwrite").csv(target)
    top = frame.limit(5).collect()
    print("top words: " + ", ".join(f"{row['word']}={row['count']}" for row in top))
    spark.stop()


if __name__ == "__main__":
    main()
