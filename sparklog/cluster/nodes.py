"""One node of a cluster by its ``process.roles``: where the broker, the controller and the
channel between them are put together for ``sparklog server``.

- ``broker,controller`` (the default): the single node, controller in-process
  (``single_node``);
- ``controller``: a ``ControllerServer`` (the controller APIs on the listener);
- ``broker``: a ``Broker`` whose channel is the RPC one to ``controller.quorum.voters``.
"""

from __future__ import annotations

from sparklog.broker.broker import Broker
from sparklog.broker.config import BrokerConfig
from sparklog.broker.controller_rpc import RpcControllerChannel
from sparklog.cluster.single_node import build_single_node
from sparklog.controller.server import ControllerServer

__all__ = ["build_node"]


def build_node(config: BrokerConfig) -> Broker | ControllerServer:
    """The node ``config`` describes, not started. Raises ``InvalidConfigError`` for bad
    roles or voters (more than one voter, a broker without one)."""
    config.check_roles()
    roles = config.roles
    if roles == {"controller"}:
        return ControllerServer(config)
    if roles == {"broker"}:
        return Broker(config, RpcControllerChannel(config))
    return build_single_node(config).broker
