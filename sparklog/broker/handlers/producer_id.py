"""InitProducerId: idempotent producers here, transactional ones by the transaction
coordinator (``sparklog.broker.txn``), v6's two-phase commit fields included (KIP-939).

Idempotent ids come from the broker's ``ProducerIdManager`` (durable blocks reserved in the
metadata log, see ``sparklog.broker.producer_ids``); a producer that lost track of its
sequences may bump its epoch (KIP-360).
"""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.broker.handlers.transactions import fenced_code
from sparklog.broker.txn.coordinator import InitResult
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.schema import TopLevel

_MAX_EPOCH = 32767


@register(ApiKey.INIT_PRODUCER_ID, 0, 6)
async def handle_init_producer_id(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.INIT_PRODUCER_ID).response
    pid, epoch = request.producer_id, request.producer_epoch
    if request.transactional_id is not None:
        tc = ctx.broker.txn_coordinator
        if tc is None:
            res = InitResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        else:
            v6 = ctx.api_version >= 6
            res = await tc.init_producer_id(
                request.transactional_id, request.transaction_timeout_ms, pid, epoch,
                enable_2pc=v6 and request.enable_2pc,
                keep_prepared=v6 and request.keep_prepared_txn)
        return resp_cls(throttle_time_ms=0,
                        error_code=int(fenced_code(res.error, ctx.api_version, 4)),
                        producer_id=res.producer_id, producer_epoch=res.producer_epoch,
                        ongoing_txn_producer_id=res.ongoing_producer_id,
                        ongoing_txn_producer_epoch=res.ongoing_producer_epoch)
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        # KIP-360: an idempotent producer that lost track of its sequences bumps its epoch
        return resp_cls(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch + 1)
    return resp_cls(throttle_time_ms=0, error_code=0, producer_id=ctx.broker.producer_ids.next_id(),
                    producer_epoch=0)
