"""What one compaction pass may remove of transactions (Kafka's ``CleanedTransactionMetadata``,
KIP-98 with KIP-534's batch delete horizon).

The cleaner walks the batches of its range in offset order and asks, per batch:

* a data batch of an aborted transaction (one the log's ``.txnindex`` names, whose marker
  may lie past the range): its records count for nothing and are dropped;
* a transaction marker (control batch): whether it is *discardable*, i.e. no batch of the
  transaction it closes is left before it. An ABORT marker is discardable once a pass met
  none of its transaction's batches (an earlier pass removed them); a COMMIT marker once a
  pass met no batch of the committed transaction (compaction removed every record of it).
  A marker that is not discardable is kept as it is, and so is the ``.txnindex`` entry of
  a kept ABORT marker. A discardable marker's entry is dropped (no aborted data is left
  for a reader to skip); the marker itself gets a delete horizon of now +
  ``delete.retention.ms`` in its batch header the first time (so consumers that already
  read past its transaction's data still see it) and is removed by the first pass after
  that horizon.

Invariants: a marker is removed only after every batch of its transaction, so replaying
the log (producer state, ``.txnindex``) never finds a transaction without its end; entries
are appended to the output index in marker order. One instance serves one pass over the
whole range (transactions may span the groups the cleaner rewrites one by one).
"""

from __future__ import annotations

from collections import deque

from sparklog.protocol.batch_header import BatchView
from sparklog.protocol.control_records import ControlRecordType

from .txn_index import AbortedTxn

__all__ = ["CleanedTxns"]


class _Aborted:
    __slots__ = ("txn", "seen_batch")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.seen_batch = False


class CleanedTxns:
    """The transactional state of one compaction pass, fed every batch in offset order.

    ``aborted``: the aborted transactions overlapping the range, sorted by first offset."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._upcoming = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._ongoing_aborted: dict[int, _Aborted] = {}  # producer id -> its aborted txn
        self._ongoing_committed: set[int] = set()  # producers with a committed txn open

    def _consume_up_to(self, offset: int) -> None:
        up = self._upcoming
        while up and up[0].first_offset <= offset:
            t = up.popleft()
            self._ongoing_aborted[t.producer_id] = _Aborted(t)

    def on_data_batch(self, view: BatchView) -> bool:
        """Whether the data batch ``view`` belongs to an aborted transaction."""
        self._consume_up_to(view.last_offset)
        if not view.is_transactional:
            return False
        pid = view.producer_id
        aborted = self._ongoing_aborted.get(pid)
        if aborted is not None:
            aborted.seen_batch = True
            return True
        self._ongoing_committed.add(pid)
        return False

    def on_marker(self, view: BatchView, control_type: int) -> tuple[bool, AbortedTxn | None]:
        """For the control batch ``view`` (its record type ``control_type``, -1 for an
        empty one): whether it is discardable, and the ``.txnindex`` entry to keep for it."""
        self._consume_up_to(view.last_offset)
        pid = view.producer_id
        if control_type == ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(pid, None)
            if aborted is not None and aborted.seen_batch:
                return False, aborted.txn
            return True, None
        if control_type == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False, None
            return True, None
        return control_type < 0, None  # other control types stay; an emptied one may go
