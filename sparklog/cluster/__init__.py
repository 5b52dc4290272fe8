"""Running a sparklog cluster: a node by its ``process.roles`` (``nodes``), the single node
(``single_node``, also embedded on a thread: ``EmbeddedCluster``), a local multi-process
cluster (``local``); on Spark later."""

from sparklog.cluster.embedded import EmbeddedCluster

__all__ = ["EmbeddedCluster"]
