"""InitProducerId for idempotent producers (transactions come later).

Ids come from the broker's ``ProducerIdManager`` (durable blocks reserved in the metadata
log, see ``sparklog.broker.producer_ids``). A transactional id is
refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: every client treats it as fatal with a
clear message, whereas "coordinator not available" style errors would make it retry
forever for a feature this broker does not have yet.
"""

from __future__ import annotations

import logging

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.schema import TopLevel

log = logging.getLogger(__name__)

_MAX_EPOCH = 32767


@register(ApiKey.INIT_PRODUCER_ID, 0, 4)
async def handle_init_producer_id(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.INIT_PRODUCER_ID).response
    if request.transactional_id is not None:
        ctx.log_once("txn-init", logging.WARNING,
                     "client %s asked for transactional id %r: transactions are not served yet",
                     ctx.client_id, request.transactional_id)
        return resp_cls(throttle_time_ms=0,
                        error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                        producer_id=-1, producer_epoch=-1)
    pid, epoch = request.producer_id, request.producer_epoch
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        # KIP-360: an idempotent producer that lost track of its sequences bumps its epoch
        return resp_cls(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch + 1)
    return resp_cls(throttle_time_ms=0, error_code=0, producer_id=ctx.broker.producer_ids.next_id(),
                    producer_epoch=0)
