"""The Spark-hosted cluster's bootstrap address (``BootstrapProxy``) in front of a real
broker: Kafka clients bootstrap through it and then talk to the broker it names; a broker
that refuses connections is skipped; with no broker the client's connection is closed."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from sparklog.client.admin import AdminClient
from sparklog.cluster.bootstrap_proxy import BootstrapProxy
from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.kafka_clients import ck_consume, ck_produce, create_topic, make_messages
from tests.helpers.net import free_port

pytestmark = pytest.mark.timeout(60)


class RunningProxy:
    """A ``BootstrapProxy`` on its own event loop thread, as the driver application runs it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = BootstrapProxy("127.0.0.1", 0)
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def broker(tmp_path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path / "data") as cluster:
        yield cluster


@pytest.fixture
def proxy() -> Iterator[RunningProxy]:
    running = RunningProxy()
    try:
        yield running
    finally:
        running.close()


def _port(bootstrap: str) -> int:
    return int(bootstrap.rsplit(":", 1)[1])


def test_clients_bootstrap_through_it_and_reach_the_broker_it_names(broker, proxy):
    proxy.proxy.brokers = [("127.0.0.1", free_port()),  # refuses: skipped
                           ("127.0.0.1", _port(broker.bootstrap_servers))]
    with AdminClient({"bootstrap.servers": proxy.address}) as admin:
        desc = admin.describe_cluster()
    assert [(b.host, b.port) for b in desc.brokers] == [
        ("127.0.0.1", _port(broker.bootstrap_servers))]
    create_topic(proxy.address, "through-proxy", partitions=3)
    msgs = make_messages(30, 3)
    ck_produce(proxy.address, "through-proxy", msgs)
    got = ck_consume(proxy.address, "through-proxy", 3, len(msgs))
    assert sorted(m.value for m in got) == sorted(m.value for m in msgs)


def test_without_a_live_broker_the_connection_is_closed(proxy):
    proxy.proxy.brokers = [("127.0.0.1", free_port())]
    with socket.create_connection(("127.0.0.1", proxy.proxy.port), timeout=10) as sock:
        assert sock.recv(1) == b""
