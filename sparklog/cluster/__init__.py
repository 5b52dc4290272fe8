"""Running a sparklog cluster: a node by its ``process.roles`` (``nodes``), the single node
(``single_node``, also embedded on a thread: ``EmbeddedCluster``), a controller and N
brokers in one process (``in_process``: ``InProcessCluster``), a local multi-process
cluster (``local``), and a cluster hosted by a Spark application (``spark_hosted``, which
runs ``spark-submit`` with the jvm-shim plugin of ``spark_plugin`` and the driver
application ``spark_app``, whose ``bootstrap_proxy`` gives clients one stable address)."""

from sparklog.cluster.embedded import EmbeddedCluster
from sparklog.cluster.in_process import InProcessCluster

__all__ = ["EmbeddedCluster", "InProcessCluster"]
