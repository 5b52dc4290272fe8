"""sparklog: Spark-native streaming storage speaking the Kafka wire protocol."""

__version__ = "0.1.0"
