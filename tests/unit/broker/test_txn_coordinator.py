"""The transaction coordinator's state machine over an in-memory ``__transaction_state``:
epochs and fencing, Empty -> Ongoing -> Prepare* -> Complete*, markers, a crash between
the logged decision and its markers, timeouts, id expiry, two-phase commit (KIP-939), the
record formats, and what replication adds: states in force only once the ISR has them,
leadership and coordinator epochs, markers retried until written."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable

from sparklog.broker.group.store import MemoryRecordLog
from sparklog.broker.txn.config import TxnConfig
from sparklog.broker.txn.coordinator import (
    MARKER_RETRY_MS,
    NO_TIMEOUT_MS,
    InitResult,
    TransactionCoordinator,
)
from sparklog.broker.txn.model import MAX_EPOCH
from sparklog.broker.txn.records import (
    TxnLogValue,
    TxnState,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from sparklog.broker.txn.store import TxnStore
from sparklog.protocol.errors import ErrorCode as E
from tests.helpers.clock import FakeClock, in_loop, settle

TP = tuple[str, int]


class RecordingMarkers:
    """Stands in for the partition logs: records each marker (and the coordinator epochs
    they carried), or fails while ``down`` (every partition) or for the ``failing`` ones."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, TP]] = []
        self.coordinator_epochs: set[int] = set()
        self.down = False
        self.failing: set[TP] = set()

    async def write(self, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, partitions: Iterable[TP]) -> dict[TP, E]:
        out = {}
        for tp in partitions:
            if self.down or tp in self.failing:
                out[tp] = E.NOT_LEADER_OR_FOLLOWER
            else:
                self.written.append((producer_id, producer_epoch, commit, tp))
                self.coordinator_epochs.add(coordinator_epoch)
                out[tp] = E.NONE
        return out


class Isr:
    """The state partitions' followers: a write is replicated once ``release`` says so
    (with the error the ISR wait ends with); ``waiting`` counts the writes held."""

    def __init__(self) -> None:
        self.waiting = 0
        self._gate: asyncio.Future[E] | None = None

    async def __call__(self, partition: int) -> E:
        if self._gate is None:
            return E.NONE
        self.waiting += 1
        try:
            return await self._gate
        finally:
            self.waiting -= 1

    def hold(self) -> None:
        self._gate = asyncio.get_running_loop().create_future()

    def release(self, err: E = E.NONE) -> None:
        assert self._gate is not None
        self._gate.set_result(err)
        self._gate = None


class Ids:
    def __init__(self) -> None:
        self.n = 1000

    def __call__(self) -> int:
        self.n += 1
        return self.n


async def init(tc: TransactionCoordinator, transactional_id: str, timeout_ms: int,
               producer_id: int = -1, producer_epoch: int = -1) -> tuple[E, int, int]:
    """InitProducerId's (error, producer id, epoch)."""
    r = await tc.init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch)
    return r.error, r.producer_id, r.producer_epoch


def make(log: MemoryRecordLog | None = None, clock: FakeClock | None = None,
         markers: RecordingMarkers | None = None, isr: Isr | None = None, **cfg: int
         ) -> tuple[TransactionCoordinator, RecordingMarkers, FakeClock, MemoryRecordLog]:
    log = log if log is not None else MemoryRecordLog()
    clock = clock or FakeClock()
    markers = markers or RecordingMarkers()
    config = TxnConfig(transaction_state_log_num_partitions=4, **cfg)
    tc = TransactionCoordinator(config, TxnStore(log, 4), markers, Ids(),
                                lambda group: 7, clock, isr or Isr())
    tc.load_all_partitions()
    return tc, markers, clock, log


@in_loop
async def test_epochs_bump_on_each_init_and_fence_old_requests() -> None:
    tc, _m, _c, _l = make()
    assert await init(tc, "t", 60000) == (E.NONE, 1001, 0)
    assert await init(tc, "t", 60000) == (E.NONE, 1001, 1)
    assert await tc.add_partitions("t", 1001, 0, [("a", 0)]) == E.PRODUCER_FENCED
    assert await tc.add_partitions("t", 1002, 1, [("a", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await tc.add_partitions("unknown", 1001, 1, [("a", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
    assert (await init(tc, "t", 900001))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await init(tc, "t", 0))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await init(tc, "", 1000))[0] == E.INVALID_REQUEST
    # KIP-360: the current epoch may ask for a bump; a retried bump gets the same answer
    assert await init(tc, "t", 60000, 1001, 1) == (E.NONE, 1001, 2)
    assert await init(tc, "t", 60000, 1001, 1) == (E.NONE, 1001, 2)
    assert (await init(tc, "t", 60000, 1001, 0))[0] == E.PRODUCER_FENCED


@in_loop
async def test_commit_writes_markers_then_completes_and_survives_reload() -> None:
    tc, markers, clock, log = make()
    _e, pid, epoch = await init(tc, "t", 60000)
    assert await tc.add_partitions("t", pid, epoch, [("a", 0), ("b", 1)]) == E.NONE
    assert await tc.add_offsets("t", pid, epoch, "group") == E.NONE
    m = tc.txns["t"]
    assert m.state == TxnState.ONGOING and m.start_ms == clock.now
    assert m.partitions == {("a", 0), ("b", 1), ("__consumer_offsets", 7)}
    assert await tc.end_txn("t", pid, epoch, commit=True) == E.NONE
    assert sorted(markers.written) == sorted(
        (pid, epoch, True, tp) for tp in [("a", 0), ("b", 1), ("__consumer_offsets", 7)])
    assert tc.txns["t"].state == TxnState.COMPLETE_COMMIT and not tc.txns["t"].partitions
    assert await tc.end_txn("t", pid, epoch, commit=True) == E.NONE  # a retry
    assert await tc.end_txn("t", pid, epoch, commit=False) == E.INVALID_TXN_STATE
    again, _m, _c, _l = make(log)
    assert again.txns["t"] == tc.txns["t"]


@in_loop
async def test_a_logged_decision_is_completed_after_a_crash() -> None:
    tc, markers, _clock, log = make()
    _e, pid, epoch = await init(tc, "t", 60000)
    await tc.add_partitions("t", pid, epoch, [("a", 0), ("a", 1)])
    markers.down = True  # the decision is logged, no marker gets written
    assert await tc.end_txn("t", pid, epoch, commit=True) == E.NONE
    assert tc.txns["t"].state == TxnState.PREPARE_COMMIT
    assert await tc.end_txn("t", pid, epoch, commit=True) == E.CONCURRENT_TRANSACTIONS
    assert (await init(tc, "t", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    # a new coordinator (the restarted broker) completes it from the log
    fresh = RecordingMarkers()
    again, _m, _c, _l = make(log, markers=fresh)
    await settle()  # it resumes the markers as it loads, in the background
    assert sorted(fresh.written) == [(pid, epoch, True, ("a", 0)), (pid, epoch, True, ("a", 1))]
    assert again.txns["t"].state == TxnState.COMPLETE_COMMIT


@in_loop
async def test_a_new_producer_aborts_the_open_transaction_under_a_bumped_epoch() -> None:
    tc, markers, _c, _l = make()
    _e, pid, epoch = await init(tc, "t", 60000)
    await tc.add_partitions("t", pid, epoch, [("a", 0)])
    assert (await init(tc, "t", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    assert markers.written == [(pid, epoch + 1, False, ("a", 0))]
    assert tc.txns["t"].state == TxnState.COMPLETE_ABORT
    assert await init(tc, "t", 60000) == (E.NONE, pid, epoch + 2)
    assert await tc.end_txn("t", pid, epoch, commit=True) == E.PRODUCER_FENCED


@in_loop
async def test_timed_out_transactions_are_aborted_and_their_producer_fenced() -> None:
    tc, markers, clock, _l = make()
    _e, pid, epoch = await init(tc, "slow", 1000)
    await tc.add_partitions("slow", pid, epoch, [("a", 0)])
    _e, pid2, epoch2 = await init(tc, "quick", 60000)
    await tc.add_partitions("quick", pid2, epoch2, [("a", 1)])
    clock.now += 1001
    assert tc.abort_timed_out() == 1
    await settle()  # the abort runs on the loop
    assert markers.written == [(pid, epoch + 1, False, ("a", 0))]
    assert tc.txns["slow"].state == TxnState.COMPLETE_ABORT
    assert tc.txns["quick"].state == TxnState.ONGOING
    assert await tc.end_txn("slow", pid, epoch, commit=True) == E.PRODUCER_FENCED


@in_loop
async def test_idle_ids_expire_open_ones_do_not() -> None:
    tc, _m, clock, log = make(transactional_id_expiration_ms=5000)
    await init(tc, "idle", 60000)
    _e, pid, epoch = await init(tc, "busy", 60000)
    await tc.add_partitions("busy", pid, epoch, [("a", 0)])
    clock.now += 5001
    assert tc.expire_ids() == 1
    assert set(tc.txns) == {"busy"}
    again, _m2, _c2, _l2 = make(log)
    assert set(again.txns) == {"busy"}


@in_loop
async def test_list_and_describe() -> None:
    tc, _m, clock, _l = make()
    _e, pid, epoch = await init(tc, "x", 60000)
    await tc.add_partitions("x", pid, epoch, [("a", 0)])
    await init(tc, "y", 60000)
    assert tc.describe("nope") == (E.TRANSACTIONAL_ID_NOT_FOUND, None)
    listing = tc.list_transactions(["ongoing", "Nope"])
    assert listing.unknown_states == ["Nope"]
    assert [m.transactional_id for m in listing.transactions] == ["x"]
    assert [m.transactional_id for m in tc.list_transactions(producer_ids=[pid]).transactions] == ["x"]
    clock.now += 10
    assert [m.transactional_id for m in tc.list_transactions(min_duration_ms=10).transactions] == ["x"]
    assert tc.list_transactions(min_duration_ms=11).transactions == []
    assert [m.transactional_id for m in tc.list_transactions(id_pattern="[xy]").transactions] \
        == ["x", "y"]
    assert tc.list_transactions(id_pattern="x.+").transactions == []


@in_loop
async def test_state_partitions_load_and_unload_one_at_a_time() -> None:
    tc, _m, _c, log = make()
    ids = [f"id-{i}" for i in range(12)]
    for t in ids:
        await init(tc, t, 60000)
    p = tc.store.partition_for(ids[0])
    mine = {t for t in ids if tc.store.partition_for(t) == p}
    assert tc.unload_partition(p) == len(mine)
    assert not tc.serves(ids[0]) and (await init(tc, ids[0], 60000))[0] == E.NOT_COORDINATOR
    assert tc.load_partition(p) == len(mine)
    assert mine <= set(tc.txns)


@in_loop
async def test_record_formats_are_kafkas() -> None:
    key = encode_txn_key("my-id")
    assert key == struct.pack(">hh", 0, 5) + b"my-id"
    assert decode_txn_key(key) == "my-id"
    v = TxnLogValue(7, 3, 60000, TxnState.ONGOING, frozenset({("b", 1), ("a", 2), ("a", 0)}),
                    1234, 1000)
    # TransactionLogValue v1 (flexible): compact arrays and strings, tagged fields at their
    # defaults left out
    body = (struct.pack(">qhib", 7, 3, 60000, 1) + bytes([3])
            + bytes([2]) + b"a" + bytes([3]) + struct.pack(">ii", 0, 2) + bytes([0])
            + bytes([2]) + b"b" + bytes([2]) + struct.pack(">i", 1) + bytes([0])
            + struct.pack(">qq", 1234, 1000))
    assert encode_txn_value(v) == struct.pack(">h", 1) + body + bytes([0])
    assert decode_txn_value(encode_txn_value(v)) == v
    # Kafka's tags 0-2 (KIP-890) and sparklog's last producer epoch (tag 1000)
    tagged = TxnLogValue(7, 3, 60000, TxnState.ONGOING, v.partitions, 1234, 1000,
                         previous_producer_id=6, next_producer_id=8,
                         client_transaction_version=2, last_producer_epoch=2)
    assert encode_txn_value(tagged) == struct.pack(">h", 1) + body + bytes([4]) + (
        bytes([0, 8]) + struct.pack(">q", 6) + bytes([1, 8]) + struct.pack(">q", 8)
        + bytes([2, 2]) + struct.pack(">h", 2) + bytes([0xE8, 0x07, 2]) + struct.pack(">h", 2))
    assert decode_txn_value(encode_txn_value(tagged)) == tagged
    # v0, what Kafka writes before transaction.version 1 (and sparklog wrote before)
    v0 = (struct.pack(">hqhib", 0, 7, 3, 60000, 1) + struct.pack(">i", 2)
          + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
          + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
          + struct.pack(">qq", 1234, 1000))
    assert decode_txn_value(v0) == v
    assert [s.kafka_name for s in TxnState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence"]


@in_loop
async def test_a_retried_init_gets_the_same_epoch_after_a_coordinator_restart() -> None:
    """KIP-360: the bump's answer was lost and the coordinator restarted; the producer
    presents the epoch it had, and gets the epoch the logged bump gave, not a fence."""
    tc, _m, clock, log = make()
    _e, pid, epoch = await init(tc, "t", 60000)
    assert await init(tc, "t", 60000, pid, epoch) == (E.NONE, pid, epoch + 1)
    tc, _m, _c, _l = make(log, clock)
    assert await init(tc, "t", 60000, pid, epoch) == (E.NONE, pid, epoch + 1)
    # a new instance (no epoch presented) fences both
    assert await init(tc, "t", 60000) == (E.NONE, pid, epoch + 2)
    tc, _m, _c, _l = make(log, clock)
    assert (await init(tc, "t", 60000, pid, epoch))[0] == E.PRODUCER_FENCED
    assert (await init(tc, "t", 60000, pid, epoch + 1))[0] == E.PRODUCER_FENCED


@in_loop
async def test_a_retried_init_that_rotated_the_producer_id_survives_a_restart() -> None:
    tc, _m, clock, log = make()
    _e, pid, _epoch = await init(tc, "t", 60000)
    exhausted = MAX_EPOCH - 2
    tc.txns["t"] = tc.txns["t"].moved(clock.now, producer_epoch=exhausted)
    rotated = await init(tc, "t", 60000, pid, exhausted)
    assert rotated[0] == E.NONE and rotated[1] != pid and rotated[2] == 0
    tc, _m, _c, _l = make(log, clock)
    assert tc.txns["t"].previous_producer_id == pid
    assert await init(tc, "t", 60000, pid, exhausted) == rotated


@in_loop
async def test_the_instance_a_new_producer_replaced_cannot_claim_its_epoch() -> None:
    """A new instance initialises without an epoch; the old one (a zombie) presenting its
    own epoch must be fenced, not handed the new instance's epoch as a 'retry'."""
    tc, _m, clock, log = make()
    _e, pid, old = await init(tc, "t", 60000)
    assert await init(tc, "t", 60000) == (E.NONE, pid, old + 1)
    assert (await init(tc, "t", 60000, pid, old))[0] == E.PRODUCER_FENCED
    tc, _m, _c, _l = make(log, clock)
    assert (await init(tc, "t", 60000, pid, old))[0] == E.PRODUCER_FENCED


@in_loop
async def test_two_phase_commit_needs_the_broker_switch() -> None:
    tc, _m, _c, _l = make()
    assert (await tc.init_producer_id("p", 1000, enable_2pc=True)).error == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    tc2, _m2, _c2, _l2 = make(transaction_two_phase_commit_enable=True)
    assert (await tc2.init_producer_id("p", 1000, keep_prepared=True)).error == E.INVALID_REQUEST


@in_loop
async def test_a_prepared_transaction_survives_its_producer_and_is_completed_by_the_next() -> None:
    tc, markers, clock, log = make(transaction_two_phase_commit_enable=True)
    first = await tc.init_producer_id("spark-q1-b7-t3", 1000, enable_2pc=True)
    pid, epoch = first.producer_id, first.producer_epoch
    assert await tc.add_partitions("spark-q1-b7-t3", pid, epoch, [("out", 0), ("out", 1)]) == E.NONE
    assert tc.txns["spark-q1-b7-t3"].timeout_ms == NO_TIMEOUT_MS
    clock.now += 10 * 86_400_000  # no timeout aborts a 2PC transaction
    assert tc.abort_timed_out() == 0 and markers.written == []
    # the writer is gone; whoever recovers (after a coordinator restart too) keeps it open
    tc, markers, clock, log = make(log, clock, transaction_two_phase_commit_enable=True)
    again = await tc.init_producer_id("spark-q1-b7-t3", 1000, enable_2pc=True, keep_prepared=True)
    assert again == InitResult(E.NONE, pid, epoch + 1, pid, epoch)
    assert tc.txns["spark-q1-b7-t3"].state == TxnState.ONGOING
    assert await tc.end_txn("spark-q1-b7-t3", pid, epoch, commit=True) == E.PRODUCER_FENCED
    assert await tc.end_txn("spark-q1-b7-t3", pid, epoch + 1, commit=True) == E.NONE
    assert sorted(markers.written) == [(pid, epoch + 1, True, ("out", 0)),
                                       (pid, epoch + 1, True, ("out", 1))]
    # without keep_prepared_txn a new instance aborts what is open, as in KIP-98
    _e, pid, epoch = await init(tc, "other", 1000)
    await tc.add_partitions("other", pid, epoch, [("out", 2)])
    assert (await tc.init_producer_id("other", 1000, enable_2pc=True)).error == E.CONCURRENT_TRANSACTIONS
    assert markers.written[-1] == (pid, epoch + 1, False, ("out", 2))


@in_loop
async def test_timers_run_each_task_every_interval_and_stop_at_shutdown() -> None:
    tc, markers, clock, _l = make(transaction_abort_timed_out_transaction_cleanup_interval_ms=100)
    tc.start()
    _e, pid, epoch = await init(tc, "t", 1000)
    await tc.add_partitions("t", pid, epoch, [("a", 0)])
    await clock.advance(1200)
    assert markers.written == [(pid, epoch + 1, False, ("a", 0))]
    assert len(tc._timers) == 2  # one pending run per task, however many ran
    tc.shutdown()
    assert not tc._timers and not tc.txns


@in_loop
async def test_a_state_is_kept_and_answered_only_once_the_isr_has_it() -> None:
    isr = Isr()
    tc, _m, _c, _l = make(isr=isr)
    _e, pid, epoch = await init(tc, "t", 60000)
    isr.hold()
    adding = asyncio.ensure_future(tc.add_partitions("t", pid, epoch, [("a", 0)]))
    await settle()
    assert isr.waiting == 1 and not adding.done()
    assert tc.txns["t"].state == TxnState.EMPTY  # not in force before the ISR has it
    # meanwhile the id is busy (Kafka's pending state)
    assert await tc.add_partitions("t", pid, epoch, [("a", 1)]) == E.CONCURRENT_TRANSACTIONS
    assert (await init(tc, "t", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    isr.release()
    assert await adding == E.NONE and tc.txns["t"].state == TxnState.ONGOING
    # a write whose leadership moved while it waited: NOT_COORDINATOR, state unchanged
    isr.hold()
    ending = asyncio.ensure_future(tc.end_txn("t", pid, epoch, commit=True))
    await settle()
    isr.release(E.NOT_LEADER_OR_FOLLOWER)
    assert await ending == E.NOT_COORDINATOR and tc.txns["t"].state == TxnState.ONGOING
    isr.hold()
    ending = asyncio.ensure_future(tc.end_txn("t", pid, epoch, commit=True))
    await settle()
    isr.release(E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert await ending == E.COORDINATOR_NOT_AVAILABLE


@in_loop
async def test_the_coordinator_follows_its_partitions_leadership_and_epochs() -> None:
    tc, markers, _c, log = make()
    _e, pid, epoch = await init(tc, "t", 60000)
    p = tc.store.partition_for("t")
    tc.serve_partitions({p: 5})  # this broker leads only p, at leader epoch 5
    assert set(tc.loaded) == {p} and tc.loaded[p] == 5 and tc.serves("t")
    await tc.add_partitions("t", pid, epoch, [("a", 0)])
    assert await tc.end_txn("t", pid, epoch, commit=True) == E.NONE
    assert markers.coordinator_epochs == {5}  # the coordinator epoch is the leader epoch
    tc.serve_partitions({p: 6})  # led again under a new epoch: loaded again
    assert tc.loaded[p] == 6 and tc.txns["t"].state == TxnState.COMPLETE_COMMIT
    tc.serve_partitions({})  # leadership moved away
    assert not tc.txns and (await init(tc, "t", 60000))[0] == E.NOT_COORDINATOR


@in_loop
async def test_markers_not_written_are_sent_again_until_every_partition_has_one() -> None:
    tc, markers, clock, _l = make()
    _e, pid, epoch = await init(tc, "t", 60000)
    await tc.add_partitions("t", pid, epoch, [("a", 0), ("a", 1)])
    markers.failing = {("a", 1)}  # its leader cannot be reached
    assert await tc.end_txn("t", pid, epoch, commit=True) == E.NONE  # the decision is logged
    assert tc.txns["t"].state == TxnState.PREPARE_COMMIT
    await clock.advance(MARKER_RETRY_MS)
    assert markers.written == [(pid, epoch, True, ("a", 0))]  # only the missing one again
    markers.failing = set()
    await clock.advance(MARKER_RETRY_MS)
    assert markers.written == [(pid, epoch, True, ("a", 0)), (pid, epoch, True, ("a", 1))]
    assert tc.txns["t"].state == TxnState.COMPLETE_COMMIT


@in_loop
async def test_a_coordinator_that_loses_the_partition_stops_and_the_next_one_finishes() -> None:
    tc, markers, clock, log = make()
    _e, pid, epoch = await init(tc, "t", 60000)
    await tc.add_partitions("t", pid, epoch, [("a", 0)])
    markers.down = True
    assert await tc.end_txn("t", pid, epoch, commit=False) == E.NONE
    p = tc.store.partition_for("t")
    tc.unload_partition(p)
    markers.down = False
    await clock.advance(10 * MARKER_RETRY_MS)
    assert markers.written == []  # no longer this coordinator's to write
    nxt, fresh, _c, _l = make(log)
    await settle()
    assert fresh.written == [(pid, epoch, False, ("a", 0))]
    assert nxt.txns["t"].state == TxnState.COMPLETE_ABORT
