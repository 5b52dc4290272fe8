"""Word count, the Kafka Streams demo (WordCountDemo) done with Spark on sparklog.

Kafka Streams' classic demo reads lines from ``streams-plaintext-input``, splits them into
lower-cased words, keeps a running count per word, and writes the counts to
``streams-wordcount-output`` with the word as key and the count as an 8-byte big-endian long
(Kafka's LongSerializer). The same job as a Structured Streaming query is a few lines; the
output topic has exactly the demo's format, so Kafka's own console consumer with
``--value-deserializer LongDeserializer`` reads it.

    python examples/wordcount.py                      # embedded broker, sample lines
    python examples/wordcount.py --bootstrap-servers 127.0.0.1:9092   # an existing cluster
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

INPUT = "streams-plaintext-input"
OUTPUT = "streams-wordcount-output"
LINES = [
    "all streams lead to kafka",
    "hello kafka streams",
    "join kafka summit",
    "Spark reads the log, Spark writes the log",
]


def main(argv: list[str] | None = None) -> int:
    from _common import broker, local_spark
    from pyspark.sql import functions as F

    from sparklog.client import AdminClient, NewTopic, Producer

    ap = argparse.ArgumentParser(description="Kafka Streams' word count with Spark")
    ap.add_argument("--bootstrap-servers", help="use this cluster instead of an embedded one")
    args = ap.parse_args(argv)

    with (
        broker(args.bootstrap_servers, "sparklog-wordcount-") as bootstrap,
        tempfile.TemporaryDirectory(prefix="sparklog-wc-ckpt-") as checkpoint,
    ):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        have = admin.list_topics()
        admin.create_topics(
            [NewTopic(t, num_partitions=1) for t in (INPUT, OUTPUT) if t not in have]
        )
        producer = Producer({"bootstrap.servers": bootstrap})
        for line in LINES:
            producer.produce(INPUT, value=line.encode())
        assert producer.flush(30) == 0
        producer.close()

        spark = local_spark("sparklog-wordcount")
        lines = (
            spark.readStream.format("sparklog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", INPUT)
            .option("startingOffsets", "earliest")
            .load()
        )
        words = lines.select(
            F.explode(F.split(F.lower(F.col("value").cast("string")), r"\W+")).alias("word")
        ).where("word != ''")
        counts = words.groupBy("word").count()
        query = (
            counts.select(
                F.col("word").alias("key"),
                # 8-byte big-endian int64, as Kafka's LongSerializer writes it
                F.unhex(F.lpad(F.hex("count"), 16, "0")).alias("value"),
            )
            .writeStream.format("sparklog")
            .option("bootstrap.servers", bootstrap)
            .option("topic", OUTPUT)
            .option("checkpointLocation", checkpoint)
            .outputMode("complete")  # Python sinks have no Update mode in Spark 4.2
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

        out = (
            spark.read.format("sparklog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", OUTPUT)
            .load()
            .orderBy("offset")
            .collect()
        )
        final: dict[str, int] = {}
        for row in out:
            final[bytes(row.key).decode()] = struct.unpack(">q", bytes(row.value))[0]
        for word, count in sorted(final.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{word:<10} {count}")
        spark.stop()
        assert final["kafka"] == 3 and final["log"] == 2 and final["spark"] == 2, final
        return 0


if __name__ == "__main__":
    sys.exit(main())
