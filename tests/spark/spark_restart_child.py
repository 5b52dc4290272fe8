"""Child process of the SIGKILL restart test: runs the streaming query until it is killed.

Usage (from the repository root): python -m tests.spark.spark_restart_child BOOTSTRAP TOPIC
OUTPUT_DIR CHECKPOINT_DIR
"""

import sys

from tests.helpers.spark import make_spark_session, report_until_killed

bootstrap, topic, out_dir, ckpt = sys.argv[1:5]
spark = make_spark_session("sparklog-kill-child")
spark.sparkContext.setLogLevel("ERROR")
df = (
    spark.readStream.format("sparklog")
    .option("bootstrap.servers", bootstrap)
    .option("subscribe", topic)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", "10")
    .load()
    .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
)
q = (
    df.writeStream.format("parquet")
    .option("path", out_dir)
    .option("checkpointLocation", ckpt)
    .trigger(processingTime="0 seconds")
    .start()
)
report_until_killed(q)
