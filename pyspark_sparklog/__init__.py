"""Auto-registration of the "sparklog" data source.

On the first data source lookup, pyspark (``pyspark.sql.worker.lookup_data_sources``) imports
every top-level module named ``pyspark_*`` and registers its ``DefaultSource`` under
``DefaultSource.name()``; so installing sparklog is enough for
``spark.readStream.format("sparklog")`` to work, with no ``spark.dataSource.register`` call.
"""

from sparklog.spark.source import SparklogDataSource as DefaultSource

__all__ = ["DefaultSource"]
