"""The source's row layout, in Spark and in Arrow terms.

The columns and their order are Spark's Kafka connector's, so queries written for
``format("kafka")`` keep working. ``read()`` yields Arrow batches that must equal the Arrow
form of this schema exactly (pyspark checks it), so the client's batches are cast once per
batch (timestamps ms -> us with UTC, list field names), never converted per row.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["source_schema", "arrow_schema"]

HEADER_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADER_TYPE))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema pyspark expects from ``read()`` for ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")
