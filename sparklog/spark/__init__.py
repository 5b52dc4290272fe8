"""Spark integration: the "sparklog" Python data source (batch + streaming, read + write)."""

from sparklog.spark.source import SparklogDataSource

__all__ = ["SparklogDataSource"]
