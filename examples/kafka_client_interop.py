"""Interop: a stock Kafka client (confluent-kafka / librdkafka) produces, Spark consumes.

Nothing here is sparklog-specific on the producing side: the producer is librdkafka with
its defaults (idempotence on, lz4 compression, keys, headers), talking to a sparklog broker
exactly as it would to Apache Kafka. Spark then reads the topic with
``format("sparklog")`` — once as a bounded batch read and once as a stream
(Trigger.AvailableNow) — and checks that every record came through intact.

    python examples/kafka_client_interop.py [--bootstrap-servers host:port]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

TOPIC = "interop-orders"
N = 10_000


def main(argv: list[str] | None = None) -> int:
    from _common import broker, local_spark
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    ap = argparse.ArgumentParser(description="confluent-kafka produces, Spark consumes")
    ap.add_argument("--bootstrap-servers", help="use this cluster instead of an embedded one")
    args = ap.parse_args(argv)
    with broker(args.bootstrap_servers, "sparklog-interop-") as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        if TOPIC not in admin.list_topics(timeout=10).topics:
            admin.create_topics([NewTopic(TOPIC, num_partitions=4)])[TOPIC].result(30)
        producer = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5}
        )
        for i in range(N):
            producer.produce(
                TOPIC,
                key=f"customer-{i % 97}",
                value=f'{{"order": {i}, "amount": {i % 250}}}',
                headers=[("source", b"confluent-kafka")],
            )
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0, "librdkafka could not deliver every record"
        print(f"confluent-kafka produced {N} records to '{TOPIC}' on {bootstrap}")
        del producer, admin  # librdkafka handles close here, not when the broker is gone

        spark = local_spark("sparklog-interop")
        batch = (
            spark.read.format("sparklog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("includeHeaders", "true")
            .load()
        )
        batch.selectExpr(
            "CAST(key AS STRING) key",
            "CAST(value AS STRING) value",
            "partition",
            "offset",
            "headers[0].key AS header",
        ).show(5, truncate=False)
        stats = batch.selectExpr(
            "count(*) n", "count(distinct get_json_object(CAST(value AS STRING), '$.order')) d"
        ).first()
        print(f"batch read : {stats.n} records, {stats.d} distinct orders")

        stream = (
            spark.readStream.format("sparklog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "4000")
            .load()
        )
        q = (
            stream.selectExpr("CAST(key AS STRING) key")
            .groupBy("key")
            .count()
            .writeStream.format("memory")
            .queryName("per_customer")
            .outputMode("complete")
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        per_customer = spark.sql("SELECT sum(count) total, count(*) customers FROM per_customer")
        row = per_customer.first()
        batches = len([p for p in q.recentProgress if p["numInputRows"]])
        print(
            f"stream read: {row.total} records from {row.customers} customers in {batches} "
            "micro-batches"
        )
        spark.stop()
        ok = stats.n == stats.d == N and row.total == N and row.customers == 97
        print("interop OK" if ok else "interop MISMATCH")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
