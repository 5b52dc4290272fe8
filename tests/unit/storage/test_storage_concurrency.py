"""The broker appends and reads on its event-loop thread while the LogManager thread runs
retention, compaction and flushes on the same logs: nothing may fail or go missing."""

from __future__ import annotations

import threading
import time

from sparklog.protocol.errors import OffsetOutOfRangeError
from sparklog.protocol.records import decode_batches
from sparklog.storage import LogConfig, PartitionLog
from sparklog.storage.cleaner import clean_log
from tests.helpers.batches import make_batch


def test_appends_reads_vs_retention_compaction_flush(tmp_path):
    cfg = LogConfig(segment_bytes=2000, cleanup_policy="compact,delete", retention_bytes=20_000,
                    retention_ms=-1, file_delete_delay_ms=50, min_cleanable_dirty_ratio=0.0)
    log = PartitionLog(str(tmp_path / "t-0"), cfg)
    stop = threading.Event()
    errors: list[BaseException] = []
    appended: list[int] = []

    def producer():
        try:
            i = 0
            while not stop.is_set() and i < 1500:
                keys = [b"k%d" % (i % 50), b"k%d" % ((i + 7) % 50)]
                info = log.append_as_leader(make_batch(2, keys=keys), 0)
                log.update_high_watermark(info.last_offset + 1)
                appended.append(info.last_offset)
                i += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def consumer():
        try:
            while not stop.is_set():
                start = log.log_start_offset
                try:
                    info = log.read(start, 50_000, max_offset=log.high_watermark)
                except OffsetOutOfRangeError:
                    continue  # retention moved the start between the two calls
                batches = decode_batches(info.read_bytes())
                offs = [b.base_offset for b in batches]
                assert offs == sorted(offs)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def background():
        try:
            while not stop.is_set():
                log.delete_old_segments()
                clean_log(log, force=True)
                log.flush_if_due()
                log.delete_pending_files()
                time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (producer, consumer, background)]
    for t in threads:
        t.start()
    threads[0].join(timeout=30)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    assert not errors, errors
    assert appended and log.log_end_offset == appended[-1] + 1
    log.delete_old_segments()  # one last pass after the final appends
    assert log.size_bytes <= 20_000 + 2000 and log.log_start_offset > 0
    # everything still readable, in order, and the log reopens to the same end
    info = log.read(log.log_start_offset, 1 << 24)
    offs = [r.offset for b in decode_batches(info.read_bytes()) for r in b.records]
    assert offs == sorted(offs) and offs[-1] == log.log_end_offset - 1
    leo = log.log_end_offset
    log.close()
    again = PartitionLog(str(tmp_path / "t-0"), cfg)
    assert again.log_end_offset == leo
    again.close()
