"""KIP-405's follower path on a 2-broker in-process cluster with a ``file://`` tier: a
follower whose log ends below the leader's local log start (it stopped fetching while the
leader uploaded and dropped segments) is answered OFFSET_MOVED_TO_TIERED_STORAGE, restarts
its log after the last uploaded segment with the bucket's log start, leader epochs and
producer state, fetches only the tail from the leader, rejoins the ISR, and as leader serves
every acknowledged record (the old ones from the bucket) to confluent-kafka."""

from __future__ import annotations

from pathlib import Path

from sparklog.cluster import InProcessCluster
from sparklog.storage.partition_log import PartitionLog
from tests.helpers.kafka_clients import create_topic
from tests.helpers.polling import wait_for
from tests.helpers.replication import AckedProducer, damage

TOPIC = {"remote.storage.enable": "true", "segment.bytes": "8192", "local.retention.bytes": "0",
         "retention.ms": "-1", "min.insync.replicas": "1"}
SMALL_BATCHES = {"batch.size": 2048}  # many batches per segment


def _log(c: InProcessCluster, node: int) -> PartitionLog:
    return c.brokers[node].replica_manager.get("tf", 0).log


def _isr(c: InProcessCluster) -> list[int]:
    return sorted(c.controller.image.topics["tf"].partitions[0].isr)


def _producers(plog: PartitionLog) -> dict[int, tuple[int, int]]:
    return {pid: (e.producer_epoch, e.last_seq)
            for pid, e in plog.producer_state.producers.items()}


def test_a_follower_below_the_leaders_local_start_restarts_from_the_bucket(
        tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    with InProcessCluster(tmp_path / "cluster", brokers=2, config={
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.url": f"file://{bucket}",
            "remote.log.manager.task.interval.ms": "200",
            "replica.lag.time.max.ms": "1500", "replica.fetch.backoff.ms": "100",
            "replica.fetch.wait.max.ms": "200"}) as c:
        bs = c.bootstrap_servers
        create_topic(bs, "tf", 1, 2, TOPIC)
        leader = c.controller.image.topics["tf"].partitions[0].leader
        away = 3 - leader
        main = AckedProducer(bs, "tf", **SMALL_BATCHES)
        main.send([b"a-%04d" % i for i in range(200)])
        wait_for(lambda: _log(c, away).log_end_offset == _log(c, leader).log_end_offset, 10,
                 "the follower has the first records")
        c.call(c.brokers[away].replica_fetchers.stop)
        wait_for(lambda: _isr(c) == [leader], 10, "the stopped follower leaves the ISR")
        stopped_at = _log(c, away).log_end_offset
        # a producer whose only records the follower will never fetch: its state must come
        # from the bucket's snapshot
        early = AckedProducer(bs, "tf")
        early.send([b"early-%d" % i for i in range(5)])
        main.send([b"b-%04d" % i for i in range(2000)])
        lead_log = _log(c, leader)
        wait_for(lambda: lead_log.local_log_start_offset > stopped_at + 1000, 20,
                 "the leader uploads and drops its old segments")

        c.call(c.brokers[away].replica_fetchers.start)
        wait_for(lambda: _isr(c) == [1, 2], 20, "the follower rejoins the ISR")
        follower_log = _log(c, away)
        wait_for(lambda: follower_log.log_end_offset == lead_log.log_end_offset, 10,
                 "the follower catches up")
        uploaded_ends = {s.end_offset for s in lead_log.remote.manifest.segments}
        # it fetched only the tail: its local log starts at an uploaded segment's end, far
        # past where it stopped; below that it answers from the bucket
        assert follower_log.local_log_start_offset in uploaded_ends
        assert follower_log.local_log_start_offset > stopped_at + 1000
        assert follower_log.log_start_offset == lead_log.log_start_offset == 0
        assert (follower_log.leader_epoch_cache.entries()
                == lead_log.leader_epoch_cache.entries())
        assert _producers(follower_log) == _producers(lead_log)
        assert len(_producers(lead_log)) == 2

        c.call(c.controller.change_leader, "tf", 0, away, [away, leader])
        wait_for(lambda: c.brokers[away].replica_manager.get("tf", 0).is_leader, 10,
                 "the follower leads")
        main.send([b"c-%04d" % i for i in range(100)])
        assert main.errors == [] and early.errors == []
        dmg, got = damage(bs, "tf", 1, main, 2305)
        assert dmg.none, dmg
        assert sorted(m.value for m in got if m.value.startswith(b"early-")) == [
            b"early-%d" % i for i in range(5)]
