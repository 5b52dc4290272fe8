"""The transaction coordinator: which transactional ids this broker serves, and the
requests it answers (Kafka's ``TransactionCoordinator``, KIP-98 with KIP-360/588/890).

A transactional id belongs to one ``__transaction_state`` partition
(``records.partition_for_txn``) and is served by the coordinator that loaded it: on a
cluster the partition's leader (``serve_partitions``, following its leadership: loaded on
becoming leader, unloaded on losing it), a single broker every partition. The coordinator
epoch of a partition is its leader epoch; it goes into the markers' ``coordinator_epoch``.
``load_partition(p)`` replays p's records; a transaction found PrepareCommit/PrepareAbort
(the decision was logged, its markers maybe not all written) resumes writing its markers
at once. Loading runs without yielding to the event loop, so no request ever sees a
partition half loaded (Kafka's COORDINATOR_LOAD_IN_PROGRESS never needs answering).

Every transition is written to the store, and waited on until the state partition's ISR
has it (``replicated``: Kafka's coordinator appends with acks=all), before the coordinator
keeps it and before it answers (``_persist``); a write that fails leaves the previous state
in force and is answered as Kafka does (NOT_COORDINATOR when leadership moved meanwhile,
COORDINATOR_NOT_AVAILABLE otherwise). EndTxn's decision (Prepare*) is durable before any
marker is written, so after a crash or a leader change the outcome is the logged one on
every partition. Markers go through a ``MarkerWriter`` (single node: local appends; a
cluster: each partition's leader, ``marker_channel``); EndTxn is answered after the first
round of markers (or ``END_TXN_WAIT_MS``, whichever comes first): once the transaction is
CompleteCommit/CompleteAbort when every marker was written, else with the decision logged
while the markers are retried every
``MARKER_RETRY_MS`` until every partition has one (the transaction stays prepared until
then; a coordinator that loses the partition stops, the next one resumes).

While a write for an id is waiting for its ISR, other requests for that id get
CONCURRENT_TRANSACTIONS (Kafka's pending state), as they do while it is prepared.

Two-phase commit (KIP-939): a producer that asks for ``enable_2pc`` (the broker allows it
with ``transaction.two.phase.commit.enable``) gets transactions that no timeout aborts
(stored with Kafka's Integer.MAX_VALUE timeout); a new instance asking
``keep_prepared_txn`` takes an open transaction over under a bumped epoch instead of
aborting it, learns the (producer id, epoch) it was written under, and ends it with EndTxn
commit or abort, whichever its own record of the prepared transaction says.

Fencing: InitProducerId bumps the epoch (a new producer id once the epoch is exhausted); a
request carrying an older epoch gets PRODUCER_FENCED (the handlers turn that into
INVALID_PRODUCER_EPOCH for versions before KIP-588). An InitProducerId meeting an
Ongoing transaction aborts it under the bumped epoch and answers CONCURRENT_TRANSACTIONS,
so the client retries and gets a clean epoch; a transaction open longer than its timeout
is aborted the same way by the timer. Everything runs on the broker's event loop: no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from sparklog.broker.group.model import Clock, TimerHandle
from sparklog.broker.group.store import load_each_partition
from sparklog.broker.txn.config import TxnConfig
from sparklog.broker.txn.markers import MarkerWriter
from sparklog.broker.txn.model import MAX_EPOCH, InitKind, TxnMetadata
from sparklog.broker.txn.records import TopicPartition, TxnState
from sparklog.broker.txn.store import TxnStore
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS, TRANSACTION_STATE

log = logging.getLogger(__name__)

__all__ = ["InitResult", "NO_TIMEOUT_MS", "TransactionCoordinator", "TxnListing"]

# a two-phase-commit transaction's timeout (KIP-939, as Kafka stores it): never aborted by time
NO_TIMEOUT_MS = 0x7FFFFFFF
# markers not written are sent again this often (Kafka's retry.backoff.ms)
MARKER_RETRY_MS = 100
# EndTxn waits this long at most for its first round of markers (Kafka answers right after
# the decision is logged; waiting for a healthy cluster's markers keeps "committed" meaning
# "visible to read_committed" wherever they are quick)
END_TXN_WAIT_MS = 1000

E = ErrorCode

# what a client hears when its state write failed (Kafka's TransactionStateManager): the
# coordinator moved (NOT_COORDINATOR), or cannot make it durable now
_WRITE_ERRORS = {E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
                 E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
                 E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
                 E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR}

# waits until the ISR of a state partition has everything appended to it so far
Replicated = Callable[[int], Awaitable[ErrorCode]]


@dataclass(frozen=True)
class InitResult:
    """InitProducerId's answer; ``ongoing_*`` name a transaction kept open (KIP-939)."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    ongoing_producer_id: int = -1
    ongoing_producer_epoch: int = -1


@dataclass(frozen=True)
class TxnListing:
    """ListTransactions' answer."""

    unknown_states: list[str]
    transactions: list[TxnMetadata]


class TransactionCoordinator:
    """The transactional ids of the state partitions this broker has loaded.

    ``new_producer_id()`` hands out producer ids (the broker's durable blocks);
    ``offsets_partition(group_id)`` names the ``__consumer_offsets`` partition of a group
    (AddOffsetsToTxn adds it to the transaction); ``replicated(p)`` waits until state
    partition p's ISR has what was written to it."""

    def __init__(self, config: TxnConfig, store: TxnStore, markers: MarkerWriter,
                 new_producer_id: Callable[[], int],
                 offsets_partition: Callable[[str], int], clock: Clock,
                 replicated: Replicated) -> None:
        self.config = config
        self.store = store
        self.markers = markers
        self._new_producer_id = new_producer_id
        self._offsets_partition = offsets_partition
        self.clock = clock
        self._replicated = replicated
        self.txns: dict[str, TxnMetadata] = {}
        self.loaded: dict[int, int] = {}  # state partition -> coordinator epoch
        self._timers: dict[str, TimerHandle] = {}  # task name -> its next run
        self._pending: set[str] = set()  # ids with a request in progress
        self._completing: dict[str, asyncio.Task[None]] = {}  # ids writing their markers
        self._aborting: set[asyncio.Task[None]] = set()  # timed-out transactions aborting
        self._unmarked: dict[str, frozenset[TopicPartition]] = {}  # markers still to write
        self._retries: dict[str, TimerHandle] = {}  # ids whose markers are sent again soon
        self.closed = False

    # ------------------------------------------------------------------ partitions

    def load_partition(self, partition: int, coordinator_epoch: int = 0) -> int:
        """Take over the ids of one state partition; resume the markers of what it left
        prepared (needs the running loop then)."""
        if partition in self.loaded:
            return 0
        found = self.store.load_partition(partition)
        self.loaded[partition] = coordinator_epoch
        self.txns.update(found)
        for m in found.values():
            if m.is_prepared:
                self._start_completion(m)
        log.debug("loaded %d transactional ids of %s-%d (coordinator epoch %d)", len(found),
                  TRANSACTION_STATE, partition, coordinator_epoch)
        return len(found)

    def unload_partition(self, partition: int) -> int:
        """Give up the ids of one state partition (their markers are another
        coordinator's to finish now)."""
        self.loaded.pop(partition, None)
        gone = [t for t in self.txns if self.store.partition_for(t) == partition]
        for t in gone:
            del self.txns[t]
            self._forget_completion(t)
        return len(gone)

    def serve_partitions(self, partitions: Mapping[int, int]) -> None:
        """Coordinate exactly the ids of ``partitions`` (state partition -> coordinator
        epoch: those this broker leads, at their leader epochs); a partition led again
        under a new epoch is loaded again (another leader may have written meanwhile)."""
        for p in sorted(self.loaded):
            if partitions.get(p) != self.loaded[p]:
                self.unload_partition(p)
        fresh = sorted(set(partitions) - set(self.loaded))
        load_each_partition(lambda p: self.load_partition(p, partitions[p]), fresh,
                            TRANSACTION_STATE, "transactional ids")

    def load_all_partitions(self) -> None:
        """A single broker coordinates every transactional id."""
        self.serve_partitions(dict.fromkeys(range(self.store.num_partitions), 0))

    def start(self) -> None:
        """Start the abort-timeout and id-expiry timers (needs the running loop)."""
        cfg = self.config
        self._every(cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                    self.abort_timed_out)
        self._every(cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
                    self.expire_ids)

    def _every(self, interval_ms: int, task: Callable[[], object]) -> None:
        name = task.__name__

        def run() -> None:
            if self.closed:
                return
            try:
                task()
            except Exception:  # noqa: BLE001 - the next round tries again
                log.exception("transaction coordinator task %s failed", name)
            self._timers[name] = self.clock.call_later(interval_ms, run)

        self._timers[name] = self.clock.call_later(interval_ms, run)

    def shutdown(self) -> None:
        self.closed = True
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        for task in self._aborting:
            task.cancel()
        for p in list(self.loaded):
            self.unload_partition(p)

    def serves(self, transactional_id: str) -> bool:
        return self.store.partition_for(transactional_id) in self.loaded

    @contextlib.contextmanager
    def _request(self, transactional_id: str) -> Iterator[bool]:
        """A request acting on ``transactional_id``: yields False while another one is in
        progress for it (answered CONCURRENT_TRANSACTIONS), else True until it is done."""
        if transactional_id in self._pending:
            yield False
            return
        self._pending.add(transactional_id)
        try:
            yield True
        finally:
            self._pending.discard(transactional_id)

    # ------------------------------------------------------------------ requests

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               producer_id: int = -1, producer_epoch: int = -1, *,
                               enable_2pc: bool = False,
                               keep_prepared: bool = False) -> InitResult:
        """A transactional producer's InitProducerId; ``producer_id``/``producer_epoch``
        >= 0 ask to bump that epoch (KIP-360). ``enable_2pc`` (KIP-939) makes the
        transactions of this id unbounded by time (allowed by
        ``transaction.two.phase.commit.enable``); ``keep_prepared`` keeps an open
        transaction for the new producer instance to complete, and names it."""
        if not transactional_id or (keep_prepared and not enable_2pc):
            return InitResult(E.INVALID_REQUEST)
        if enable_2pc and not self.config.transaction_two_phase_commit_enable:
            return InitResult(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self.serves(transactional_id):
            return InitResult(E.NOT_COORDINATOR)
        if enable_2pc:
            timeout_ms = NO_TIMEOUT_MS
        elif not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitResult(E.INVALID_TRANSACTION_TIMEOUT)
        with self._request(transactional_id) as mine:
            if not mine:
                return InitResult(E.CONCURRENT_TRANSACTIONS)
            return await self._init(transactional_id, timeout_ms, producer_id, producer_epoch,
                                    keep_prepared)

    async def _init(self, transactional_id: str, timeout_ms: int, producer_id: int,
                    producer_epoch: int, keep_prepared: bool) -> InitResult:
        now = self.clock.now_ms()
        m = self.txns.get(transactional_id)
        if m is None:
            m = TxnMetadata(transactional_id, self._new_producer_id(), -1, timeout_ms,
                            TxnState.EMPTY, last_update_ms=now)
        if producer_id >= 0:
            kind = m.init_kind(producer_id, producer_epoch)
            if kind is InitKind.FENCED:
                return InitResult(E.PRODUCER_FENCED)
            if kind is InitKind.RETRY:
                return InitResult(E.NONE, m.producer_id, m.producer_epoch)
        if m.is_prepared:
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if m.state == TxnState.ONGOING and keep_prepared:
            # KIP-939: the new instance takes the prepared transaction over (the old one is
            # fenced by the bump) and ends it with EndTxn
            nxt = m.moved(now, producer_epoch=m.producer_epoch + 1,
                          last_producer_epoch=m.producer_epoch, timeout_ms=timeout_ms)
            err = await self._persist(nxt)
            if err is not E.NONE:
                return InitResult(err)
            return InitResult(E.NONE, nxt.producer_id, nxt.producer_epoch, m.producer_id,
                              m.producer_epoch)
        if m.state == TxnState.ONGOING:
            # a new producer instance: abort the old one's transaction under a fenced epoch
            await self._abort_fenced(m)
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        nxt = m.initialized(now, timeout_ms, producer_id >= 0, self._new_producer_id)
        err = await self._persist(nxt)
        if err is not E.NONE:
            return InitResult(err)
        return InitResult(E.NONE, nxt.producer_id, nxt.producer_epoch)

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the transaction."""
        m, err = self._checked(transactional_id, producer_id, producer_epoch)
        if m is None:
            return err
        if m.is_prepared:
            return E.CONCURRENT_TRANSACTIONS
        wanted = m.partitions | frozenset(partitions)
        if m.state == TxnState.ONGOING and wanted == m.partitions:
            return E.NONE
        with self._request(transactional_id) as mine:
            if not mine:
                return E.CONCURRENT_TRANSACTIONS
            now = self.clock.now_ms()
            start = m.start_ms if m.state == TxnState.ONGOING else now
            return await self._persist(m.moved(now, state=TxnState.ONGOING, partitions=wanted,
                                               start_ms=start))

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        return await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                         [(CONSUMER_OFFSETS, self._offsets_partition(group_id))])

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890's check (AddPartitionsToTxn v4 verify_only, and transactional produce):
        each partition must be in the producer's ongoing transaction."""
        parts = list(partitions)
        m, err = self._checked(transactional_id, producer_id, producer_epoch)
        if m is None:
            return dict.fromkeys(parts, err)
        ok = m.state == TxnState.ONGOING
        return {tp: E.NONE if ok and tp in m.partitions else E.INVALID_TXN_STATE
                for tp in parts}

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        m, err = self._checked(transactional_id, producer_id, producer_epoch)
        if m is None:
            return err
        done, prepare = ((TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit
                         else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT))
        if m.state == done:
            return E.NONE  # a retry of a completed EndTxn
        if m.state == prepare:
            return E.CONCURRENT_TRANSACTIONS
        if m.state != TxnState.ONGOING:
            return E.INVALID_TXN_STATE
        with self._request(transactional_id) as mine:
            if not mine:
                return E.CONCURRENT_TRANSACTIONS
            nxt = m.moved(self.clock.now_ms(), state=prepare)
            err = await self._persist(nxt)
            if err is not E.NONE:
                return err
            await self._complete_now(nxt)
            return E.NONE

    # ------------------------------------------------------------------ admin

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if not self.serves(transactional_id):
            return E.NOT_COORDINATOR, None
        m = self.txns.get(transactional_id)
        if m is None:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, m

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1, id_pattern: str | None = None
                          ) -> TxnListing:
        """ListTransactions: every filter given must match (states by Kafka's names,
        running at least ``min_duration_ms`` when >= 0, the whole id matched by the regular
        expression ``id_pattern``; an invalid one raises ``re.error``)."""
        pattern = re.compile(id_pattern) if id_pattern else None
        wanted: set[TxnState] = set()
        unknown: list[str] = []
        for name in states:
            s = TxnState.by_kafka_name(name)
            if s is None:
                unknown.append(name)
            else:
                wanted.add(s)
        pids = set(producer_ids)
        now = self.clock.now_ms()
        out = [m for m in self.txns.values()
               if (not states or m.state in wanted)
               and (not pids or m.producer_id in pids)
               and (pattern is None or pattern.fullmatch(m.transactional_id) is not None)
               and (min_duration_ms < 0
                    or (m.start_ms >= 0 and now - m.start_ms >= min_duration_ms))]
        return TxnListing(unknown, sorted(out, key=lambda m: m.transactional_id))

    # ------------------------------------------------------------------ timers

    def abort_timed_out(self) -> int:
        """Abort transactions open longer than their timeout (epoch bumped, as Kafka does,
        so the late producer is fenced); resume the markers of prepared ones that are not
        being written (their last completion failed to log). Returns how many it aborts
        (the aborts run on the loop)."""
        now = self.clock.now_ms()
        n = 0
        for m in list(self.txns.values()):
            tid = m.transactional_id
            if tid in self._pending or tid in self._completing or tid in self._retries:
                continue
            if (m.state == TxnState.ONGOING and m.timeout_ms != NO_TIMEOUT_MS
                    and now - m.start_ms > m.timeout_ms):
                log.info("aborting transaction of %r (producer %d, epoch %d): open %d ms, "
                         "timeout %d ms", tid, m.producer_id, m.producer_epoch,
                         now - m.start_ms, m.timeout_ms)
                task = asyncio.get_running_loop().create_task(
                    self._abort_timed_out(m), name=f"txn-timeout-{tid}")
                self._aborting.add(task)
                task.add_done_callback(self._aborting.discard)
                n += 1
            elif m.is_prepared:
                self._start_completion(m)
        return n

    async def _abort_timed_out(self, m: TxnMetadata) -> None:
        with self._request(m.transactional_id) as mine:
            if mine and self.txns.get(m.transactional_id) is m:
                await self._abort_fenced(m)

    def expire_ids(self) -> int:
        """Forget ids idle past ``transactional.id.expiration.ms`` (tombstoned first; the
        tombstone needs no wait for the ISR: an id that comes back is simply new again)."""
        now = self.clock.now_ms()
        n = 0
        for m in list(self.txns.values()):
            if (m.is_complete and m.transactional_id not in self._pending
                    and now - m.last_update_ms > self.config.transactional_id_expiration_ms):
                try:
                    self.store.remove(m.transactional_id, now)
                except Exception:  # noqa: BLE001 - retried next round
                    log.exception("expiring transactional id %r failed", m.transactional_id)
                    continue
                del self.txns[m.transactional_id]
                n += 1
        return n

    # ------------------------------------------------------------------ internals

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int
                 ) -> tuple[TxnMetadata | None, ErrorCode]:
        """The id's metadata if the request's producer may act on it, else the error."""
        if not transactional_id:
            return None, E.INVALID_REQUEST
        if not self.serves(transactional_id):
            return None, E.NOT_COORDINATOR
        m = self.txns.get(transactional_id)
        if m is None or m.producer_id != producer_id:
            return None, E.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return None, E.PRODUCER_FENCED
        return m, E.NONE

    async def _persist(self, m: TxnMetadata) -> ErrorCode:
        """Write ``m`` and wait for the state partition's ISR; only then is it in force."""
        partition = self.store.partition_for(m.transactional_id)
        epoch = self.loaded.get(partition)
        if epoch is None:
            return E.NOT_COORDINATOR
        try:
            self.store.write(m)
            err = await self._replicated(partition)
        except KafkaError as exc:
            err = exc.error_code
        except Exception:  # noqa: BLE001 - answered as Kafka does when the log fails
            log.exception("writing the state of %r failed", m.transactional_id)
            return E.COORDINATOR_NOT_AVAILABLE
        if err is not E.NONE:
            log.info("writing the state of %r to %s-%d failed: %s", m.transactional_id,
                     TRANSACTION_STATE, partition, err.name)
            return _WRITE_ERRORS.get(err, E.COORDINATOR_NOT_AVAILABLE)
        if self.loaded.get(partition) != epoch:
            return E.NOT_COORDINATOR  # the partition moved while the write waited
        self.txns[m.transactional_id] = m
        return E.NONE

    async def _abort_fenced(self, m: TxnMetadata) -> None:
        """Abort ``m``'s transaction under a bumped epoch (the old producer is fenced)."""
        epoch = m.producer_epoch + 1 if m.producer_epoch + 1 < MAX_EPOCH else m.producer_epoch
        nxt = m.moved(self.clock.now_ms(), producer_epoch=epoch,
                      last_producer_epoch=m.producer_epoch, state=TxnState.PREPARE_ABORT)
        if await self._persist(nxt) is E.NONE:
            await self._complete_now(nxt)

    # ------------------------------------------------------------------ completion

    def _start_completion(self, m: TxnMetadata) -> None:
        """Write the markers of prepared ``m`` in the background (unless already)."""
        tid = m.transactional_id
        if tid in self._completing:
            return
        task = asyncio.get_running_loop().create_task(self._complete(m),
                                                      name=f"txn-markers-{tid}")
        self._completing[tid] = task
        task.add_done_callback(
            lambda t: self._completing.pop(tid) if self._completing.get(tid) is t else None)

    async def _complete_now(self, m: TxnMetadata) -> None:
        """One round of ``m``'s markers, awaited for up to ``END_TXN_WAIT_MS`` (the request
        answers after it); what is left is retried in the background."""
        task = self._completing.get(m.transactional_id)
        if task is None:
            self._start_completion(m)
            task = self._completing[m.transactional_id]
        try:
            await asyncio.wait_for(asyncio.shield(task), END_TXN_WAIT_MS / 1000)
        except TimeoutError:
            pass  # the decision is logged: the markers follow in the background
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # this request was cancelled, not the completion (unloaded)

    def _forget_completion(self, transactional_id: str) -> None:
        self._unmarked.pop(transactional_id, None)
        retry = self._retries.pop(transactional_id, None)
        if retry is not None:
            retry.cancel()
        task = self._completing.pop(transactional_id, None)
        if task is not None:
            task.cancel()

    async def _complete(self, m: TxnMetadata) -> None:
        """Write the markers of prepared ``m`` not written yet, then log it complete; a
        round that leaves some (or fails to log) is tried again in ``MARKER_RETRY_MS``,
        while this coordinator still serves ``m`` unchanged."""
        tid = m.transactional_id
        partition = self.store.partition_for(tid)
        epoch = self.loaded.get(partition)
        if epoch is None or self.txns.get(tid) is not m:
            return
        commit = m.state == TxnState.PREPARE_COMMIT
        todo = self._unmarked.get(tid, m.partitions)
        try:
            results = await self.markers.write(m.producer_id, m.producer_epoch, commit, epoch,
                                               sorted(todo))
        except Exception:  # noqa: BLE001 - retried like a marker not written
            log.exception("writing the markers of %r failed", tid)
            results = dict.fromkeys(todo, E.UNKNOWN_SERVER_ERROR)
        if self.loaded.get(partition) != epoch or self.txns.get(tid) is not m:
            return  # moved on meanwhile: another coordinator (or a reload) completes it
        if E.TRANSACTION_COORDINATOR_FENCED in results.values():
            log.warning("markers of %r refused: a newer coordinator than epoch %d of %s-%d "
                        "completes it", tid, epoch, TRANSACTION_STATE, partition)
            return
        left = frozenset(tp for tp, err in results.items() if err is not E.NONE)
        if left:
            self._unmarked[tid] = left
            self._retry(m)
            return
        self._unmarked.pop(tid, None)
        err = await self._persist(m.moved(
            self.clock.now_ms(),
            state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
            partitions=frozenset(), start_ms=-1))
        if err is not E.NONE and self.txns.get(tid) is m:
            self._unmarked[tid] = frozenset()  # every marker is written: only log it
            self._retry(m)

    def _retry(self, m: TxnMetadata) -> None:
        if self.closed:
            return
        tid = m.transactional_id

        def again() -> None:
            self._retries.pop(tid, None)
            if not self.closed and self.txns.get(tid) is m:
                self._start_completion(m)

        self._retries[tid] = self.clock.call_later(MARKER_RETRY_MS, again)
