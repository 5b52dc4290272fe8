"""A Jepsen-style transactional copy: a copier process reads topic A and writes topic B,
committing its consumed offsets in the same transaction, and is SIGKILLed mid-stream three
times (each restart fences the previous instance by transactional id and resumes from the
committed offsets). A read_committed reader of B must see every record of A exactly once,
in A's order per partition: lost 0, duplicated 0, reordered 0."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.kafka_clients import (
    READ_COMMITTED,
    Msg,
    ck_produce,
    create_topic,
    kcat_consume,
)
from tests.helpers.polling import wait_for
from tests.helpers.servers import REPO

PARTS = 3
N = 3000


class Copier:
    """One copier process; its stdout lines go to a file the test reads progress from."""

    def __init__(self, bs: str, out: Path, instance: int) -> None:
        self.out = out.with_name(f"{out.name}-{instance}")
        with open(self.out, "wb") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.txn_copier", bs, "copy-a", "copy-b",
                 "copier-group", "copier"], stdout=fh, stderr=subprocess.STDOUT, cwd=str(REPO))

    def committed(self) -> int:
        lines = [ln for ln in self.out.read_text().splitlines() if ln.startswith("committed ")]
        return int(lines[-1].split()[1]) if lines else 0

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def read_b(bs: str) -> list[Msg]:
    return sorted(kcat_consume(bs, "copy-b", PARTS, 0, isolation=READ_COMMITTED),
                  key=lambda m: (m.partition, m.offset))


def test_copier_killed_three_times_copies_exactly_once(cluster: EmbeddedCluster,
                                                       tmp_path: Path) -> None:
    bs = cluster.bootstrap_servers
    create_topic(bs, "copy-a", PARTS)
    create_topic(bs, "copy-b", PARTS)
    source = [Msg(i % PARTS, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i)
              for i in range(N)]
    ck_produce(bs, "copy-a", source)
    copiers: list[Copier] = []
    try:
        for instance in range(3):
            c = Copier(bs, tmp_path / "copier", instance)
            copiers.append(c)
            # let it commit some transactions, then kill it mid-stream
            wait_for(lambda c=c: c.committed() >= 200, 40, f"copier {instance} progress")
            c.kill()
        last = Copier(bs, tmp_path / "copier", 3)
        copiers.append(last)
        wait_for(lambda: len(read_b(bs)) >= N, 50, "the copy to finish")
    finally:
        for c in copiers:
            c.kill()
    got = read_b(bs)
    want = {p: [m.value for m in source if m.partition == p] for p in range(PARTS)}
    counts = Counter((m.partition, m.value) for m in got)
    lost = [(p, v) for p in want for v in want[p] if (p, v) not in counts]
    dup = [k for k, n in counts.items() if n > 1]
    assert (len(lost), len(dup), len(got)) == (0, 0, N), (lost[:5], dup[:5])
    for p in range(PARTS):
        assert [m.value for m in got if m.partition == p] == want[p], f"partition {p} reordered"
