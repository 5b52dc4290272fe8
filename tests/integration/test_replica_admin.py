"""ElectLeaders and partition reassignment on the single node with Kafka's own admin
clients and the CLI: the only replica already leads, so every partition is
ELECTION_NOT_NEEDED; a reassignment to the replicas a partition has is done at once, one to
an unknown broker is INVALID_REPLICA_ASSIGNMENT, cancelling nothing is
NO_REASSIGNMENT_IN_PROGRESS; the answers' shapes are Kafka's (confluent-kafka and
kafka-python parse them)."""

from __future__ import annotations

from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.error import KafkaError as CkKafkaError

from tests.helpers.cli import ok, one_error, run
from tests.helpers.kafka_clients import create_topic


def test_confluent_elect_leaders(cluster):
    bs = cluster.bootstrap_servers
    create_topic(bs, "elect-ck", partitions=2)
    admin = AdminClient({"bootstrap.servers": bs})
    res = admin.elect_leaders(ElectionType.PREFERRED, [
        CkTopicPartition("elect-ck", 0), CkTopicPartition("elect-ck", 7)]).result(30)
    got = {(tp.topic, tp.partition): e.code() for tp, e in res.items()}
    assert got == {("elect-ck", 0): CkKafkaError.ELECTION_NOT_NEEDED,
                   ("elect-ck", 7): CkKafkaError.UNKNOWN_TOPIC_OR_PART}


def test_kafka_python_elect_leaders(cluster):
    from kafka import KafkaAdminClient

    bs = cluster.bootstrap_servers
    create_topic(bs, "elect-kp", partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        resp = admin.elect_leaders(1, {"elect-kp": [0, 1]}, raise_errors=False)
    finally:
        admin.close()
    codes = sorted((p.partition_id, p.error_code) for t in resp.replica_election_results
                   for p in t.partition_result)
    assert codes == [(0, 84), (1, 84)]  # ELECTION_NOT_NEEDED: they have a leader


def test_cli_elect_leaders(cluster):
    bs = cluster.bootstrap_servers
    create_topic(bs, "elect-cli", partitions=2)
    out = ok(run("topics", "elect-leaders", "--topic", "elect-cli", "--bootstrap-server", bs))
    assert out == "Valid replica already elected for partitions elect-cli-0, elect-cli-1\n"
    out = ok(run("topics", "elect-leaders", "--all-topic-partitions", "--bootstrap-server", bs))
    assert out == "No partition needed a leader election (PREFERRED)\n"


def test_kafka_python_reassignments(cluster):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    bs = cluster.bootstrap_servers
    create_topic(bs, "move-kp", partitions=2)
    node = cluster.broker.node_id
    tp0, tp1 = KpTopicPartition("move-kp", 0), KpTopicPartition("move-kp", 1)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        res = admin.alter_partition_reassignments({tp0: [node], tp1: [node + 100]})
        assert res[tp0] is None
        assert res[tp1] is InvalidReplicationAssignmentError
        assert admin.alter_partition_reassignments({tp0: None})[tp0] \
            is NoReassignmentInProgressError
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()


def test_cli_reassign(cluster):
    bs = cluster.bootstrap_servers
    create_topic(bs, "move-cli", partitions=1)
    node = cluster.broker.node_id
    out = ok(run("topics", "reassign", "--topic", "move-cli", "--partition", "0",
                 "--replicas", str(node), "--bootstrap-server", bs))
    assert out == "Successfully started partition reassignment for move-cli-0\n"
    assert ok(run("topics", "reassign", "--list", "--bootstrap-server", bs)) \
        == "No partition reassignments found.\n"
    err = one_error(run("topics", "reassign", "--topic", "move-cli", "--partition", "0",
                        "--replicas", f"{node},{node + 7}", "--bootstrap-server", bs))
    assert "Error reassigning partition move-cli-0" in err and "unknown broker ids" in err
