"""Running a sparklog cluster: a node by its ``process.roles`` (``nodes``), the single node
(``single_node``, also embedded on a thread: ``EmbeddedCluster``), a controller and N
brokers in one process (``in_process``: ``InProcessCluster``), a local multi-process
cluster (``local``); on Spark later."""

from sparklog.cluster.embedded import EmbeddedCluster
from sparklog.cluster.in_process import InProcessCluster

__all__ = ["EmbeddedCluster", "InProcessCluster"]
