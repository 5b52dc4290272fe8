"""One node: the controller and the broker in one process, put together in one place.

Every single-node broker (``sparklog server``, ``EmbeddedCluster``, tests, benchmarks) is
built here: the ``Controller`` keeps its metadata log in ``<first log dir>/__sparklog_metadata``
(``Controller.for_config``) and is handed to the broker as its ``ControllerChannel`` in its
in-process form. The broker layer never imports the controller; this layer, above
both, is where the two meet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sparklog.broker.broker import Broker
from sparklog.broker.config import BrokerConfig
from sparklog.controller import Controller

__all__ = ["SingleNode", "build_single_node"]


@dataclass(frozen=True)
class SingleNode:
    """The broker and its embedded controller (tests move leadership on the controller)."""

    broker: Broker
    controller: Controller


def build_single_node(config: BrokerConfig | Mapping[str, str]) -> SingleNode:
    """A broker and its controller, not started (``await node.broker.start()`` opens both)."""
    if not isinstance(config, BrokerConfig):
        config = BrokerConfig(config)
    controller = Controller.for_config(config, embedded=True)
    return SingleNode(Broker(config, controller), controller)
