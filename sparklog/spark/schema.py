"""The source's row layout, in Spark and in Arrow terms.

The columns and their order are Spark's Kafka connector's, so queries written for
``format("kafka")`` keep working. They are defined once, as the Arrow schema the client's
fetcher produces (``sparklog.client.arrow_fetch.RECORD_SCHEMA``); the Spark schema is
derived from it, so ``read()`` can yield the fetched batches as they are: pyspark checks
that they equal the Arrow form of the schema exactly.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

__all__ = ["source_schema", "arrow_schema"]


def source_schema(include_headers: bool) -> StructType:
    # imported here: registering the data source must not pull in the client
    from sparklog.client.arrow_fetch import record_schema

    return from_arrow_schema(record_schema(include_headers))


def arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema pyspark expects from ``read()`` for ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")
