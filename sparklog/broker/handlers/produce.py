"""Produce: append client batches as leader, never re-encoding them.

Advertised from v0 (old librdkafka only compresses when the range contains Produce 0) but
served from v3, the first version that carries RecordBatch v2; v0-v2 get UNSUPPORTED_VERSION
per partition, as Kafka 4 does. acks=0 gets no response at all; if such a request fails,
the connection is closed, which is the only way Kafka can tell an acks=0 producer.

acks=all parks on the connection (``delayed.py``) until the high watermark of every
partition it wrote passed its last offset, i.e. every ISR member has the batch; partitions
still short when ``timeout_ms`` runs out, or when the client half-closed, get
REQUEST_TIMED_OUT (the records stay appended, as in Kafka). One whose ISR shrank below
``min.insync.replicas`` meanwhile gets NOT_ENOUGH_REPLICAS_AFTER_APPEND, and one whose
leadership or leader epoch changed while it waited NOT_LEADER_OR_FOLLOWER (a new leader may
truncate the batch away: it is never acknowledged). A closed connection cancels the wait.
"""

from __future__ import annotations

import logging

from sparklog.broker.acks import AcksAllWait, wait_replicated
from sparklog.broker.dispatch import RequestContext, register
from sparklog.broker.replica_manager import Records
from sparklog.broker.server import CloseConnection
from sparklog.broker.txn.verification import TxnVerifier
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.batch_header import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    batch_size,
)
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.messages.produce import ProduceRequest, ProduceResponse

log = logging.getLogger(__name__)

MIN_SERVED_VERSION = 3
_ATTRIBUTES = ATTRIBUTES_OFFSET + 1  # the attributes' low byte (int16, big endian)


async def _transactional_error(verifier: TxnVerifier, transactional_id: str | None,
                               tp: tuple[str, int], records: Records) -> ErrorCode:
    """A transactional batch needs the request's transactional id (Kafka refuses it with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise: no transaction could ever close it)
    and, KIP-890, its partition in the producer's ongoing transaction (asked of the id's
    coordinator, wherever it is)."""
    if transactional_id is None:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return await verifier.verify(transactional_id, tp, records)


@register(ApiKey.PRODUCE, 0, 10)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    rm = broker.replica_manager
    acks = request.acks
    TopicResp = ProduceResponse.TopicProduceResponse
    PartResp = ProduceResponse.PartitionProduceResponse

    whole_error: int | None = None
    if ctx.api_version < MIN_SERVED_VERSION:
        whole_error = int(ErrorCode.UNSUPPORTED_VERSION)
    elif acks not in (-1, 0, 1):
        whole_error = int(ErrorCode.INVALID_REQUIRED_ACKS)

    responses = []
    waits: list[AcksAllWait] = []
    failed = False
    for t in request.topic_data:
        parts = []
        for pd in t.partition_data:
            if whole_error is not None:
                parts.append(PartResp(index=pd.index, error_code=whole_error, base_offset=-1))
                failed = True
                continue
            if pd.records is None:
                parts.append(PartResp(index=pd.index, error_code=int(ErrorCode.CORRUPT_MESSAGE),
                                      base_offset=-1, error_message="null record set"))
                failed = True
                continue
            records = pd.records
            if len(records) >= LOG_OVERHEAD and batch_size(records) < len(records):
                # Kafka: "Produce requests with version 3 are only allowed to contain exactly
                # one record batch" (every client sends one per partition)
                parts.append(PartResp(index=pd.index, error_code=int(ErrorCode.INVALID_RECORD),
                                      base_offset=-1,
                                      error_message="more than one record batch in a partition"))
                failed = True
                continue
            if len(records) > _ATTRIBUTES and records[_ATTRIBUTES] & TRANSACTIONAL_MASK:
                code = await _transactional_error(broker.txn_verifier, request.transactional_id,
                                                  (t.name, pd.index), records)
                if code != ErrorCode.NONE:
                    parts.append(PartResp(index=pd.index, error_code=int(code), base_offset=-1,
                                          error_message=f"transactional batch refused for "
                                          f"{t.name}-{pd.index}: {code.name}"))
                    failed = True
                    continue
            res = rm.append(t.name, pd.index, records, acks=acks)
            if res.error is not None:
                err: KafkaError = res.error
                ctx.log_once(f"produce-{err.error_code.name}", logging.INFO,
                             "produce to %s-%d from %s rejected: %s (%s)", t.name, pd.index,
                             ctx.client_host, err.error_code.name, err)
                parts.append(PartResp(index=pd.index, error_code=int(err.error_code),
                                      base_offset=-1, error_message=str(err) or None))
                failed = True
                continue
            if acks == -1:
                p = rm.get(t.name, pd.index)
                if p is not None:
                    waits.append(AcksAllWait(p, res.last_offset, res.leader_epoch))
            parts.append(PartResp(index=pd.index, error_code=0, base_offset=res.base_offset,
                                  log_append_time_ms=res.log_append_time,
                                  log_start_offset=res.log_start_offset))
        responses.append(TopicResp(name=t.name, partition_responses=parts))

    if acks == 0:
        if failed:
            raise CloseConnection()
        return None
    if waits:
        errors = await wait_replicated(ctx.park, waits, max(0, request.timeout_ms))
        for tr in responses:
            for pr in tr.partition_responses:
                code = errors.get((tr.name, pr.index))
                if code is not None and pr.error_code == 0:
                    pr.error_code = int(code)
    return ProduceResponse(responses=responses, throttle_time_ms=0)
