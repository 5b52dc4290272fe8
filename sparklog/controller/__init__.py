"""Cluster metadata: topics, partitions, leaders, epochs and configs, kept as a durable
record log. Single node now; the shape a multi-broker controller extends."""

from sparklog.controller.controller import Controller

__all__ = ["Controller"]
