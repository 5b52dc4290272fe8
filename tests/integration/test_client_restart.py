"""sparklog's producer and consumer ride through a broker restart: queued records are
retried after the connection drops, the idempotent producer leaves no duplicates, and a
consumer picks up where it was."""

from __future__ import annotations

import threading
import time

from sparklog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from tests.helpers.polling import collect


def test_producer_and_consumer_survive_broker_restart(server_factory):
    srv = server_factory().start()
    bs = srv.bootstrap_servers
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic("restart", 2)])
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "retry.backoff.ms": 50,
                  "request.timeout.ms": 5000})
    for i in range(1000):
        p.produce("restart", f"a{i}".encode(), key=str(i).encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "request.timeout.ms": 5000,
                  "retry.backoff.ms": 50})
    tps = [TopicPartition("restart", 0), TopicPartition("restart", 1)]
    c.assign(tps)
    c.seek_to_beginning()
    seen = collect(lambda: c.consume(500, 0.5), 1000, 30)
    assert len(seen) == 1000

    srv.stop()
    # records produced while the broker is down wait in the accumulator and are retried
    sent = threading.Event()

    def produce_more() -> None:
        for i in range(500):
            p.produce("restart", f"b{i}".encode(), key=str(i).encode())
        sent.set()

    t = threading.Thread(target=produce_more)
    t.start()
    time.sleep(1.0)
    srv2 = server_factory(data_dir=srv.data_dir, port=srv.port).start()
    t.join(30)
    assert sent.is_set()
    assert p.flush(60) == 0
    p.close()
    seen += collect(lambda: c.consume(500, 0.5), 1500 - len(seen), 60)
    c.close()
    values = [r.value for r in seen]
    assert len(values) == 1500 and len(set(values)) == 1500  # nothing lost, no duplicates
    assert {r.value for r in seen} >= {f"b{i}".encode() for i in range(500)}
    srv2.stop()
