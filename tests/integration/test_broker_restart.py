"""``sparklog server`` restarts: acknowledged data, topics, configs and committed offsets
survive a graceful stop (SIGTERM) and a crash (SIGKILL)."""

from __future__ import annotations

import subprocess

from tests.helpers.kafka_clients import (
    KCAT,
    ck_consume,
    ck_produce,
    commit_offsets,
    committed_offsets,
    comparable,
    create_topic,
    make_messages,
)


def test_graceful_restart_keeps_everything(server_factory, tmp_path):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    srv = server_factory(tmp_path / "data").start()
    bs = srv.bootstrap_servers
    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic("durable", 3, 1, config={"retention.ms": "86400000"})])["durable"].result(20)
    msgs = make_messages(3000, 3, headers=True, tag="durable")
    ck_produce(bs, "durable", msgs)
    commit_offsets(bs, "g-restart", "durable", {0: 10, 1: 20, 2: 30})
    assert srv.stop() == 0  # clean exit on SIGTERM

    srv2 = server_factory(tmp_path / "data", port=srv.port).start()
    bs = srv2.bootstrap_servers
    got = ck_consume(bs, "durable", 3, len(msgs))
    assert comparable(got) == comparable(msgs)
    a = AdminClient({"bootstrap.servers": bs})
    md = a.list_topics(timeout=10)
    assert len(md.topics["durable"].partitions) == 3
    cfg = list(a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "durable")])
               .values())[0].result(20)
    assert cfg["retention.ms"].value == "86400000"
    assert committed_offsets(bs, "g-restart", "durable", range(3)) == {0: 10, 1: 20, 2: 30}
    # appends continue after the recovered end
    more = make_messages(30, 3, tag="more")
    ck_produce(bs, "durable", more)
    got = ck_consume(bs, "durable", 3, len(msgs) + len(more))
    assert len(got) == len(msgs) + len(more)
    out = subprocess.run([KCAT, "-b", bs, "-L", "-t", "durable"], capture_output=True,
                         timeout=30, check=True).stdout.decode()
    assert 'topic "durable" with 3 partitions' in out
    assert srv2.stop() == 0


def test_crash_keeps_acknowledged_data(server_factory, tmp_path):
    srv = server_factory(tmp_path / "data").start()
    bs = srv.bootstrap_servers
    msgs = make_messages(2000, 2, tag="crash")
    create_topic(bs, "crashy", 2)
    ck_produce(bs, "crashy", msgs)  # acks=all: every record acknowledged
    srv.kill()  # SIGKILL: no flush, no checkpoints, no clean-shutdown marker

    srv2 = server_factory(tmp_path / "data", port=srv.port).start()
    got = ck_consume(srv2.bootstrap_servers, "crashy", 2, len(msgs))
    assert comparable(got) == comparable(msgs)
    assert srv2.stop() == 0


def test_lost_metadata_refuses_to_start_and_keeps_data(tmp_path):
    """Partition logs whose cluster metadata is gone are never taken for strays and deleted:
    the new cluster id does not match meta.properties, so the broker refuses to start."""
    import shutil

    import pytest

    from sparklog.cluster.embedded import EmbeddedCluster
    from sparklog.controller.metadata import METADATA_DIR_NAME

    with EmbeddedCluster(tmp_path) as c:
        c.call(c.broker.create_topic, "precious", 1, 1)
    shutil.rmtree(tmp_path / METADATA_DIR_NAME)
    with pytest.raises(RuntimeError) as exc:
        EmbeddedCluster(tmp_path).start()
    assert "cluster.id" in repr(exc.value.__cause__)
    assert (tmp_path / "precious-0").is_dir()
