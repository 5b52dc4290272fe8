"""Child process of the exactly-once sink test: topic -> topic through the sparklog source
and sink until the parent SIGKILLs it.

One task fails on its first attempt, once over all runs (``MARKER`` records that it did):
Spark retries it (``local[2,2]``), and the failed attempt's transaction is an orphan.

Usage (from the repository root): python -m tests.spark.spark_sink_eos_child BOOTSTRAP
IN_TOPIC OUT_TOPIC CHECKPOINT_DIR MARKER
"""

import sys

from tests.helpers.spark import eos_copy_query, make_spark_session, report_until_killed

bootstrap, in_topic, out_topic, ckpt, marker = sys.argv[1:6]
spark = make_spark_session("sparklog-eos-child", master="local[2,2]")
spark.sparkContext.setLogLevel("ERROR")
q = eos_copy_query(spark, bootstrap, in_topic, out_topic, ckpt, marker)
report_until_killed(q)
