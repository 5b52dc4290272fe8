"""A failing object store, through a real ``sparklog server`` and real Kafka clients: the
issue's promise that store failures (timeouts, 5xx, throttling, partial uploads) are retried
with backoff and never block produce, that a fetch which cannot reach the store gets a
retriable error and a log line, and that nothing is lost and nothing half-uploaded is ever
served.

The broker runs under ``tests.helpers.faulty_store_server``, which only teaches fsspec the
``faulty://`` protocol: its tier is a ``FaultyStore`` over the real store (a ``file://``
directory, or moto's S3 server), and the test changes the faults of the running broker
through a control file (``FaultSwitch``). Nothing of the broker is mocked; the wrapper only
fails, delays, cuts off or holds the calls the tier makes. (Through the wrapper the broker
takes its path for stores without a conditional write or an atomic rename, and reads
``file://`` objects through its chunk cache, as it does S3's: the fault handling is the same
code for every store.)

- Under random faults (a quarter of calls fail, a fifth are slowed, a tenth of uploads store
  half the file and then fail or claim success), every record produced with acks=all is
  acknowledged, every sealed segment ends up uploaded and dropped locally, the bucket then
  holds only what the manifests list (each object whole) besides the manifests, and
  confluent-kafka and kcat, reading from offset 0 while the faults go on, get every
  acknowledged record exactly once and in order.
- A store that stops answering holds up none of produce, and a fetch from the bucket then
  gets no records and no error after ``remote.fetch.max.wait.ms`` without the broker
  starting a read per retry; one that cannot be reached answers a fetch from the bucket
  with KAFKA_STORAGE_ERROR (retriable) and a line in the broker's log, while produce and fetches of the local tail go on and no segment leaves the local
  disk before it is uploaded; once the store is back, everything is uploaded and a consumer
  from offset 0 gets every record.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import pytest

from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.records import decode_batches
from tests.helpers.kafka_clients import (
    Msg,
    ck_consume,
    ck_produce,
    create_topic,
    kcat_consume,
    make_messages,
)
from tests.helpers.object_store import FaultSwitch
from tests.helpers.polling import wait_for
from tests.helpers.requests import fetch_request
from tests.helpers.servers import ServerProcess
from tests.helpers.wire import KafkaWire
from tests.integration.test_tiered_storage import SMALL_BATCHES, TOPIC_CONFIGS

LAUNCHER = "tests.helpers.faulty_store_server"
MANIFEST = "manifest.json"
CLEAN = {"lost": 0, "duplicated": 0, "reordered": 0, "misplaced": 0, "changed": 0,
         "unknown": 0}


@dataclass
class FaultyBucket:
    """The real store under a broker's faulty tier: ``fs`` and ``root`` look into it,
    ``settings`` are the ``sparklog server`` flags of the tier, ``switch`` its faults."""

    fs: fsspec.AbstractFileSystem
    root: str
    settings: list[str]
    switch: FaultSwitch

    def partition_dir(self, topic: str, partition: int) -> str | None:
        self.fs.invalidate_cache()  # s3fs keeps listings: the broker changed the bucket
        dirs = [p for p in self.fs.find(self.root)
                if p[len(self.root) + 1:].startswith(f"{topic}-")]
        return f"{dirs[0].rsplit('/', 2)[0]}/{partition}" if dirs else None

    def manifest(self, directory: str) -> dict[str, Any] | None:
        """None while there is none, or while it is being rewritten (through the wrapper a
        ``file://`` manifest is rewritten in place, not renamed over)."""
        try:
            return json.loads(self.fs.cat_file(f"{directory}/{MANIFEST}"))
        except (FileNotFoundError, ValueError):
            return None

    def objects(self, directory: str) -> dict[str, int]:
        """Name -> size of every object in ``directory``."""
        self.fs.invalidate_cache()
        found = self.fs.find(directory, detail=True)
        return {path.rsplit("/", 1)[-1]: int(info["size"]) for path, info in found.items()}


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FaultyBucket:
    switch = FaultSwitch(tmp_path / "faults.json")  # no file yet: a healthy store
    if request.param == "file":
        root = tmp_path / "bucket"
        root.mkdir()
        fs, path, options = fsspec.filesystem("file"), str(root), {"target_protocol": "file"}
    else:
        moto = request.getfixturevalue("moto_s3")
        name = f"b-{uuid.uuid4().hex[:12]}"
        moto.create_bucket(name)
        fs, path = moto.filesystem(), f"{name}/tier"
        options = {"target_protocol": "s3", **moto.options}
    options["control_file"] = str(switch.path)
    settings = ["--set", "remote.log.storage.system.enable=true",
                "--set", "remote.log.manager.task.interval.ms=200",
                "--set", f"remote.log.storage.url=faulty://{path}"]
    for key, value in options.items():
        settings += ["--set", f"remote.log.storage.options.{key}={value}"]
    return FaultyBucket(fs, path, settings, switch)


def _start(server_factory: Callable[..., ServerProcess], data: Path,
           store: FaultyBucket, *settings: str) -> ServerProcess:
    """A broker on the faulty store; ``settings``: more ``key=value`` broker configs."""
    extra = store.settings + [a for kv in settings for a in ("--set", kv)]
    return server_factory(data, extra=extra, module=LAUNCHER).start()


def _threads(srv: ServerProcess) -> int:
    """Threads of the broker's process now."""
    assert srv.proc is not None
    status = Path(f"/proc/{srv.proc.pid}/status").read_text()
    return int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))


def _local_logs(data: Path, topic: str, partition: int) -> list[Path]:
    return sorted((data / f"{topic}-{partition}").glob("*.log"))


def _listed(manifest: dict[str, Any]) -> dict[str, int]:
    """Name -> size of every object the manifest lists."""
    return {f"{s['base_offset']:020d}-{s['segment_id']}{suffix}": size
            for s in manifest["segments"] for suffix, size in s["files"].items()}


def _settled(store: FaultyBucket, data: Path, topic: str, partition: int) -> bool:
    """Every sealed segment uploaded and gone locally, and the bucket holds nothing the
    manifest does not list; fails at once if a listed object is ever missing or short."""
    directory = store.partition_dir(topic, partition)
    m = store.manifest(directory) if directory else None
    if m is None or not m["segments"]:
        return False
    # the manifest is read first: whatever it lists was whole before, and must be now
    objects = store.objects(directory)
    listed = _listed(m)
    short = {n: (size, objects.get(n)) for n, size in listed.items() if objects.get(n) != size}
    assert not short, f"{topic}-{partition}: listed objects missing or not whole: {short}"
    unlisted = set(objects) - set(listed) - {MANIFEST}
    local = _local_logs(data, topic, partition)
    return (not unlisted and len(local) == 1
            and int(local[0].name[:20]) == m["segments"][-1]["end_offset"])


def _audit(sent: list[Msg], got: list[Msg], start: int = 0) -> dict[str, int]:
    """How what a consumer read from offset ``start`` differs from what was acknowledged
    (``sent``: each partition's records from ``start`` on): records never read (lost), read
    again (duplicated), read before one acknowledged before them in their partition
    (reordered), at another offset than their place in their partition (misplaced), with
    other content (changed), or never sent (unknown)."""
    want = {m.key: m for m in sent}
    place: dict[bytes | None, int] = {}
    per_partition: Counter[int] = Counter()
    for m in sent:
        place[m.key] = start + per_partition[m.partition]
        per_partition[m.partition] += 1
    seen = Counter(m.key for m in got)
    reordered = 0
    last: dict[int, int] = {}
    for m in got:
        if m.key in place:
            if place[m.key] < last.get(m.partition, -1):
                reordered += 1
            last[m.partition] = max(place[m.key], last.get(m.partition, -1))

    def content(m: Msg) -> tuple[Any, ...]:
        return m.partition, m.value, m.timestamp, tuple(m.headers)

    return {
        "lost": sum(1 for k in want if k not in seen),
        "duplicated": sum(n - 1 for n in seen.values()),
        "reordered": reordered,
        "misplaced": sum(1 for m in got if m.key in place and m.offset != place[m.key]),
        "changed": sum(1 for m in got if m.key in want and content(m) != content(want[m.key])),
        "unknown": sum(n for k, n in seen.items() if k not in want),
    }


def _fetch(w: KafkaWire, topic: str, offset: int) -> Any:
    """One Fetch of partition 0 at ``offset``: its partition response."""
    return w.call(1, 11, fetch_request(topic, [(0, offset)])).responses[0].partitions[0]


def test_store_faults_never_block_produce_and_lose_nothing(server_factory, tmp_path, store):
    data = tmp_path / "data"
    srv = _start(server_factory, data, store)
    bs = srv.bootstrap_servers
    create_topic(bs, "flaky", 2, 1, TOPIC_CONFIGS)
    # faults from now on (the broker's start creates the tier's root once, unretried)
    store.switch.set(fail_rate=0.25, delay_rate=0.2, delay_s=0.02, partial_rate=0.1)
    sent = make_messages(3000, 2, tag="flaky")
    ck_produce(bs, "flaky", sent, **SMALL_BATCHES)  # every record acked, no delivery error
    for p in range(2):
        wait_for(lambda p=p: _settled(store, data, "flaky", p), 45,
                 f"flaky-{p} uploaded, dropped locally, and no unlisted object left")
    state = store.switch.state()
    assert state["failures"] > 0 and state["partials"] > 0, state  # the faults did happen
    # consumers read from the bucket while the store still fails
    assert _audit(sent, ck_consume(bs, "flaky", 2, len(sent))) == CLEAN
    assert _audit(sent, kcat_consume(bs, "flaky", 2, 0)) == CLEAN
    assert srv.stop() == 0


def test_an_unreachable_store_fails_fetches_retriably_and_blocks_nothing(
        server_factory, tmp_path, store, kafka_wire):
    data = tmp_path / "data"
    # two bucket reads at a time: one running, one waiting for the thread
    srv = _start(server_factory, data, store, "remote.log.reader.threads=1",
                 "remote.log.reader.max.pending.tasks=1")
    bs = srv.bootstrap_servers
    create_topic(bs, "outage", 1, 1, TOPIC_CONFIGS)
    before = make_messages(1500, 1, tag="before")
    ck_produce(bs, "outage", before, **SMALL_BATCHES)
    wait_for(lambda: _settled(store, data, "outage", 0), 30, "outage-0 tiered")
    uploaded_to = int(_local_logs(data, "outage", 0)[0].name[:20])

    # a store that stops answering: the tier's calls hang, produce does not
    store.switch.set(hang=True)
    wait_for(lambda: store.switch.state().get("waiting", 0) > 0, 10,
             "the tier to hang in a store call")
    hung = make_messages(800, 1, tag="hung")
    t0 = time.monotonic()
    ck_produce(bs, "outage", hung, **SMALL_BATCHES)
    # the store hangs for as long as the test lets it: a produce waiting on it would never
    # end; the bound is only for a slow machine
    assert time.monotonic() - t0 < 30
    local = _local_logs(data, "outage", 0)
    assert len(local) > 1 and int(local[0].name[:20]) == uploaded_to  # kept until uploaded

    # a fetch from the bucket while the store hangs is answered once remote.fetch.max.wait.ms
    # (500 ms) has passed, with no records and no error (KIP-1018), and fetching again
    # starts no second read: the broker's threads do not grow with a client's retries
    w = kafka_wire(bs)
    threads = []
    for _ in range(5):
        t0 = time.monotonic()
        part = _fetch(w, "outage", 0)
        assert 0.4 < time.monotonic() - t0 < 10  # the bound is only for a slow machine
        assert part.error_code == 0 and not part.records
        assert part.high_watermark == len(before) + len(hung)
        threads.append(_threads(srv))
    assert threads[1:] == threads[:-1], threads
    # a read at another offset waits for the one thread; a third is refused a place
    # (remote.log.reader.max.pending.tasks) and answered KAFKA_STORAGE_ERROR at once
    assert _fetch(w, "outage", 1).error_code == 0
    t0 = time.monotonic()
    refused = _fetch(w, "outage", 2)
    assert ErrorCode(refused.error_code) is ErrorCode.KAFKA_STORAGE_ERROR
    assert time.monotonic() - t0 < 0.4 and not refused.records
    # ... while the local tail is served at once
    t0 = time.monotonic()
    assert decode_batches(bytes(_fetch(w, "outage", uploaded_to).records))
    assert time.monotonic() - t0 < 5

    # a store that cannot be reached: every call times out after 100 ms; once the read under
    # way gives up, the fetch gets KAFKA_STORAGE_ERROR (before: no records, no error)
    store.switch.set(fail_rate=1.0, delay_rate=1.0, delay_s=0.1)
    answers = []

    def failed() -> bool:
        answers.append(_fetch(w, "outage", 0))
        return answers[-1].error_code != 0

    wait_for(failed, 30, "a fetch from the unreachable store to fail")
    assert all(not a.records for a in answers)
    error = ErrorCode(answers[-1].error_code)
    assert error is ErrorCode.KAFKA_STORAGE_ERROR and error.retriable, error
    assert answers[-1].high_watermark == len(before) + len(hung)
    line = re.compile(rb"INFO \S+: fetch outage-0 from \S+: .*remote storage")
    wait_for(lambda: line.search(srv.log_path.read_bytes()), 10,
             "the broker to log the failed fetch")
    # ... and the broker goes on: the local tail is served, produce is acknowledged
    tail = _fetch(w, "outage", uploaded_to)
    assert tail.error_code == 0
    assert decode_batches(bytes(tail.records))[0].base_offset == uploaded_to
    tail_sent = (before + hung)[uploaded_to:]  # one partition: a record's offset is its index
    got = ck_consume(bs, "outage", 1, len(tail_sent), start=uploaded_to)
    assert _audit(tail_sent, got, start=uploaded_to) == CLEAN
    during = make_messages(300, 1, tag="during")
    ck_produce(bs, "outage", during, **SMALL_BATCHES)
    assert int(_local_logs(data, "outage", 0)[0].name[:20]) == uploaded_to

    store.switch.set()  # the store is back
    wait_for(lambda: _settled(store, data, "outage", 0), 30,
             "outage-0 uploaded once the store is back")
    sent = before + hung + during
    assert _audit(sent, ck_consume(bs, "outage", 1, len(sent))) == CLEAN
    assert _audit(sent, kcat_consume(bs, "outage", 1, 0)) == CLEAN
    assert srv.stop() == 0
