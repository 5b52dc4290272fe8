"""Cluster metadata: topics, partitions, leaders, epochs, configs and broker registrations,
kept as a durable record log; broker liveness, leader elections and reassignment. In the
single node's process (``Controller``) or as a process of its own (``server``)."""

from sparklog.controller.controller import Controller

__all__ = ["Controller"]
