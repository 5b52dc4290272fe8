"""InitProducerId for idempotent producers (transactions come later).

Ids come from durable blocks reserved in the controller's metadata log, so a restarted
broker never hands out an id whose sequence state might still exist. A transactional id is
refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: every client treats it as fatal with a
clear message, whereas "coordinator not available" style errors would make it retry
forever for a feature this broker does not have yet.
"""

from __future__ import annotations

import logging
from typing import Any

from sparklog.broker.dispatch import ApiKey, RequestContext, api_spec, register
from sparklog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_MAX_EPOCH = 32767


class ProducerIdManager:
    """Hands out producer ids from blocks reserved in the metadata log."""

    def __init__(self, controller: Any, block: int = 1000) -> None:
        self._controller = controller
        self._block = block
        self._next = 0
        self._end = 0

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next, count = self._controller.allocate_producer_ids(self._block)
            self._end = self._next + count
        pid = self._next
        self._next += 1
        return pid


def _manager(ctx: RequestContext) -> ProducerIdManager:
    broker = ctx.broker
    mgr = getattr(broker, "producer_ids", None)
    if mgr is None:
        mgr = broker.producer_ids = ProducerIdManager(broker.controller)
    return mgr


@register(ApiKey.INIT_PRODUCER_ID, 0, 4)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    resp_cls = api_spec(ApiKey.INIT_PRODUCER_ID).response
    if request.transactional_id is not None:
        ctx.log_once("txn-init", logging.WARNING,
                     "client %s asked for transactional id %r: transactions are not served yet",
                     ctx.client_id, request.transactional_id)
        return resp_cls(throttle_time_ms=0,
                        error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                        producer_id=-1, producer_epoch=-1)
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        # KIP-360: an idempotent producer that lost track of its sequences bumps its epoch
        return resp_cls(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch + 1)
    return resp_cls(throttle_time_ms=0, error_code=0, producer_id=_manager(ctx).next_id(),
                    producer_epoch=0)
