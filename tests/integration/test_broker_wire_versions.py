"""Every version the broker advertises for its core APIs, round-tripped over a real socket:
a request encoded at that version gets a response that decodes at that version and says
what the broker state says. (Real clients cover the versions they pick, see
test_broker_clients; this covers the rest of each advertised range.)"""

from __future__ import annotations

import pytest

from sparklog.broker.dispatch import load_handlers, registered
from sparklog.protocol.batch_header import iter_batch_views
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.messages import API_BY_KEY
from sparklog.protocol.records import Record, decode_batch, encode_batch
from tests.helpers.requests import produce_request
from tests.helpers.wire import KafkaWire

TOPIC = "wire"
load_handlers()  # the ranges are read at collection time


def _versions(key: int) -> list[int]:
    spec = registered()[key]
    return list(range(spec.min_version, spec.max_version + 1))


@pytest.fixture(scope="module")
def wire(cluster):
    w = KafkaWire(cluster.bootstrap_servers)
    creq = API_BY_KEY[19].request
    w.call(19, 3, creq(topics=[creq.CreatableTopic(name=TOPIC, num_partitions=2,
                                                    replication_factor=1)], timeout_ms=5000))
    yield w
    w.close()


@pytest.mark.parametrize("version", _versions(18))
def test_api_versions(wire, version):
    req = API_BY_KEY[18].request(client_software_name="wire", client_software_version="1")
    resp = wire.call(18, version, req)
    assert resp.error_code == 0
    table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert table == {k: (s.min_version, s.max_version) for k, s in registered().items()}


@pytest.mark.parametrize("version", _versions(3))
def test_metadata(cluster, wire, version):
    cls = API_BY_KEY[3].request
    info = cluster.broker.metadata.topic(TOPIC)
    topic = cls.MetadataRequestTopic(name=TOPIC)
    if version >= 12:
        topic = cls.MetadataRequestTopic(name=None, topic_id=info.topic_id)
    resp = wire.call(3, version, cls(topics=[topic], allow_auto_topic_creation=False))
    (t,) = resp.topics
    assert t.error_code == 0 and t.name == TOPIC and len(t.partitions) == 2
    assert resp.controller_id == 1 and [b.node_id for b in resp.brokers] == [1]
    if version >= 10:
        assert t.topic_id == info.topic_id
    if version >= 7:
        assert t.partitions[0].leader_epoch == info.partitions[0].leader_epoch
    everything = wire.call(3, version, cls(topics=None))
    names = {x.name for x in everything.topics}
    assert TOPIC in names


@pytest.mark.parametrize("version", _versions(0))
def test_produce_then_fetch(cluster, wire, version):
    tag = f"v{version}"
    batch = encode_batch([Record(key=tag.encode(), value=b"value-" + tag.encode())])
    resp = wire.call(0, version, produce_request(TOPIC, 0, batch))
    pr = resp.responses[0].partition_responses[0]
    if version < 3:
        assert pr.error_code == ErrorCode.UNSUPPORTED_VERSION
        return
    assert pr.error_code == 0 and pr.base_offset >= 0
    p = cluster.broker.replica_manager.get(TOPIC, 0)
    data = p.log.read(pr.base_offset, 1 << 20).read_bytes()
    first = next(iter_batch_views(data))
    assert first.base_offset == pr.base_offset
    assert decode_batch(bytes(first.raw())).records[0].key == tag.encode()


@pytest.mark.parametrize("version", _versions(1))
def test_fetch(cluster, wire, version):
    batch = encode_batch([Record(key=b"f", value=b"fetch-me")])
    wire.call(0, 7, produce_request(TOPIC, 1, batch))
    cls = API_BY_KEY[1].request
    topic_id = cluster.broker.metadata.topic(TOPIC).topic_id
    req = cls(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
              session_id=0, session_epoch=-1, topics=[cls.FetchTopic(
                  topic=TOPIC, topic_id=topic_id, partitions=[
                  cls.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20,
                                     current_leader_epoch=0)])],
              forgotten_topics_data=[], rack_id="")
    resp = wire.call(1, version, req)
    part = resp.responses[0].partitions[0]
    plog = cluster.broker.replica_manager.get(TOPIC, 1).log
    assert part.error_code == 0 and part.high_watermark == plog.high_watermark
    assert part.last_stable_offset == plog.high_watermark
    assert part.aborted_transactions == []  # read_committed: present, empty
    assert bytes(part.records) == plog.read(0, 1 << 20).read_bytes()
    if version >= 13:
        assert resp.responses[0].topic_id == topic_id
        unknown = cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                      isolation_level=0, session_id=0, session_epoch=-1, topics=[cls.FetchTopic(
                          topic_id=b"\x01" * 16, partitions=[cls.FetchPartition(
                              partition=0, fetch_offset=0, partition_max_bytes=100)])],
                      forgotten_topics_data=[], rack_id="")
        uresp = wire.call(1, version, unknown)
        assert uresp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    if version >= 12:  # a fetcher whose last epoch ended earlier learns where it diverged
        name = f"wire-div-{version}"
        cluster.call(cluster.broker.create_topic, name, 1, 1)
        for i in range(2):  # epoch 0 holds offsets 0..4, epoch 1 holds 5..9
            wire.call(0, 7, produce_request(name, 0, encode_batch([Record(value=b"d")] * 5),
                                            acks=1))
            if i == 0:
                cluster.call(cluster.controller.change_leader, name, 0, 1)
        div = cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                  isolation_level=0, session_id=0, session_epoch=-1, topics=[cls.FetchTopic(
                      topic=name, topic_id=cluster.broker.metadata.topic(name).topic_id,
                      partitions=[cls.FetchPartition(partition=0, fetch_offset=8,
                                                     last_fetched_epoch=0,
                                                     partition_max_bytes=1000)])],
                  forgotten_topics_data=[], rack_id="")
        dp = wire.call(1, version, div).responses[0].partitions[0]
        assert dp.error_code == 0 and len(dp.records) == 0
        assert (dp.diverging_epoch.epoch, dp.diverging_epoch.end_offset) == (0, 5)


@pytest.mark.parametrize("version", _versions(2))
def test_list_offsets(cluster, wire, version):
    cls = API_BY_KEY[2].request
    specs = [-1, -2, 0] + ([-3] if version >= 7 else [])
    req = cls(replica_id=-1, isolation_level=0, topics=[cls.ListOffsetsTopic(name=TOPIC, partitions=[
        cls.ListOffsetsPartition(partition_index=0, timestamp=ts) for ts in specs])])
    resp = wire.call(2, version, req)
    got = [(p.error_code, p.offset) for p in resp.topics[0].partitions]
    hw = cluster.broker.replica_manager.get(TOPIC, 0).log.high_watermark
    assert got[0] == (0, hw) and got[1] == (0, 0)
    assert got[2][0] == 0


@pytest.mark.parametrize("version", _versions(19))
def test_create_and_delete_topics(cluster, wire, version):
    name = f"wire-ct-{version}"
    creq = API_BY_KEY[19].request
    resp = wire.call(19, version, creq(topics=[creq.CreatableTopic(
        name=name, num_partitions=3 if version < 4 else -1, replication_factor=1,
        configs=[creq.CreatableTopicConfig(name="retention.ms", value="5000")])], timeout_ms=5000))
    assert resp.topics[0].error_code == 0
    assert cluster.broker.metadata.topic(name).configs == {"retention.ms": "5000"}
    for dv in _versions(20):
        if dv == (version % 4) + 1:
            dresp = wire.call(20, dv, API_BY_KEY[20].request(topic_names=[name], timeout_ms=5000))
            assert dresp.responses[0].error_code == 0
            assert cluster.broker.metadata.topic(name) is None


@pytest.mark.parametrize("version", _versions(37))
def test_create_partitions(cluster, wire, version):
    name = f"wire-cp-{version}"
    cluster.call(cluster.broker.create_topic, name, 1, 1)
    cls = API_BY_KEY[37].request
    resp = wire.call(37, version, cls(topics=[cls.CreatePartitionsTopic(name=name, count=4,
                                                                        assignments=None)],
                                      timeout_ms=5000, validate_only=False))
    assert resp.results[0].error_code == 0
    assert len(cluster.broker.metadata.topic(name).partitions) == 4


@pytest.mark.parametrize("version", _versions(32))
def test_describe_configs(wire, version):
    cls = API_BY_KEY[32].request
    resp = wire.call(32, version, cls(resources=[
        cls.DescribeConfigsResource(resource_type=2, resource_name=TOPIC, configuration_keys=None),
        cls.DescribeConfigsResource(resource_type=4, resource_name="1",
                                    configuration_keys=["num.partitions"])],
        include_synonyms=True))
    topic_res, broker_res = resp.results
    assert topic_res.error_code == 0
    cfg = {c.name: c.value for c in topic_res.configs}
    assert cfg["cleanup.policy"] == "delete" and cfg["max.message.bytes"] == "1048588"
    assert [(c.name, c.value) for c in broker_res.configs] == [("num.partitions", "1")]


@pytest.mark.parametrize("version", _versions(33))
def test_alter_configs(cluster, wire, version):
    cls = API_BY_KEY[33].request
    value = str(1000 + version)
    resp = wire.call(33, version, cls(resources=[cls.AlterConfigsResource(
        resource_type=2, resource_name=TOPIC,
        configs=[cls.AlterableConfig(name="retention.bytes", value=value)])]))
    assert resp.responses[0].error_code == 0
    assert cluster.broker.metadata.topic(TOPIC).configs == {"retention.bytes": value}
    bad = wire.call(33, version, cls(resources=[cls.AlterConfigsResource(
        resource_type=2, resource_name=TOPIC,
        configs=[cls.AlterableConfig(name="retention.bytes", value="lots")])]))
    assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG


@pytest.mark.parametrize("version", _versions(44))
def test_incremental_alter_configs(cluster, wire, version):
    cls = API_BY_KEY[44].request
    name = f"wire-iac-{version}"
    cluster.call(cluster.broker.create_topic, name, 1, 1, {"retention.bytes": "5000"})

    def call(*ops, topic=name, validate_only=False):
        return wire.call(44, version, cls(validate_only=validate_only, resources=[
            cls.AlterConfigsResource(resource_type=2, resource_name=topic, configs=[
                cls.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])
        ])).responses[0]

    assert call(("segment.ms", 0, "60000"), ("cleanup.policy", 2, "compact")).error_code == 0
    assert cluster.broker.metadata.topic(name).configs == {
        "retention.bytes": "5000", "segment.ms": "60000", "cleanup.policy": "delete,compact"}
    assert call(("cleanup.policy", 3, "delete"), ("retention.bytes", 1, None)).error_code == 0
    assert cluster.broker.metadata.topic(name).configs == {
        "segment.ms": "60000", "cleanup.policy": "compact"}
    assert call(("segment.ms", 0, "1"), validate_only=True).error_code == 0
    assert cluster.broker.metadata.topic(name).configs["segment.ms"] == "60000"
    bad = call(("segment.ms", 2, "5"))
    assert (bad.error_code, bad.error_message) == (
        ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: segment.ms")
    dup = call(("segment.ms", 0, "5"), ("segment.ms", 1, None))
    assert dup.error_code == ErrorCode.INVALID_REQUEST
    assert call(("segment.ms", 0, "soon")).error_code == ErrorCode.INVALID_CONFIG
    assert call(("no.such.key", 0, "1")).error_code == ErrorCode.INVALID_CONFIG
    assert call(("segment.ms", 0, "5"), topic="wire-iac-none").error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.broker.metadata.topic(name).configs == {
        "segment.ms": "60000", "cleanup.policy": "compact"}


@pytest.mark.parametrize("version", _versions(21))
def test_delete_records(cluster, wire, version):
    name = f"wire-dr-{version}"
    cluster.call(cluster.broker.create_topic, name, 1, 1)
    batch = encode_batch([Record(value=b"%d" % i) for i in range(10)])
    wire.call(0, 7, produce_request(name, 0, batch, acks=1))
    dcls = API_BY_KEY[21].request
    resp = wire.call(21, version, dcls(topics=[dcls.DeleteRecordsTopic(name=name, partitions=[
        dcls.DeleteRecordsPartition(partition_index=0, offset=4)])], timeout_ms=1000))
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0 and p.low_watermark == 4
    too_far = wire.call(21, version, dcls(topics=[dcls.DeleteRecordsTopic(name=name, partitions=[
        dcls.DeleteRecordsPartition(partition_index=0, offset=99)])], timeout_ms=1000))
    assert too_far.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize("version", _versions(23))
def test_offset_for_leader_epoch(cluster, wire, version):
    name = f"wire-ofle-{version}"
    cluster.call(cluster.broker.create_topic, name, 1, 1)
    for _ in range(2):  # epoch 0: offsets 0..4, then the leader epoch moves to 1: 5..9
        batch = encode_batch([Record(value=b"x")] * 5)
        wire.call(0, 7, produce_request(name, 0, batch, acks=1))
        if _ == 0:
            cluster.call(cluster.controller.change_leader, name, 0, 1)
    cls = API_BY_KEY[23].request
    resp = wire.call(23, version, cls(replica_id=-1, topics=[cls.OffsetForLeaderTopic(
        topic=name, partitions=[cls.OffsetForLeaderPartition(partition=0, leader_epoch=0,
                                                             current_leader_epoch=1)])]))
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0 and p.end_offset == 5
    if version >= 1:
        assert p.leader_epoch == 0
    if version >= 2:  # a stale current epoch is fenced
        resp = wire.call(23, version, cls(replica_id=-1, topics=[cls.OffsetForLeaderTopic(
            topic=name, partitions=[cls.OffsetForLeaderPartition(partition=0, leader_epoch=0,
                                                                 current_leader_epoch=0)])]))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH


@pytest.mark.parametrize("version", _versions(22))
def test_init_producer_id(wire, version):
    cls = API_BY_KEY[22].request
    resp = wire.call(22, version, cls(transactional_id=None, transaction_timeout_ms=60000))
    assert resp.error_code == 0 and resp.producer_id >= 0 and resp.producer_epoch == 0
    again = wire.call(22, version, cls(transactional_id=None, transaction_timeout_ms=60000))
    assert again.producer_id != resp.producer_id
    # a transactional id gets its own producer id, and its epoch bumps on each init
    txn = wire.call(22, version, cls(transactional_id=f"tx-{version}",
                                     transaction_timeout_ms=60000))
    assert (txn.error_code, txn.producer_epoch) == (ErrorCode.NONE, 0)
    bumped = wire.call(22, version, cls(transactional_id=f"tx-{version}",
                                        transaction_timeout_ms=60000))
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (
        ErrorCode.NONE, txn.producer_id, 1)


@pytest.mark.parametrize("version", _versions(60))
def test_describe_cluster(cluster, wire, version):
    resp = wire.call(60, version, API_BY_KEY[60].request())
    assert resp.error_code == 0 and resp.cluster_id == cluster.broker.metadata.cluster_id
    assert [b.broker_id for b in resp.brokers] == [1] and resp.controller_id == 1


def test_consumer_offsets_is_internal(cluster, wire):
    cluster.call(cluster.broker.ensure_offsets_topic)
    plog = cluster.broker.replica_manager.get("__consumer_offsets", 3).log
    assert plog.config.compact  # compacted, as Kafka's
    cls = API_BY_KEY[3].request
    resp = wire.call(3, 5, cls(topics=None))
    internal = {t.name: t.is_internal for t in resp.topics}
    assert internal["__consumer_offsets"] is True and internal[TOPIC] is False
    # clients may not write to it
    batch = encode_batch([Record(value=b"x")])
    pr = wire.call(0, 7, produce_request("__consumer_offsets", 3, batch, acks=1))
    assert pr.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
