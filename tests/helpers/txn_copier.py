"""A transactional copier, run as its own process so a test can SIGKILL it mid-work:
read ``src`` (read_committed, group ``group``), write each record to the same partition of
``dst`` and commit the consumed offsets in the same transaction (confluent-kafka), until
killed. Prints ``committed <n>`` after each transaction (flushed), so the test can wait
for progress, and pauses ``PAUSE_S`` after each, so a test that kills it after some progress
finds it mid-stream (unpaused, a copier copied the whole source while a loaded test process
was still noticing its first 200 records, and the next copier had nothing left to copy).
``Copier`` runs one from a test.

    python -m tests.helpers.txn_copier BOOTSTRAP SRC DST GROUP TRANSACTIONAL_ID [PAUSE_S]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

from tests.helpers.servers import REPO

BATCH = 50


def main(bootstrap: str, src: str, dst: str, group: str, txn_id: str,
         pause_s: str = "0") -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "session.timeout.ms": 6000})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                  "transaction.timeout.ms": 10000})
    p.init_transactions(30)
    print("initialized", flush=True)  # a stalled copier's log says which step it is in
    c.subscribe([src], on_assign=lambda _c, ps: print(
        "assigned", sorted(tp.partition for tp in ps), flush=True))
    total = 0
    while True:
        msgs = [m for m in c.consume(BATCH, 0.5) if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, key=m.key(), value=m.value(), partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()),
                                      c.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        total += len(msgs)
        print(f"committed {total}", flush=True)
        time.sleep(float(pause_s))


class Copier:
    """One copier process copying ``copy-a`` to ``copy-b`` (group ``copier-group``,
    transactional id ``copier``); its output goes to ``<out>-<instance>.log``."""

    def __init__(self, bs: str, out: Path, instance: int, pause_s: float = 0.0) -> None:
        # .log: a failed cluster test's report ends with the tail of each *.log in its tmp_path
        self.out = out.with_name(f"{out.name}-{instance}.log")
        with open(self.out, "wb") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.txn_copier", bs, "copy-a", "copy-b",
                 "copier-group", "copier", str(pause_s)], stdout=fh, stderr=subprocess.STDOUT, cwd=str(REPO))

    def committed(self) -> int:
        lines = [ln for ln in self.out.read_text().splitlines() if ln.startswith("committed ")]
        return int(lines[-1].split()[1]) if lines else 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


if __name__ == "__main__":
    main(*sys.argv[1:7])
