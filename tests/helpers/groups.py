"""Consumer-group pieces shared by the group integration tests: keyed produce with the
acknowledged ground truth, the exactly-once check, and group members driven by each real
client in its own thread/process.

A member records what it was delivered and every assignment it got; ``stop()`` joins it
and re-raises what failed inside it, so a test never passes over a member that crashed.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka as ck

from tests.helpers.kafka_clients import KCAT
from tests.helpers.polling import wait_until

# Fast groups: no 3 s initial delay, few offsets partitions (fast startup and replay).
GROUP_BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": "100",
    "offsets.topic.num.partitions": "5",
}


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """Produce keyed records ``k<i>``/``v<i>``; returns (partition, offset) -> (key, value)
    from the delivery reports, the ground truth consumers are checked against."""
    acked: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, on_delivery=on_delivery)
        if i % 250 == 249:
            # many small batches, so fetches interleave partitions and a member that is
            # slowed down has consumed part of every partition when the rebalance comes
            p.flush(30)
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    assert len(acked) == n
    return acked


def end_offsets(produced: dict[tuple[int, int], Any]) -> dict[int, int]:
    ends: dict[int, int] = defaultdict(int)
    for p, o in produced:
        ends[p] = max(ends[p], o + 1)
    return dict(ends)


def check_exactly_once(produced: dict[tuple[int, int], tuple[bytes, bytes]],
                       members: list[Member]) -> None:
    """Every produced record consumed once across members, right bytes, in order."""
    seen: dict[tuple[int, int], str] = {}
    for m in members:
        last: dict[int, int] = {}
        for p, o, k, v in m.records:
            assert (p, o) not in seen, f"{m.name}: duplicate {p}/{o} (also by {seen[(p, o)]})"
            seen[(p, o)] = m.name
            assert (p, o) in produced, f"{m.name}: unknown record {p}/{o}"
            assert produced[(p, o)] == (k, v), f"{m.name}: wrong bytes at {p}/{o}"
            assert o > last.get(p, -1), f"{m.name}: partition {p} went back {last[p]} -> {o}"
            last[p] = o
    missing = set(produced) - set(seen)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}"


# --------------------------------------------------------------------------- members


@dataclass
class Member:
    """One group member; ``records`` are (partition, offset, key, value) as delivered."""

    name: str
    bootstrap: str
    group: str
    topic: str
    instance: str | None = None  # group.instance.id (static membership)
    strategy: str | None = None  # assignor: range, roundrobin, cooperative-sticky
    throttle: threading.Event = field(default_factory=threading.Event)
    records: list[tuple[int, int, bytes, bytes]] = field(default_factory=list)
    assignments: list[set[int]] = field(default_factory=list)
    commit_errors: list[str] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def assigned(self) -> set[int]:
        return self.assignments[-1] if self.assignments else set()

    def start(self) -> Member:
        self._thread = threading.Thread(target=self._guarded, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)
            assert not self._thread.is_alive(), f"{self.name} did not stop"
        assert not self.errors, f"{self.name} failed: {self.errors[0]!r}"

    def _guarded(self) -> None:
        try:
            self.run()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.errors.append(e)

    @property
    def cooperative(self) -> bool:
        return self.strategy == "cooperative-sticky"

    def on_assigned(self, parts: set[int]) -> None:
        """Record the member's assignment after an assign callback (incremental when
        cooperative: the callback carries only the added partitions)."""
        self.assignments.append((self.assigned | parts) if self.cooperative else set(parts))

    def on_revoked(self, parts: set[int]) -> None:
        self.assignments.append((self.assigned - parts) if self.cooperative else set())

    def take(self, fetched: Mapping[Any, list[Any]]) -> int:
        """Record a kafka-python/aiokafka poll result ({partition: [records]}); how many."""
        n = 0
        for recs in fetched.values():
            for r in recs:
                self.records.append((r.partition, r.offset, r.key, r.value))
                n += 1
        return n

    def pause(self) -> None:
        # Throttled members consume slowly so the other member joins mid-stream.
        if self.throttle.is_set():
            time.sleep(0.05)

    def run(self) -> None:
        raise NotImplementedError


class ConfluentMember(Member):
    def run(self) -> None:
        c = ck.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "client.id": self.name, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
            "max.poll.interval.ms": 30000, "fetch.message.max.bytes": 1024,
            **({"group.instance.id": self.instance} if self.instance else {}),
            **({"partition.assignment.strategy": self.strategy} if self.strategy else {}),
        })

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            self.on_assigned({p.partition for p in parts})

        def on_revoke(consumer: Any, parts: list[Any]) -> None:
            self._commit(consumer)
            self.on_revoked({p.partition for p in parts})

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stop_event.is_set():
                msgs = c.consume(50, 0.1)
                good = [m for m in msgs if m.error() is None]
                for m in good:
                    self.records.append((m.partition(), m.offset(), m.key(), m.value()))
                if good:
                    self._commit(c)
                self.pause()
        finally:
            c.close()

    def _commit(self, c: Any) -> None:
        try:
            c.commit(asynchronous=False)
        except ck.KafkaException as e:
            if e.args[0].code() != ck.KafkaError._NO_OFFSET:
                self.commit_errors.append(str(e))


class KafkaPythonMember(Member):
    def run(self) -> None:
        from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.errors import CommitFailedError, KafkaError

        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                     "cooperative-sticky": CooperativeStickyAssignor}
        extra = ({"partition_assignment_strategy": [assignors[n] for n in self.strategy.split(",")]}
                 if self.strategy else {})
        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=50,
            session_timeout_ms=10000, heartbeat_interval_ms=300, max_poll_interval_ms=30000,
            max_partition_fetch_bytes=1024, group_instance_id=self.instance, **extra,
        )
        member = self

        def commit() -> None:
            try:
                c.commit()
            except (CommitFailedError, KafkaError) as e:
                member.commit_errors.append(repr(e))

        class Listener(AsyncConsumerRebalanceListener):
            # kafka-python 3 runs listeners on its IO loop: commit with the awaitable
            # variant there (a blocking commit() would deadlock).
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked:
                    try:
                        await c.commit_async()
                    except (CommitFailedError, KafkaError) as e:
                        member.commit_errors.append(repr(e))
                member.on_revoked({tp.partition for tp in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member.on_assigned({tp.partition for tp in assigned})

        c.subscribe([self.topic], listener=Listener())
        try:
            while not self.stop_event.is_set():
                if self.take(c.poll(timeout_ms=100)):
                    commit()
                self.pause()
        finally:
            c.close()


class AiokafkaMember(Member):
    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.errors import CommitFailedError, KafkaError

        c = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=50,
            session_timeout_ms=10000, heartbeat_interval_ms=300, max_poll_interval_ms=30000,
            max_partition_fetch_bytes=1024,
        )
        member = self

        async def commit() -> None:
            try:
                await c.commit()
            except (CommitFailedError, KafkaError) as e:
                member.commit_errors.append(repr(e))

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked:
                    await commit()
                member.on_revoked({tp.partition for tp in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member.on_assigned({tp.partition for tp in assigned})

        await c.start()
        c.subscribe([self.topic], listener=Listener())
        try:
            while not self.stop_event.is_set():
                if self.take(await c.getmany(timeout_ms=100)):
                    await commit()
                if self.throttle.is_set():
                    await asyncio.sleep(0.05)
        finally:
            await c.stop()


class KcatMember(Member):
    """``kcat -G`` balanced consumer (librdkafka auto-commit); stopped with SIGTERM."""

    proc: subprocess.Popen[bytes] | None = None
    stderr_lines: list[str]

    def run(self) -> None:
        self.stderr_lines = []
        self.proc = subprocess.Popen(
            [KCAT, "-b", self.bootstrap, "-G", self.group, self.topic, "-u",
             "-f", "%p %o %k %s\n",
             "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100",
             "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=300",
             "-X", f"client.id={self.name}", "-X", "max.poll.interval.ms=30000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        err_thread.start()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        try:
            for line in self.proc.stdout:
                p, o, k, v = line.rstrip(b"\n").split(b" ", 3)
                self.records.append((int(p), int(o), k, v))
            self.proc.wait(30)
        finally:
            err_thread.join(5)
            self.proc.stdout.close()
            self.proc.stderr.close()

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.stderr_lines.append(line)
            # "% Group g rebalanced (memberid ...): assigned: t [0], t [1]"
            if "assigned:" in line:
                parts = line.split("assigned:", 1)[1]
                self.assignments.append({int(x.split("]")[0]) for x in parts.split("[")[1:]})
            elif "revoked:" in line:
                self.assignments.append(set())

    def stop(self, timeout: float = 30.0) -> None:
        wait_until(lambda: self.proc is not None, 10, interval=0.01)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # kcat closes the consumer: commit + LeaveGroup
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # never left running; stop() then reports the failure
        super().stop(timeout)


MEMBER_CLASSES: dict[str, type[Member]] = {
    "confluent": ConfluentMember,
    "kafka-python": KafkaPythonMember,
    "aiokafka": AiokafkaMember,
    "kcat": KcatMember,
}
