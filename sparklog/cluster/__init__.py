"""Running a sparklog cluster: embedded (one process) now, on Spark later."""

from sparklog.cluster.embedded import EmbeddedCluster

__all__ = ["EmbeddedCluster"]
