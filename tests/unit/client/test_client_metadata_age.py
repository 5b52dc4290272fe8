"""The client's metadata cache ages by ``time.monotonic()``, which counts from boot: a
cache that was never filled, or was invalidated after a dead leader, must be stale however
short the machine has been up (it read 0.0 as "updated at boot", so on a machine up for
less than metadata.max.age.ms a client kept asking a dead leader until request.timeout.ms:
CI's fresh machines failed the leader-kill tests that way)."""

import time

import pytest

from sparklog.client.core import AsyncClient
from sparklog.protocol.messages.metadata import MetadataResponse


@pytest.mark.parametrize("uptime_s", [1.0, 60.0, 100_000.0])
def test_a_new_or_invalidated_cache_is_stale_whatever_the_uptime(monkeypatch, uptime_s):
    monkeypatch.setattr(time, "monotonic", lambda: uptime_s)
    client = AsyncClient({"bootstrap.servers": "127.0.0.1:9"})
    assert not client._fresh()
    client.metadata.update(MetadataResponse(brokers=[], topics=[]), full=True)
    assert client._fresh()
    client.invalidate()
    assert not client._fresh()
