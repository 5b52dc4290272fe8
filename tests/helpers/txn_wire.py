"""Transaction requests on the raw wire (``KafkaWire``), for tests that need what no
client sends: a transactional batch outside its transaction, a chosen version, a chosen
broker. Everything is about topic ``TOPIC``."""

from __future__ import annotations

from typing import Any

from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode as E
from sparklog.protocol.messages import transactions as tx
from tests.helpers.batches import make_batch
from tests.helpers.requests import produce_request

__all__ = ["TOPIC", "add_partitions", "end", "init", "produce_txn"]

TOPIC = "wire-txn"


def init(w: Any, txn_id: str, version: int = 4, timeout_ms: int = 60000) -> tuple[int, int]:
    r = w.call(ApiKey.INIT_PRODUCER_ID, version, tx.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=timeout_ms))
    assert r.error_code == E.NONE, E(r.error_code)
    return r.producer_id, r.producer_epoch


def add_partitions(w: Any, version: int, txn_id: str, pid: int, epoch: int,
                   partitions: list[int]) -> list[int]:
    req = tx.AddPartitionsToTxnRequest
    r = w.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, req(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            req.AddPartitionsToTxnTopic(name=TOPIC, partitions=partitions)]))
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition]


def produce_txn(w: Any, txn_id: str | None, pid: int, epoch: int, partition: int, seq: int,
                n: int = 3) -> Any:
    batch = make_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=True, ts=None)
    r = w.call(ApiKey.PRODUCE, 8, produce_request(TOPIC, partition, batch,
                                                  transactional_id=txn_id))
    return r.responses[0].partition_responses[0]


def end(w: Any, version: int, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    return w.call(ApiKey.END_TXN, version, tx.EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
        committed=commit)).error_code
