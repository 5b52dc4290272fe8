"""sparklog's own clients across a leader's SIGKILL, as the Spark source and sink use them:
each client learned the cluster before the kill, so its cached metadata names the dead
broker as leader. A Kafka client retries retriable errors within its timeouts after
asking the cluster again where the partitions went; each call below must answer once the
controller has fenced the dead broker and moved its leaderships (one session timeout),
not ask the dead address until its timeout runs out (each did before: ListOffsets and the
Consumer never refreshed a leader they had cached, the Producer resent to it at once)."""

from __future__ import annotations

import pytest

from sparklog.client import AdminClient, ArrowFetcher, Consumer, NewTopic, Producer, TopicPartition
from tests.helpers.cluster import ClusterProcesses, partition_states
from tests.helpers.polling import collect, wait_for

pytestmark = pytest.mark.timeout(60)

TOPIC = "failover"
RECORDS = 20


def test_own_clients_find_the_new_leaders_after_a_leader_is_killed(
        local_cluster: ClusterProcesses):
    boot = local_cluster.bootstrap_servers
    conf = {"bootstrap.servers": boot}
    with AdminClient(conf) as admin:
        admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=3,
                                      config={"min.insync.replicas": "2"})])
    wait_for(lambda: all(leader > 0 and len(isr) == 3
                         for leader, isr in partition_states(boot, TOPIC).values()),
             20, "both partitions led with 3 in-sync replicas")
    tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    admin, producer, fetcher = AdminClient(conf), Producer(conf), ArrowFetcher(conf)
    consumer = Consumer({**conf, "auto.offset.reset": "earliest"})
    try:
        for i in range(RECORDS):
            producer.produce(TOPIC, b"before-%d" % i, partition=0)
        assert producer.flush(10) == 0
        # every client's metadata now names partition 0's leader
        assert admin.list_offsets({tp: -1 for tp in tps})[tps[0]][0] == RECORDS
        assert fetcher.fetch(tps[0], 0).batch.num_rows == RECORDS
        consumer.assign([tps[0]])
        assert len(collect(lambda: consumer.consume(RECORDS, 1), RECORDS, 10)) == RECORDS

        leader = partition_states(boot, TOPIC)[0][0]
        local_cluster.brokers[leader].kill()

        errors: list[BaseException] = []
        for i in range(RECORDS):
            producer.produce(TOPIC, b"after-%d" % i, partition=0,
                             on_delivery=lambda err, _md: err is not None and errors.append(err))
        assert producer.flush(30) == 0
        assert errors == []
        assert admin.list_offsets({tp: -1 for tp in tps})[tps[0]][0] == 2 * RECORDS
        assert fetcher.fetch(tps[0], 0).batch.num_rows == 2 * RECORDS
        got = collect(lambda: consumer.consume(RECORDS, 1), RECORDS, 30)
        assert [r.value for r in got] == [b"after-%d" % i for i in range(RECORDS)]
        assert partition_states(boot, TOPIC)[0][0] not in (leader, -1)
    finally:
        for client in (admin, producer, fetcher, consumer):
            client.close()
