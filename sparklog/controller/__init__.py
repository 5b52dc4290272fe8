"""Cluster metadata: topics, partitions, leaders, epochs and configs, kept as a durable
record log. Single node now; the shape a multi-broker controller extends."""

from sparklog.controller.controller import Controller, validate_topic_name
from sparklog.controller.metadata import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo

__all__ = ["Controller", "validate_topic_name", "BrokerInfo", "MetadataImage", "PartitionInfo",
           "TopicInfo"]
