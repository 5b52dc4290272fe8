"""The ``__transaction_state`` store: one record per transition, written to and replayed
from the state partition a transactional id lives in (the group coordinator's
``RecordLog`` seam, so replication moves it the same way).

Replay is per partition (``load_partition``): the last record of each key wins, a
tombstone removes the id, so a coordinator can take over or give up one partition at a
time as its leadership moves.
"""

from __future__ import annotations

import logging

from sparklog.broker.group.store import KeyedStore
from sparklog.broker.txn.model import TxnMetadata
from sparklog.broker.txn.records import (
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.internal_topics import TRANSACTION_STATE

log = logging.getLogger(__name__)

__all__ = ["TxnStore"]


class TxnStore(KeyedStore):
    """Writes and replays transaction metadata, routed to the id's state partition."""

    partitions_key = "transaction.state.log.num.partitions"

    def write(self, m: TxnMetadata) -> None:
        """Persist ``m`` (raises when the log cannot take it)."""
        self.log.append(self.partition_for(m.transactional_id),
                        [(encode_txn_key(m.transactional_id), encode_txn_value(m.to_log()))],
                        m.last_update_ms)

    def remove(self, transactional_id: str, now_ms: int) -> None:
        self.log.append(self.partition_for(transactional_id),
                        [(encode_txn_key(transactional_id), None)], now_ms)

    def load_partition(self, partition: int) -> dict[str, TxnMetadata]:
        latest: dict[bytes, bytes | None] = {}
        for rec in self.log.scan(partition):
            if rec.key is not None:
                latest[rec.key] = rec.value
        out: dict[str, TxnMetadata] = {}
        for key, value in latest.items():
            if value is None:
                continue
            try:
                tid = decode_txn_key(key)
                out[tid] = TxnMetadata.from_log(tid, decode_txn_value(value))
            except (MalformedFrameError, ValueError) as e:
                log.warning("skipping unreadable %s-%d record: %s", TRANSACTION_STATE,
                            partition, e)
        return out
